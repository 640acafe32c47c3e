package cluster_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// startCluster starts n node processes on 127.0.0.1..n, each joining the
// first, and waits until every one sees all of them and works on a phase.
func startCluster(t testing.TB, c *procCluster, n int) []*proc {
	t.Helper()
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
	wait.For(t, 60*time.Second, "cluster formed", func() bool { return c.formed(ps) })
	return ps
}

// startCrawl starts the cluster web and n nodes and posts the seeds to
// node seedTo (they reach their owners).
func startCrawl(t *testing.T, n, seedTo int) (*procCluster, synthweb.Expectation, []*proc) {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	web, webAddr, exp := clusterWeb(t)
	c := newProcCluster(t, web, webAddr)
	ps := startCluster(t, c, n)
	if err := ps[seedTo].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}
	return c, exp, ps
}

// TestProcThreeNodesCrawl: three node processes crawl a synthetic web of
// over 20,000 pages to completion: every reachable page fetched exactly once
// in the cluster, never two requests at once to a host, each node's share
// of the pages within 15% of the mean.
func TestProcThreeNodesCrawl(t *testing.T) {
	start := time.Now()
	c, exp, ps := startCrawl(t, 3, 2)
	webAddr := c.webAddr
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
	checkCrawl(t, webAddr, exp, c.delay, 1, 0, ps) // robots.txt once per host by the cluster
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

// progress tracks the pages fetched by every node ever started (the last
// figure of a node that stopped is kept).
type progress struct {
	last map[string]int64
}

func (pr *progress) total(ps []*proc) int64 {
	if pr.last == nil {
		pr.last = map[string]int64{}
	}
	for _, p := range ps {
		if st, err := p.status(); err == nil {
			pr.last[p.name] = st.PagesFetched
		}
	}
	var t int64
	for _, n := range pr.last {
		t += n
	}
	return t
}

// logged sums the integer field key of the node's log records msg.
func logged(p *proc, msg, key string) (records int, sum int64) {
	for _, r := range p.logRecords(msg) {
		records++
		if v, ok := r[key].(float64); ok {
			sum += int64(v)
		}
	}
	return records, sum
}

// TestProcJoinAndLeave: a fourth node joins at one third of the crawl and
// one of the first three leaves gracefully (SIGTERM) at two thirds. The
// members move the new node's share to it (IN_LIST URLs and the
// fingerprints of completed ones), the leaving node hands every record to
// the others before it leaves, and still every reachable page is fetched
// exactly once, never two requests at once on a host.
func TestProcJoinAndLeave(t *testing.T) {
	c, exp, ps := startCrawl(t, 3, 0)
	webAddr := c.webAddr
	all := slices.Clone(ps)
	running := slices.Clone(ps)
	leaver := ps[1]
	var joiner *proc
	var pr progress
	seen := 0
	wait.For(t, 5*time.Minute, "crawl done with a join and a leave", func() bool {
		total := pr.total(all)
		switch {
		case joiner == nil && total >= int64(exp.Fetches)/3:
			joiner = c.add(3)
			joiner.start(ps[0].gossip)
			joiner.waitUp()
			all, running = append(all, joiner), append(running, joiner)
			t.Logf("node3 joined at %d pages", total)
		case joiner != nil && leaver.running() && total >= 2*int64(exp.Fetches)/3:
			t.Logf("node1 leaves at %d pages", total)
			if err := leaver.stop(syscall.SIGTERM, 2*time.Minute); err != nil {
				t.Fatalf("node1 graceful leave: %v", err)
			}
			running = slices.DeleteFunc(running, func(p *proc) bool { return p == leaver })
		case !leaver.running():
			if crawlDone(running) {
				seen++
			} else {
				seen = 0
			}
		}
		return seen >= 3
	})
	checkCrawl(t, webAddr, exp, c.delay, len(all), 0, all)

	// The members moved records to the newcomer; the leaver handed off all
	// of its records and kept none.
	moved := int64(0)
	for _, p := range running {
		for _, r := range p.logRecords("rebalance done") {
			if ms, _ := r["members"].([]any); len(ms) == 4 {
				moved += int64(r["urls_moved"].(float64) + r["fingerprints_moved"].(float64))
			}
		}
	}
	if moved == 0 {
		t.Error("no member logged a rebalance that moved records to node3")
	}
	n, handed := logged(leaver, "leave hand-off done", "fingerprints_moved")
	_, waiting := logged(leaver, "leave hand-off done", "urls_waiting")
	if n != 1 || handed == 0 || waiting != 0 {
		t.Errorf("node1's hand-off: %d log records, %d fingerprints handed off, %d URLs left in its outbox", n, handed, waiting)
	}
	f, err := frontier.Open(frontier.DefaultOptions(filepath.Join(leaver.data, "frontier.db")))
	if err != nil {
		t.Fatal(err)
	}
	if cnt := f.Counts(); cnt.Total() != 0 {
		t.Errorf("node1 left with %+v records in its frontier, want none", cnt)
	}
	_ = f.Close()
	st, err := running[0].status()
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, m := range st.Members {
		states[m.Name] = m.State
	}
	if states["node1"] != "left" || states["node3"] != "alive" || len(st.Members) != 4 {
		t.Errorf("members seen by %s: %+v", running[0].name, st.Members)
	}
	logShares(t, running)
}

// TestProcKillAndRestart: one node is killed with SIGKILL mid-crawl; while
// it is away the others crawl its share of the new URLs; it restarts with
// the same --name and --data, rejoins, and the cluster finishes the crawl
// with no URL lost. Every duplicate fetch is a request that was in flight at
// the kill (the killed node never logged its answer, and fetched the URL
// again after its restart), so there are at most as many as the killed
// node's workers. Nothing else is fetched twice:
//   - a page fetched and archived but not recorded yet is settled, on
//     restart, from the WARC file the kill left open (not fetched again);
//   - a page fetched just before the kill (its replica not sent yet) is not
//     fetched again by the member that owns the URL while the node is away:
//     the URLs of the away node's share wait there (cluster.takeover_after,
//     Cluster.Held) and go back to it when it rejoins;
//   - once the node is back, the members move its share and the
//     fingerprints of what they fetched for it to it before it fetches.
func TestProcKillAndRestart(t *testing.T) {
	c, exp, ps := startCrawl(t, 3, 0)
	webAddr := c.webAddr
	victim := ps[2]
	var pr progress
	wait.For(t, 3*time.Minute, "40% of the crawl", func() bool { return pr.total(ps) >= int64(exp.Fetches)*2/5 })
	st, err := victim.status()
	if err != nil {
		t.Fatal(err)
	}
	killAt := time.Now()
	kill9(t, victim)
	killedAt := pr.total(ps[:2])
	t.Logf("node2 killed at %s with %d trips in flight at %d pages", killAt.UTC().Format("15:04:05.000"), st.Bucket.Fetching, killedAt)
	// While it is away, the others take its share of the new URLs: they
	// have declared it dead.
	waitSeenDead(t, victim, ps[:2])
	seenDead := time.Now()
	t.Logf("node2 seen dead after %v", seenDead.Sub(killAt).Round(time.Millisecond))
	// Away for a while (cluster.takeover_after is longer): the URLs of its
	// share reach the others, which keep them for it.
	wait.For(t, time.Minute, "the others crawl on without node2", func() bool {
		if time.Since(seenDead) < 3*time.Second {
			return false
		}
		return pr.total(ps[:2]) >= killedAt+int64(exp.Fetches)/10 || crawlDone(ps[:2])
	})
	restartAt := time.Now()
	t.Logf("node2 restarts at %s", restartAt.UTC().Format("15:04:05.000"))
	victim.start(ps[0].gossip)
	victim.waitUp()
	waitDone(t, ps, 4*time.Minute)
	rep := checkCrawl(t, webAddr, exp, c.delay, 4, exp.Fetches, ps) // duplicates are classified below

	dup := harness.Duplicated(rep, exp)
	var inTrip, takenOver, cut int
	var unexplained []string
	for u, evs := range harness.FetchEvents(dirsOf(ps), dup) {
		switch {
		case len(evs) == 1 && evs[0].At.After(killAt):
			cut++ // the request in flight at the kill never reached the log
		case len(evs) == 2 && evs[0].Node == victim.name && evs[0].At.Before(killAt) &&
			evs[1].Node == victim.name && evs[1].At.After(restartAt):
			inTrip++
		case len(evs) == 2 && evs[0].Node == victim.name && evs[0].At.Before(killAt) &&
			evs[1].Node != victim.name && evs[1].At.After(killAt):
			takenOver++
		default:
			unexplained = append(unexplained, fmt.Sprintf("%s: %v", u, evs))
		}
	}
	// Per worker at most three fetches never reached the log: its request
	// in flight, the page before it that is archived and parsed while that
	// request runs (its log line is written once it is archived), and a
	// lent page fetched whose outcome was being recorded (the node records
	// at most one per worker at once while its trips go on).
	t.Logf("%d duplicate fetches: %d requests in flight at the kill; %d pages of node2 recorded in its crawl log yet fetched again after its restart, %d fetched again by the others while it was away (both must be 0)",
		rep.Duplicates, cut, inTrip, takenOver)
	if cut > 3*c.workers {
		t.Errorf("%d fetches in flight at the kill fetched again: more than three for each of node2's %d workers", cut, c.workers)
	}
	if inTrip > 0 {
		t.Errorf("%d pages node2 fetched and logged before the kill were fetched again after its restart (not settled from its WARC file)", inTrip)
	}
	if takenOver > 0 {
		t.Errorf("%d pages node2 fetched before the kill were fetched again by the others (not held for it)", takenOver)
	}
	if len(unexplained) > 0 {
		t.Errorf("%d duplicates not explained by the kill (of %d):\n%s", len(unexplained), rep.Duplicates, strings.Join(unexplained, "\n"))
	}
	logShares(t, ps)
}

// logShares logs each node's pages and frontier.
func logShares(t *testing.T, ps []*proc) {
	for _, p := range ps {
		if s, err := p.status(); err == nil {
			t.Logf("%s: pages=%d frontier=%+v", p.name, s.PagesFetched, s.Frontier)
		}
	}
}

// TestProcWrongKeyRefused: a node whose cluster key differs cannot join,
// exits with an error that says so, and the cluster does not see it.
func TestProcWrongKeyRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test in -short mode")
	}
	web, webAddr, _ := clusterWeb(t)
	c := newProcCluster(t, web, webAddr)
	ps := startCluster(t, c, 1)
	bad := c.add(1)
	bad.keyFile = filepath.Join(c.dir, "other.key")
	if err := os.WriteFile(bad.keyFile, []byte("another key of 32 bytes, not it!"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad.start(ps[0].gossip)
	select {
	case <-bad.done:
	case <-time.After(time.Minute):
		t.Fatal("a node with a wrong cluster key kept running")
	}
	if bad.exitErr == nil {
		t.Fatal("a node with a wrong cluster key exited with status 0")
	}
	out := bad.tail(5)
	if !strings.Contains(out, "another cluster key") || !strings.Contains(out, "--cluster-key-file") {
		t.Errorf("the error does not say the cluster key differs:\n%s", out)
	}
	t.Logf("refused: %s", out)
	st, err := ps[0].status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 1 {
		t.Errorf("node0 sees %+v", st.Members)
	}
}
