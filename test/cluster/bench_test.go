package cluster_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// metricSum sums the samples of one series name in a /metrics text.
func metricSum(text, name string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? ([0-9.e+-]+)$`)
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum
}

// BenchmarkCrawl crawls the cluster web (over 20,000 pages, delay 5ms) to
// completion with one node alone and with three cluster nodes, each a
// process on its own loopback address, and reports pages/s (from the
// seeds to the last page) and, for the cluster, the exchange's network
// messages (batches and their acks) per 100 forwarded URLs. Reproduce:
//
//	go test ./test/cluster -run '^$' -bench Crawl -benchtime 1x
//
// PHASECRAWL_BENCH_PHASE and PHASECRAWL_BENCH_GUARD (durations) override
// the cluster's phase duration (default 500ms) and guard (default 50ms).
func BenchmarkCrawl(b *testing.B) {
	phase, guard := 500*time.Millisecond, 50*time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("PHASECRAWL_BENCH_PHASE")); err == nil {
		phase = d
	}
	if d, err := time.ParseDuration(os.Getenv("PHASECRAWL_BENCH_GUARD")); err == nil {
		guard = d
	}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var pagesPerSec, msgsPer100 float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				web, webAddr, exp := clusterWeb(b)
				c := newProcCluster(b, web, webAddr)
				c.phase, c.guard, c.alone = phase, guard, n == 1
				var ps []*proc
				if n == 1 {
					p := c.add(0)
					p.start()
					p.waitUp()
					ps = []*proc{p}
				} else {
					ps = startClusterB(b, c, n)
				}
				b.StartTimer()
				start := time.Now()
				if err := ps[0].postSeeds(web.Seeds()); err != nil {
					b.Fatal(err)
				}
				var doneAt time.Time
				seen := 0
				waitUntil(b, 5*time.Minute, "crawl done", func() bool {
					if crawlDone(ps) {
						if seen == 0 {
							doneAt = time.Now()
						}
						seen++
					} else {
						seen = 0
					}
					return seen >= 3
				})
				b.StopTimer()
				var pages, batches, forwarded float64
				for _, p := range ps {
					m, err := p.metrics()
					if err != nil {
						b.Fatal(err)
					}
					pages += metricSum(m, "phasecrawl_pages_fetched_total")
					batches += metricSum(m, "phasecrawl_exchange_batches_total")
					forwarded += metricSum(m, "phasecrawl_urls_forwarded_total")
				}
				if int(pages) != exp.Fetches {
					b.Errorf("%d pages fetched, want %d", int(pages), exp.Fetches)
				}
				pagesPerSec = pages / doneAt.Sub(start).Seconds()
				if forwarded > 0 {
					msgsPer100 = 100 * batches / forwarded
				}
				c.killAll()
			}
			b.ReportMetric(pagesPerSec, "pages/s")
			if n > 1 {
				b.ReportMetric(msgsPer100, "batches/100urls")
			}
		})
	}
}

// startClusterB is startCluster for benchmarks.
func startClusterB(b *testing.B, c *procCluster, n int) []*proc {
	var ps []*proc
	for i := 0; i < n; i++ {
		p := c.add(i)
		if i == 0 {
			p.start()
		} else {
			p.start(ps[0].gossip)
		}
		p.waitUp()
		ps = append(ps, p)
	}
	waitUntil(b, 60*time.Second, "cluster formed", func() bool { return c.formed(ps) })
	return ps
}
