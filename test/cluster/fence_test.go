package cluster_test

import (
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestProcTwoNodesFenced: in a cluster of two, the member left alone when
// the other is killed sees 1 of 2 members of its agreed view, not a
// majority, and fetches nothing (quorum fencing: it cannot tell a crash
// from a network cut); when the other restarts both crawl again and the
// crawl finishes with every page fetched. The only pages fetched twice are
// what the killed node had in flight: per worker, its request and a lent
// page whose outcome it was recording, at most twice its workers.
func TestProcTwoNodesFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	web, webAddr, exp := clusterWeb(t)
	c := newProcCluster(t, web, webAddr)
	c.env = append(c.env, "PHASECRAWL_CLUSTER_FENCE_AFTER=1s")
	ps := startCluster(t, c, 2)
	if err := ps[0].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}
	var pr progress
	wait.For(t, 3*time.Minute, "20% of the crawl", func() bool { return pr.total(ps) >= int64(exp.Fetches)/5 })
	kill9(t, ps[1])
	want := "sees 1 of 2 members of the agreed view; a majority is 2"
	wait.For(t, 30*time.Second, "node0 fenced", func() bool {
		st, err := ps[0].status()
		return err == nil && st.Phase.Fenced == want && st.Phase.Current == -1
	})
	m, err := ps[0].metrics()
	if err != nil {
		t.Fatal(err)
	}
	if v := metricSum(m, cluster.MetricClusterFenced); v != 1 {
		t.Errorf("%s = %v while fenced, want 1", cluster.MetricClusterFenced, v)
	}
	// Requests started before the fence end by their phase's deadline: the
	// bound the fence promises, waited out; then nothing is fetched over
	// three phases, which only the clock can show.
	time.Sleep(c.phase + time.Second)
	st0, err := ps[0].status()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * c.phase)
	st1, err := ps[0].status()
	if err != nil {
		t.Fatal(err)
	}
	if st1.PagesFetched != st0.PagesFetched || st1.Phase.Fenced == "" {
		t.Errorf("node0 alone fetched %d pages over %s (fenced: %q)", st1.PagesFetched-st0.PagesFetched, 3*c.phase, st1.Phase.Fenced)
	}
	ps[1].start(ps[0].gossip)
	ps[1].waitUp()
	wait.For(t, time.Minute, "both unfenced and on a phase", func() bool {
		if !c.formed(ps) {
			return false
		}
		st, err := ps[0].status()
		return err == nil && st.Phase.Fenced == ""
	})
	waitDone(t, ps, 4*time.Minute)
	checkCrawl(t, webAddr, exp, c.delay, 4, 2*c.workers, ps)
}
