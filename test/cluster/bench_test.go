package cluster_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/harness"
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

// BenchmarkCrawl crawls the cluster web (over 20,000 pages) to completion
// with one node alone and with three cluster nodes, each a process on its
// own loopback address, and reports pages/s (from the seeds to the last
// page) and, for the cluster, the exchange's batch messages per 100
// forwarded URLs (each batch is answered by one ack). Reproduce:
//
//	go test ./test/cluster -run '^$' -bench Crawl -benchtime 1x -count 3
//
// The politeness delay is 20ms and the cluster's phases 300ms with a
// 15ms guard: a request that outlives the guard is cut at the swap and
// fetched again ("dups" counts the pages the web served twice; a worker
// stops a host early when twice its last response time does not fit, so
// the guard only has to cover an unexpectedly slow answer); and a phase
// should be short next to the time a node needs for its share of a host's
// URLs, or hosts sit idle until their next owner's phase comes, and each
// level of links waits about a phase for its owner's turn on its host
// (README, "Cluster performance"). PHASECRAWL_BENCH_DELAY,
// PHASECRAWL_BENCH_PHASE, PHASECRAWL_BENCH_GUARD and
// PHASECRAWL_BENCH_BATCH_DELAY (durations) override them and the
// exchange's batch delay (default: the configured default,
// cluster.batch_delay). PHASECRAWL_BENCH_SERIES=1 logs the pages served per
// second and the hosts that ended last; PHASECRAWL_BENCH_SCALE=N (1..20)
// crawls the cluster tests' web made N times larger.
func BenchmarkCrawl(b *testing.B) {
	phase, guard := 300*time.Millisecond, 15*time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("PHASECRAWL_BENCH_PHASE")); err == nil {
		phase = d
	}
	if d, err := time.ParseDuration(os.Getenv("PHASECRAWL_BENCH_GUARD")); err == nil {
		guard = d
	}
	delay := 20 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("PHASECRAWL_BENCH_DELAY")); err == nil {
		delay = d
	}
	scale := 1
	if v, err := strconv.Atoi(os.Getenv("PHASECRAWL_BENCH_SCALE")); err == nil && v >= 1 && v <= 20 {
		scale = v
	}
	batchDelay := os.Getenv("PHASECRAWL_BENCH_BATCH_DELAY") // "": the default cluster.batch_delay
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var pagesPerSec, msgsPer100, dups float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				web, webAddr, exp := clusterWebScaled(b, scale)
				c := newProcCluster(b, web, webAddr)
				c.phase, c.guard, c.alone, c.delay = phase, guard, n == 1, delay
				if batchDelay != "" {
					c.env = []string{"PHASECRAWL_CLUSTER_BATCH_DELAY=" + batchDelay}
				}
				ps := startNodes(b, c, n)
				b.StartTimer()
				start, doneAt := crawlSeeds(b, ps, web.Seeds(), 5*time.Minute)
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
				if rep, err := harness.WebReport(webAddr); err == nil {
					dups = float64(rep.Duplicates)
				}
				if os.Getenv("PHASECRAWL_BENCH_SERIES") != "" {
					logSeries(b, webAddr, start)
				}
				if forwarded > 0 {
					msgsPer100 = 100 * batches / forwarded
				}
				c.killAll()
			}
			b.ReportMetric(pagesPerSec, "pages/s")
			b.ReportMetric(dups, "dups")
			if n > 1 {
				b.ReportMetric(msgsPer100, "batches/100urls")
			}
		})
	}
}

// startNodes starts n members of c (a node alone when n is 1) and waits
// until they are up (and, for a cluster, formed).
func startNodes(b *testing.B, c *procCluster, n int) []*proc {
	b.Helper()
	if n > 1 {
		return startCluster(b, c, n)
	}
	p := c.add(0)
	p.start()
	p.waitUp()
	return []*proc{p}
}

// crawlSeeds posts seeds to the first node and waits (at most within)
// until every node reports the crawl done three polls in a row; it returns
// when the seeds were posted and when the crawl was first seen done.
func crawlSeeds(b *testing.B, ps []*proc, seeds []string, within time.Duration) (start, doneAt time.Time) {
	b.Helper()
	start = time.Now()
	if err := ps[0].postSeeds(seeds); err != nil {
		b.Fatal(err)
	}
	seen := 0
	wait.For(b, within, "crawl done", func() bool {
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
	return start, doneAt
}

// logSeries logs the pages the web served per second of the crawl and the
// hosts whose last page came latest (PHASECRAWL_BENCH_SERIES=1).
func logSeries(b *testing.B, webAddr string, start time.Time) {
	visits, err := harness.WebVisits(webAddr)
	if err != nil {
		b.Log(err)
		return
	}
	per := map[int]int{}
	for _, vs := range visits {
		for _, v := range vs {
			per[int(v.Start.Sub(start).Seconds())]++
		}
	}
	line := ""
	for i := 0; i < 60; i++ {
		if per[i] > 0 {
			line += fmt.Sprintf(" %d:%d", i, per[i])
		}
	}
	b.Log("pages per second:" + line)
	hosts, stats := synthweb.LastHosts(visits, 8)
	for i, h := range hosts {
		b.Logf("host %s: %d requests, first %.1fs, last %.1fs; %s", h, stats[i].Requests, stats[i].First.Sub(start).Seconds(),
			stats[i].Last.Sub(start).Seconds(), idleGaps(stats[i]))
	}
}

// idleGaps describes the time a host's connection sat idle between one
// response and the next request: the gaps' median and 90th percentile,
// and their sum against the host's busy time (synthweb.IdleGaps).
func idleGaps(g synthweb.GapStats) string {
	if g.Requests < 2 {
		return "no gaps"
	}
	return fmt.Sprintf("idle gaps p50 %s p90 %s, idle %s (%d gaps of 50ms or more: %s) against busy %s",
		g.P50.Round(10*time.Microsecond), g.P90.Round(10*time.Microsecond),
		g.Idle.Round(time.Millisecond), g.Long, g.LongIdle.Round(time.Millisecond), g.Busy.Round(time.Millisecond))
}
