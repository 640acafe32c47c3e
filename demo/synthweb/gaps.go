package synthweb

import (
	"slices"
	"strings"
	"time"
)

// LongGap is the idle time between two requests to one host that
// GapStats counts apart: a crawler's next URL of the host was not ready.
const LongGap = 50 * time.Millisecond

// GapStats describes one host's requests (Web.Visits) over a crawl: when
// they came, how long the host's server worked on them, and how long it
// sat idle between one response and the next request.
type GapStats struct {
	Requests    int
	First, Last time.Time     // the first and the last request's arrival
	Busy        time.Duration // the requests' time, summed
	Idle        time.Duration // the gaps between a response and the next request, summed
	P50, P90    time.Duration // the gaps' median and 90th percentile
	Long        int           // gaps of LongGap or more
	LongIdle    time.Duration // their sum
}

// IdleGaps computes a host's GapStats from its requests, in any order.
func IdleGaps(vs []Visit) GapStats {
	var s GapStats
	if len(vs) == 0 {
		return s
	}
	vs = slices.Clone(vs)
	slices.SortFunc(vs, func(a, b Visit) int { return a.Start.Compare(b.Start) })
	s.Requests, s.First, s.Last = len(vs), vs[0].Start, vs[len(vs)-1].Start
	gaps := make([]time.Duration, 0, len(vs)-1)
	for i, v := range vs {
		s.Busy += max(v.End.Sub(v.Start), 0)
		if i > 0 {
			g := max(v.Start.Sub(vs[i-1].End), 0)
			gaps = append(gaps, g)
			s.Idle += g
			if g >= LongGap {
				s.Long++
				s.LongIdle += g
			}
		}
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		s.P50, s.P90 = gaps[len(gaps)/2], gaps[len(gaps)*9/10]
	}
	return s
}

// LastHosts returns the GapStats of the k hosts of visits whose last
// request came latest, latest first: the hosts that ended a crawl.
func LastHosts(visits map[string][]Visit, k int) (hosts []string, stats []GapStats) {
	type hs struct {
		host string
		st   GapStats
	}
	all := make([]hs, 0, len(visits))
	for h, vs := range visits {
		all = append(all, hs{h, IdleGaps(vs)})
	}
	slices.SortFunc(all, func(a, b hs) int {
		if c := b.st.Last.Compare(a.st.Last); c != 0 {
			return c
		}
		return strings.Compare(a.host, b.host)
	})
	for _, x := range all[:min(k, len(all))] {
		hosts, stats = append(hosts, x.host), append(stats, x.st)
	}
	return hosts, stats
}
