package synthweb

import (
	"fmt"
	"slices"
	"time"
)

// Incident is one finding of Visits placed in time: a repeated fetch of a
// page, a request that arrived while another one to the same host was in
// progress, or two requests to a host closer than the crawler's delay.
type Incident struct {
	At     time.Time // arrival of the offending request
	Prev   time.Time // for a duplicate: arrival of the previous fetch of the page
	Host   string
	Kind   string // "duplicate", "overlap" or "gap"
	Detail string
}

func (i Incident) String() string {
	return fmt.Sprintf("%s %s %s: %s", i.At.Format("15:04:05.000"), i.Kind, i.Host, i.Detail)
}

// Incidents lists the incidents of visits (Web.Visits) in time order.
// need(host) is the smallest allowed gap between two request arrivals on
// host (max(delay, Crawl-delay)); a gap more than 1ms under it is an
// incident. robots.txt requests count for overlaps and gaps, not as
// duplicates (each node process may fetch it once).
func Incidents(visits map[string][]Visit, need func(host string) time.Duration) []Incident {
	var out []Incident
	for h, vs := range visits {
		vs = slices.Clone(vs)
		slices.SortStableFunc(vs, func(a, b Visit) int { return a.Start.Compare(b.Start) })
		min := need(h) - time.Millisecond
		seen := make(map[string]int, len(vs))
		last := make(map[string]time.Time, len(vs))
		var busyUntil time.Time
		for i, v := range vs {
			if v.URI != "/robots.txt" {
				if seen[v.URI]++; seen[v.URI] > 1 {
					out = append(out, Incident{At: v.Start, Prev: last[v.URI], Host: h, Kind: "duplicate",
						Detail: fmt.Sprintf("%s fetched for the %d. time (previous fetch %s)", v.URI, seen[v.URI], last[v.URI].Format("15:04:05.000"))})
				}
				last[v.URI] = v.Start
			}
			if i > 0 {
				if v.Start.Before(busyUntil) {
					out = append(out, Incident{At: v.Start, Host: h, Kind: "overlap", Detail: fmt.Sprintf("%s arrived %s before the previous request ended", v.URI, busyUntil.Sub(v.Start).Round(time.Microsecond))})
				}
				if g := v.Start.Sub(vs[i-1].Start); min > 0 && g < min {
					out = append(out, Incident{At: v.Start, Host: h, Kind: "gap", Detail: fmt.Sprintf("%s %s after %s, want >= %s", v.URI, g.Round(time.Microsecond), vs[i-1].URI, min+time.Millisecond)})
				}
			}
			if v.End.After(busyUntil) {
				busyUntil = v.End
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Incident) int { return a.At.Compare(b.At) })
	return out
}
