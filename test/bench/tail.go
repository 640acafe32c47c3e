package bench

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/test/synthweb"
)

// TailEnv, when set to 1 in the environment, makes each benchmark crawl log
// its tail report (TailReport): which hosts the crawl ended with, and why
// they ended so late. A measurement aid only: off by default.
const TailEnv = "PHASECRAWL_BENCH_TAIL"

// tailOn reports whether tail reports are wanted.
func tailOn() bool { return os.Getenv(TailEnv) == "1" }

// tailGap is the pause between two requests to one host above which the
// report counts it as a wait between two trips (or a politeness delay)
// rather than a request following the one before.
const tailGap = 20 * time.Millisecond

// TailReport describes the end of a crawl of web that started at start,
// from the requests the web recorded: the n hosts whose last request ended
// last (their requests, first and last request since the start, the pauses
// longer than tailGap and the others), then the chain of discoveries that
// led to the last one: the earliest fetched page linking to it (fetched
// before its first request), that page's host's, and so on back to a seed.
// A crawl of a large web ends with long chains of requests to one host (a
// slow host, a Crawl-delay host, a trap) found late: this shows which.
func TailReport(web *synthweb.Web, start time.Time, n int) string {
	visits := web.Visits()
	type hostEnd struct {
		name        string
		first, last time.Duration
	}
	var ends []hostEnd
	firstVisit := make(map[string]time.Duration, len(visits))
	for h, vs := range visits {
		ends = append(ends, hostEnd{h, vs[0].Start.Sub(start), vs[len(vs)-1].End.Sub(start)})
		firstVisit[h] = vs[0].Start.Sub(start)
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].last > ends[j].last })
	var b strings.Builder
	for _, e := range ends[:min(n, len(ends))] {
		vs := visits[e.name]
		var long, short, busy time.Duration
		nlong := 0
		for i, v := range vs {
			busy += v.End.Sub(v.Start)
			if i == 0 {
				continue
			}
			if g := v.Start.Sub(vs[i-1].End); g > tailGap {
				long, nlong = long+g, nlong+1
			} else {
				short += g
			}
		}
		fmt.Fprintf(&b, "%s: %d requests from %.3fs to %.3fs, responses %v, %d pauses > %v (%v), the other %d gaps %v\n",
			e.name, len(vs), e.first.Seconds(), e.last.Seconds(), busy.Round(time.Millisecond), nlong, tailGap,
			long.Round(time.Millisecond), len(vs)-1-nlong, short.Round(time.Millisecond))
	}
	if len(ends) == 0 {
		return b.String()
	}
	// found[h]: the earliest fetched page linking to h, fetched before h's first request.
	type page struct {
		at  time.Duration
		url string
	}
	found := make(map[string]page)
	for h, vs := range visits {
		for _, v := range vs {
			at := v.Start.Sub(start)
			for _, to := range web.LinkedHosts(h, v.URI) {
				if f, ok := found[to]; (!ok || at < f.at) && at <= firstVisit[to] {
					found[to] = page{at, h + v.URI}
				}
			}
		}
	}
	h := ends[0].name
	for range 20 {
		f, ok := found[h]
		if !ok {
			fmt.Fprintf(&b, "  %s first requested at %.3fs (a seed, or found by a page not recorded)\n", h, firstVisit[h].Seconds())
			break
		}
		fmt.Fprintf(&b, "  %s first requested at %.3fs, found by %s fetched at %.3fs\n", h, firstVisit[h].Seconds(), f.url, f.at.Seconds())
		h, _, _ = strings.Cut(f.url, "/")
	}
	return b.String()
}
