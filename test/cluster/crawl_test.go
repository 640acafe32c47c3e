package cluster_test

import (
	"math"
	"strings"
	"testing"
	"time"
)

// startCluster starts n node processes on 127.0.0.1..n, each joining the
// first, and waits until every one sees all of them and works on a phase.
func startCluster(t *testing.T, c *procCluster, n int) []*proc {
	t.Helper()
	var ps []*proc
	for i := 0; i < n; i++ {
		p := c.add(i)
		if i == 0 {
			p.start()
		} else {
			p.start(ps[0].gossip)
		}
		ps = append(ps, p)
	}
	waitUntil(t, 60*time.Second, "cluster formed", func() bool { return c.formed(ps) })
	return ps
}

// TestProcThreeNodesCrawl: three node processes crawl a synthetic web of
// over 20,000 pages to completion: every reachable page fetched exactly once
// in the cluster, never two requests at once to a host, each node's share
// of the pages within 15% of the mean.
func TestProcThreeNodesCrawl(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	web, srv, exp := clusterWeb(t)
	c := newProcCluster(t, srv)
	ps := startCluster(t, c, 3)
	start := time.Now()
	if err := ps[2].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ps, 4*time.Minute)
	elapsed := time.Since(start)
	var pages []int64
	var total int64
	for _, p := range ps {
		st, err := p.status()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: pages=%d frontier=%+v", p.name, st.PagesFetched, st.Frontier)
		pages = append(pages, st.PagesFetched)
		total += st.PagesFetched
	}
	t.Logf("%d pages in %s by 3 processes (%.0f pages/s)", total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
	if m, err := ps[0].metrics(); err == nil {
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, "phasecrawl_fetch_duration_seconds_bucket") || strings.HasPrefix(l, "phasecrawl_fetch_errors") {
				t.Log(l)
			}
		}
	}
	checkCrawl(t, web, exp, c.delay, 3, 0)
	if total != int64(exp.Fetches) {
		t.Errorf("cluster fetched %d pages, want %d", total, exp.Fetches)
	}
	mean := float64(total) / 3
	for i, p := range pages {
		if dev := math.Abs(float64(p)-mean) / mean; dev > 0.15 {
			t.Errorf("%s fetched %d pages, %.1f%% from the mean %.0f (want within 15%%)", ps[i].name, p, 100*dev, mean)
		}
	}
}
