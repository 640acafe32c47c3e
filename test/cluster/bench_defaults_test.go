package cluster_test

import (
	"fmt"
	"github.com/phasecrawl/phasecrawl/test/harness"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
)

// BenchmarkCrawlDefaults crawls a synthetic web of about 10,000 pages with
// delay 0 and the shipped settings otherwise (phase_duration, guard,
// workers, batch delay), with one node alone and with three
// cluster nodes, each a process on its own loopback address, and reports
// the time from the seeds to the last page, pages/s, the pages served
// twice and, for the cluster, the URLs lent (fetched by the member working
// on their host's phase for their owner). Reproduce:
//
//	go test ./test/cluster -run '^$' -bench CrawlDefaults -benchtime 1x -count 3
//
// PHASECRAWL_BENCH_LEND=false runs the cluster without lending
// (cluster.lend, on by default); PHASECRAWL_BENCH_PHASE and PHASECRAWL_BENCH_BATCH_DELAY
// override the phase duration and cluster.batch_delay;
// PHASECRAWL_BENCH_NODE_ENV="PHASECRAWL_FRONTIER_BATCH_DELAY=5ms ..." sets
// any other setting of the nodes;
// PHASECRAWL_BENCH_SERIES=1 logs the pages served per second.
func BenchmarkCrawlDefaults(b *testing.B) {
	var env []string
	if v := os.Getenv("PHASECRAWL_BENCH_LEND"); v != "" {
		env = append(env, "PHASECRAWL_CLUSTER_LEND="+v)
	}
	if v := os.Getenv("PHASECRAWL_BENCH_BATCH_DELAY"); v != "" {
		env = append(env, "PHASECRAWL_CLUSTER_BATCH_DELAY="+v)
	}
	// PHASECRAWL_BENCH_NODE_ENV passes more settings to the nodes, as
	// space-separated PHASECRAWL_KEY=value pairs (the nodes' environment
	// holds no other PHASECRAWL_ variable).
	env = append(env, strings.Fields(os.Getenv("PHASECRAWL_BENCH_NODE_ENV"))...)
	var phase time.Duration
	if d, err := time.ParseDuration(os.Getenv("PHASECRAWL_BENCH_PHASE")); err == nil {
		phase = d
	}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var secs, pagesPerSec, dups, lent float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				web, webAddr, exp := startWeb(b, smallWebConfig())
				c := newProcCluster(b, web, webAddr)
				c.phase, c.workers, c.delay, c.shipped, c.alone, c.env = phase, 0, 0, true, n == 1, env
				ps := startNodes(b, c, n)
				b.StartTimer()
				start, doneAt := crawlSeeds(b, ps, web.Seeds(), 15*time.Minute)
				b.StopTimer()
				var pages float64
				lent = 0
				for _, p := range ps {
					m, err := p.metrics()
					if err != nil {
						b.Fatal(err)
					}
					pages += metricSum(m, "phasecrawl_pages_fetched_total")
					lent += metricSum(m, "phasecrawl_guests_fetched_total")
				}
				if int(pages) < exp.Fetches {
					b.Errorf("%d pages fetched, want %d", int(pages), exp.Fetches)
				}
				secs = doneAt.Sub(start).Seconds()
				pagesPerSec = pages / secs
				if rep, err := harness.WebReport(webAddr); err == nil {
					dups = float64(rep.Duplicates)
				}
				if os.Getenv("PHASECRAWL_BENCH_SERIES") != "" {
					logSeries(b, webAddr, start)
				}
				c.killAll()
			}
			b.ReportMetric(secs, "s")
			b.ReportMetric(pagesPerSec, "pages/s")
			b.ReportMetric(dups, "dups")
			if n > 1 {
				b.ReportMetric(lent, "lent")
			}
		})
	}
}

// smallWebConfig is the synthetic web of BenchmarkCrawlDefaults and
// TestProcLendingChain: the cluster tests' web at about a third of its
// size (~10,000 pages; PHASECRAWL_BENCH_PAGES overrides the content pages).
func smallWebConfig() synthweb.Config {
	wc := synthweb.DefaultConfig()
	wc.Hosts /= 3
	wc.Pages /= 3
	wc.TrapHosts = 0 // the cluster's per-host cap is checked by TestProcMaxPagesPerHostClusterWide
	if v, err := strconv.Atoi(os.Getenv("PHASECRAWL_BENCH_PAGES")); err == nil && v >= wc.Hosts {
		wc.Pages = v
	}
	return wc
}
