package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// testCluster is the cluster layer of one node over a real frontier, with
// no crawler: the test plays the scheduler's part.
type testCluster struct {
	c      *Cluster
	f      *frontier.Frontier
	killed bool // gossip stopped without a leave (kill)
}

// kill stops the node's gossip without a leave, as a crash does: the others
// declare it dead. Its Close (at cleanup) then gives up its hand-off at once.
func (tc *testCluster) kill(t *testing.T) {
	t.Helper()
	tc.killed = true
	tc.c.cfg.HandoffTimeout = 10 * time.Millisecond
	if err := tc.c.members.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func startTestCluster(t *testing.T, name string, join ...string) *testCluster {
	t.Helper()
	return startTestClusterWith(t, name, nil, join...)
}

// startTestClusterWith starts a test node whose configuration tune adjusts.
func startTestClusterWith(t *testing.T, name string, tune func(*NodeConfig), join ...string) *testCluster {
	t.Helper()
	dir := t.TempDir()
	fo := frontier.DefaultOptions(filepath.Join(dir, "frontier.db"))
	fo.NoSync = true
	f, err := frontier.Open(fo)
	if err != nil {
		t.Fatal(err)
	}
	cfg := NodeConfig{
		Name: name, Gossip: "127.0.0.1:0", Join: join, Key: testKey, Exchange: "127.0.0.1:0", API: "127.0.0.1:1",
		Outbox: filepath.Join(dir, "outbox.db"), Tune: membership.FastTimings, NoSync: true,
		Phasing:  Phasing{Phases: 1, PhaseDuration: 500 * time.Millisecond, Guard: 50 * time.Millisecond, Columns: 1999},
		Timeouts: Timeouts{LeaveTimeout: time.Second, HandoffTimeout: 30 * time.Second, JoinTimeout: time.Minute},
	}
	if tune != nil {
		tune(&cfg)
	}
	c, err := Start(cfg, f, testLogger())
	if err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	tc := &testCluster{c: c, f: f}
	t.Cleanup(func() { tc.close(t) })
	return tc
}

func (tc *testCluster) close(t *testing.T) {
	if err := tc.c.Close(); err != nil && !tc.killed {
		t.Errorf("%s: close: %v", tc.c.cfg.Name, err)
	}
	_ = tc.f.Close()
}

// fetching waits until the node's join gate opened.
func (tc *testCluster) fetching(t *testing.T) {
	t.Helper()
	wait.For(t, 30*time.Second, tc.c.cfg.Name+": the members settled for it", func() bool { return !tc.c.joining.Load() })
}

// records returns every record of the frontier by URL.
func records(t *testing.T, f *frontier.Frontier) map[string]frontier.Record {
	t.Helper()
	out := map[string]frontier.Record{}
	var from frontier.Cursor
	for {
		recs, next, end, err := f.ScanRecords(from, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out[r.URL] = r
		}
		if end {
			return out
		}
		from = next
	}
}

// TestRebalanceJoinAndHandoff: a member joins a node that holds URLs in
// every state; the node moves to it exactly the records the newcomer owns,
// IN_LIST ones to be crawled there and COMPLETED ones as completed, and the
// newcomer starts only once that is done. Then the newcomer leaves
// gracefully and hands everything back. Nothing is lost or duplicated.
func TestRebalanceJoinAndHandoff(t *testing.T) {
	ctx := context.Background()
	a := startTestCluster(t, "a")
	a.fetching(t)
	var urls []frontier.NewURL
	for i := range 3000 {
		h := fmt.Sprintf("h%d.test", i%40)
		urls = append(urls, frontier.NewURL{URL: fmt.Sprintf("http://%s/p%d", h, i), Host: h, Depth: i % 4})
	}
	if n, err := a.f.Add(ctx, urls); err != nil || n != len(urls) {
		t.Fatalf("add: %d %v", n, err)
	}
	var done []frontier.Ref
	var results []frontier.Result
	for _, u := range urls[:1000] {
		fp := frontier.Fingerprint(u.URL)
		done = append(done, frontier.Ref{FP: fp, Host: u.Host})
		results = append(results, frontier.Result{FP: fp, Host: u.Host, State: frontier.Completed, Status: 200, Reason: "ok"})
	}
	if err := a.f.MarkInProgress(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := a.f.Finish(ctx, results); err != nil {
		t.Fatal(err)
	}

	b := startTestCluster(t, "b", a.c.Members().Addr())
	b.fetching(t)
	ring := ring.New([]string{"a", "b"})
	// Each record is with its owner; a COMPLETED one b owns also stays at
	// a, the member ranked second for it, as its replica.
	owned, replicas := 0, 0
	for name, tc := range map[string]*testCluster{"a": a, "b": b} {
		for u, r := range records(t, tc.f) {
			first, second := ring.Top2(r.FP)
			switch {
			case first == name:
				owned++
			case second == name && r.State == frontier.Completed && r.Reason == frontier.ReasonReplica:
				replicas++
			default:
				t.Fatalf("%s holds %s (%s, %s), owned by %s", name, u, r.State, r.Reason, first)
			}
		}
	}
	ca, cb := a.f.Counts(), b.f.Counts()
	if owned != 3000 || ca.Completed != 1000 || int64(replicas) != cb.Completed || ca.InProgress+cb.InProgress != 0 {
		t.Fatalf("after the join: %d records with their owner, %d replicas; a %+v, b %+v", owned, replicas, ca, cb)
	}
	if cb.Completed == 0 || cb.InList == 0 || a.c.movedURLs.Load() != uint64(cb.InList) || a.c.movedFPs.Load() != uint64(cb.Completed) {
		t.Fatalf("b got %+v; a moved %d URLs and %d fingerprints", cb, a.c.movedURLs.Load(), a.c.movedFPs.Load())
	}
	recB := records(t, b.f)
	for _, u := range urls[:1000] {
		if r, ok := recB[u.URL]; ok && r.State != frontier.Completed {
			t.Fatalf("completed URL %s arrived at b as %s", u.URL, r.State)
		}
	}
	// A discovered URL b owns, sent to a by a member whose view is behind,
	// is forwarded to b.
	var late []frontier.NewURL
	for i := 0; len(late) < 5; i++ {
		u := frontier.NewURL{URL: fmt.Sprintf("http://late.test/%d", i), Host: "late.test"}
		if ring.Owner(frontier.Fingerprint(u.URL)) == "b" {
			late = append(late, u)
		}
	}
	if n, err := a.c.store(ctx, exchange.KindNew, late); err != nil || n != 0 {
		t.Fatalf("store of b's URLs at a: %d %v", n, err)
	}
	wait.For(t, 10*time.Second, "forwarded URLs at b", func() (bool, string) {
		c := b.f.Counts()
		return c.Total() == cb.Total()+5, fmt.Sprintf("%+v", c)
	})

	// b leaves gracefully: every record goes back to a.
	b.close(t)
	ca = a.f.Counts()
	if ca.Total() != 3005 || ca.Completed != 1000 || ca.InList != 2005 {
		t.Fatalf("after b's hand-off a holds %+v", ca)
	}
	if cb := b.f.Counts(); cb.Total() != 0 {
		t.Fatalf("b kept %+v", cb)
	}
	wait.For(t, 10*time.Second, "a sees only itself", func() (bool, string) {
		r := a.c.Ring()
		return r.Len() == 1, fmt.Sprintf("a sees %v", r.Members())
	})
	st := a.c.ClusterStatus(time.Now())
	if len(st.Members) != 2 || st.Members[1].Name != "b" || st.Members[1].State != "left" {
		t.Fatalf("a's status members: %+v", st.Members)
	}
}

// testKey is the cluster key of the test members.
var testKey = bytes.Repeat([]byte{0x42}, 32)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testLogger() *slog.Logger {
	if os.Getenv("PHASECRAWL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// TestReplicaSurvivesOwnerFailure: the owner of a URL sends the fingerprint
// of every page it completes to the member ranked second for it, which
// keeps it as a replica (a rebalance does not move it away) and, once the
// owner failed and the URL is its own, does not crawl it again when it is
// rediscovered.
func TestReplicaSurvivesOwnerFailure(t *testing.T) {
	ctx := context.Background()
	a := startTestCluster(t, "a")
	a.fetching(t)
	b := startTestCluster(t, "b", a.c.Members().Addr())
	b.fetching(t)
	a.fetching(t)
	ring := ring.New([]string{"a", "b"})
	var mine []frontier.NewURL // URLs a owns
	var results []frontier.Result
	var fps []frontier.Ref
	for i := 0; len(mine) < 200; i++ {
		u := frontier.NewURL{URL: fmt.Sprintf("http://r%d.test/p%d", i%7, i), Host: fmt.Sprintf("r%d.test", i%7)}
		fp := frontier.Fingerprint(u.URL)
		if ring.Owner(fp) != "a" {
			continue
		}
		mine, fps = append(mine, u), append(fps, frontier.Ref{FP: fp, Host: u.Host})
		results = append(results, frontier.Result{FP: fp, Host: u.Host, State: frontier.Completed, Status: 200, Reason: "ok"})
	}
	if n, err := a.f.Add(ctx, mine); err != nil || n != len(mine) {
		t.Fatalf("add: %d %v", n, err)
	}
	if err := a.f.MarkInProgress(ctx, fps); err != nil {
		t.Fatal(err)
	}
	if err := a.f.Finish(ctx, results); err != nil {
		t.Fatal(err)
	}
	if err := a.c.Replicate(ctx, mine); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, fmt.Sprintf("%d completed replicas at b", len(mine)), func() (bool, string) {
		c := b.f.Counts()
		return c.Completed == int64(len(mine)), fmt.Sprintf("%+v", c)
	})
	for u, r := range records(t, b.f) {
		if r.State != frontier.Completed || r.Reason != frontier.ReasonReplica {
			t.Fatalf("b holds %s as %s (%s), want a completed replica", u, r.State, r.Reason)
		}
	}
	// A rebalance at b (kicked by the replicas' arrival or not) keeps them.
	if m, err := b.c.moveAway(ctx, b.c.Ring(), map[string]uint64{}, false, false); err != nil || m.fps+m.urls != 0 {
		t.Fatalf("rebalance at b moved %+v (%v), want nothing", m, err)
	}

	// a fails (no leave): b owns a's URLs and does not take them again.
	a.kill(t)
	wait.For(t, 15*time.Second, "b sees only itself", func() (bool, string) {
		r := b.c.Ring()
		return r.Len() == 1, fmt.Sprintf("b sees %v", r.Members())
	})
	if n, err := b.c.store(ctx, exchange.KindNew, mine); err != nil || n != 0 {
		t.Fatalf("a's completed URLs rediscovered at b: %d added (%v), want 0", n, err)
	}
	if c := b.f.Counts(); c.InList != 0 || c.Completed != int64(len(mine)) {
		t.Fatalf("b after a's failure: %+v", c)
	}
}

// TestRebalanceRemoveAfterFailedWrite: a rebalance claims the records
// another member owns, files them in the outbox and removes them; when
// the removal's writes fail (a full disk), it writes it again until it
// goes through, so no claimed record stays IN_PROGRESS (in no queue: a
// next pass does not claim it again) and every one is moved once.
func TestRebalanceRemoveAfterFailedWrite(t *testing.T) {
	ctx := context.Background()
	a := startTestCluster(t, "a")
	a.fetching(t)
	ring := ring.New([]string{"a", "b"}) // b owns about half; it never comes
	var urls []frontier.NewURL
	for i := range 200 {
		h := fmt.Sprintf("h%d.test", i%7)
		urls = append(urls, frontier.NewURL{URL: fmt.Sprintf("http://%s/p%d", h, i), Host: h})
	}
	if n, err := a.f.Add(ctx, urls); err != nil || n != len(urls) {
		t.Fatalf("add: %d %v", n, err)
	}
	// The first write (the claim) goes through, the next six fail: long
	// enough, as a rule, for a's sender to hand b's URLs back to a before
	// the removal goes through (see below).
	const fails = 6
	var writes atomic.Int64
	a.f.SetFault(func() error {
		if k := writes.Add(1); k > 1 && k <= 1+fails {
			return &os.PathError{Op: "write", Path: "frontier.db", Err: syscall.ENOSPC}
		}
		return nil
	})
	m, err := a.c.moveAway(ctx, ring, map[string]uint64{}, false, false)
	a.f.SetFault(nil)
	if err != nil {
		t.Fatalf("rebalance: %v (moved %+v)", err, m)
	}
	if writes.Load() < 1+fails {
		t.Fatalf("%d frontier writes, want the %d failing ones written again", writes.Load(), fails)
	}
	owned := 0
	for _, u := range urls {
		if ring.Owner(frontier.Fingerprint(u.URL)) == "b" {
			owned++
		}
	}
	if c := a.f.Counts(); c.InProgress != 0 || m.urls != owned {
		t.Fatalf("after the rebalance: %+v, moved %+v; want %d URLs moved and none in progress", c, m, owned)
	}
	// b never comes: a's sender may hand b's URLs back at any moment (a
	// alone owns everything in its own ring), even before their removal
	// went through (those are then kept, queued again). So the moved
	// records are in the outbox or back in a's frontier. Once that
	// settles every URL is a's again, queued: none lost, none left
	// IN_PROGRESS.
	wait.For(t, 30*time.Second, "every URL back in a's frontier", func() bool {
		c := a.f.Counts()
		return a.c.outbox.Len() == 0 && c.InProgress == 0 && c.InList == int64(len(urls))
	})
}

// TestRebalanceBusyPhaseAfterSwap: a node that crawled alone (its gate
// open, one phase: every host its busy phase) is joined by a member, with
// 30 s phases. At the switch the test plays the scheduler's swap (the
// frontier re-keyed for two phases, the bucket's URLs back in the queue
// before); from then on the records the newcomer owns on the hosts of the
// node's new phase are no longer kept until that phase's slot ends (up to
// a whole epoch, the newcomer's own URLs held meanwhile): the newcomer's
// gate opens while the slot still runs, and every record is with its owner.
func TestRebalanceBusyPhaseAfterSwap(t *testing.T) {
	ctx := context.Background()
	long := func(cfg *NodeConfig) { cfg.PhaseDuration, cfg.Guard = 30*time.Second, time.Second }
	a := startTestClusterWith(t, "a", long)
	a.fetching(t)
	var urls []frontier.NewURL
	for i := range 2000 {
		h := fmt.Sprintf("h%d.test", i%40)
		urls = append(urls, frontier.NewURL{URL: fmt.Sprintf("http://%s/p%d", h, i), Host: h})
	}
	if n, err := a.f.Add(ctx, urls); err != nil || n != len(urls) {
		t.Fatalf("add: %d %v", n, err)
	}
	b := startTestClusterWith(t, "b", long, a.c.Members().Addr())
	// The scheduler's part at a: swap once a's schedule holds both members.
	var switched, slotEnd time.Time
	wait.For(t, 30*time.Second, "a's schedule took b", func() (bool, string) {
		st := a.c.sched.At(time.Now())
		if st.NPhase == 2 && st.Phase >= 0 {
			switched, slotEnd = time.Now(), st.RequestDeadline
			return true, ""
		}
		return false, fmt.Sprintf("%+v", st)
	})
	if err := a.f.SetPhases(2); err != nil {
		t.Fatal(err)
	}
	b.fetching(t)
	opened := time.Now()
	t.Logf("b's gate opened %v after the switch; a's slot ends %v after it",
		opened.Sub(switched).Round(time.Millisecond), slotEnd.Sub(switched).Round(time.Millisecond))
	// A switch within 5 s of the epoch's end leaves the slot too short to
	// tell (then the gate may open after it either way).
	if slotEnd.Sub(switched) > 5*time.Second && !opened.Before(slotEnd) {
		t.Errorf("b's gate opened only after a's slot ended: a kept the records of its busy phase after its swap")
	}
	r := ring.New([]string{"a", "b"})
	for name, tc := range map[string]*testCluster{"a": a, "b": b} {
		for u, rec := range records(t, tc.f) {
			if o := r.Owner(rec.FP); o != name {
				t.Errorf("%s holds %s (%s), owned by %s", name, u, rec.State, o)
			}
		}
	}
	if got := a.f.Counts().Total() + b.f.Counts().Total(); got != int64(len(urls)) {
		t.Errorf("a and b hold %d records, want %d", got, len(urls))
	}
}
