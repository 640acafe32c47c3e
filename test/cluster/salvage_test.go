package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/salvage"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// runSalvage runs `phasecrawl salvage args...` (bounded to two minutes) and
// returns its output and exit code.
func runSalvage(t *testing.T, c *procCluster, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"salvage"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run salvage: %v", err)
	}
	return out.String(), errOut.String(), code
}

// deadState is what a dead node's data directory says, read before the
// salvage: the pages it fetched and recorded as COMPLETED, the replicas it
// had not delivered yet (in its outbox), and how many entries it holds.
type deadState struct {
	completed      map[string]bool // fetched there (not a replica or a record moved there)
	replicaPending map[string]bool
	unfinished     int // IN_LIST, STALLED, IN_PROGRESS records
	outbox         int
	entries        int
}

func readDead(t *testing.T, data string) deadState {
	t.Helper()
	d, err := salvage.OpenDir(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := deadState{completed: map[string]bool{}, replicaPending: map[string]bool{}}
	err = d.Each(func(it salvage.Item) error {
		s.entries++
		switch {
		case it.Source == salvage.FromOutbox:
			s.outbox++
			if it.Kind == exchange.KindReplica {
				s.replicaPending[it.URL] = true
			}
		case it.State != frontier.Completed:
			s.unfinished++
		case it.Reason != frontier.ReasonReplica && it.Reason != frontier.ReasonMoved && it.Reason != "done_elsewhere":
			s.completed[it.URL] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestProcSalvageDeadNode: three nodes crawl; one is killed with SIGKILL
// at 40% of the crawl and never restarted. The two others take its share
// over (cluster.takeover_after, 3s here) and finish what they can reach,
// which is not everything: the URLs only the dead node held (its frontier's
// unfinished records, its outbox) are lost to them. `phasecrawl salvage`
// sends the dead node's data directory to a live member, and the crawl
// completes: every reachable page fetched, and a page the dead node had
// fetched is fetched again only when its fetch was in flight at the kill
// (the request, its record or its replica not done yet), at most a
// worker's worth each. Salvaging the directory a second time fetches
// nothing.
func TestProcSalvageDeadNode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	web, webAddr, exp := clusterWeb(t)
	c := newProcCluster(t, web, webAddr)
	c.env = append(c.env, "PHASECRAWL_CLUSTER_TAKEOVER_AFTER=3s")
	ps := startCluster(t, c, 3)
	if err := ps[0].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}
	victim, survivors := ps[2], ps[:2]
	var pr progress
	wait.For(t, 3*time.Minute, "40% of the crawl", func() bool { return pr.total(ps) >= int64(exp.Fetches)*2/5 })
	st, err := victim.status()
	if err != nil {
		t.Fatal(err)
	}
	killAt := time.Now()
	kill9(t, victim)
	t.Logf("%s killed with %d trips in flight at %d pages", victim.name, st.Bucket.Fetching, pr.total(ps))
	waitSeenDead(t, victim, survivors)
	seenDead := time.Now()
	// The survivors take its share over and crawl all they can reach.
	wait.For(t, time.Minute, "the survivors take the dead node's share over", func() bool {
		for _, p := range survivors {
			if len(p.logRecords("members away too long: crawling their share")) == 0 {
				return false
			}
		}
		return true
	})
	waitDone(t, survivors, 4*time.Minute)
	before, err := harness.WebReport(webAddr)
	if err != nil {
		t.Fatal(err)
	}
	missing := 0
	for u := range exp.Pages {
		if before.URLs[u] == 0 {
			missing++
		}
	}
	t.Logf("the survivors finished %v after the kill (%v after they saw it dead) with %d of %d reachable pages not fetched",
		time.Since(killAt).Round(time.Second), time.Since(seenDead).Round(time.Second), missing, exp.Fetches)
	if missing == 0 {
		t.Fatal("every page was fetched without the salvage: the test does not exercise it")
	}

	dead := readDead(t, victim.data)
	salvageAt := time.Now()
	out, errOut, code := runSalvage(t, c, "--data", victim.data, "--node", survivors[0].exchange, "--cluster-key-file", c.keyFile, "--json")
	if code != 0 {
		t.Fatalf("salvage: exit %d\n%s%s", code, out, errOut)
	}
	var sum salvage.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("salvage summary %q: %v", out, err)
	}
	t.Logf("salvage: %d entries in %d batches in %.3fs: frontier %+v, outbox %v, kinds %v, %d new to %s",
		sum.Sent, sum.Batches, sum.ElapsedS, sum.Frontier, sum.Outbox, sum.Kinds, sum.Added, sum.Peer)
	if sum.Sent != dead.entries || sum.Sent == 0 || sum.Skipped != 0 || sum.Peer != survivors[0].name {
		t.Errorf("salvage sent %d entries to %q (%d skipped); the directory holds %d", sum.Sent, sum.Peer, sum.Skipped, dead.entries)
	}
	if unf := sum.Frontier.InList + sum.Frontier.Stalled + sum.Frontier.InProgress; unf != dead.unfinished || unf == 0 {
		t.Errorf("salvage sent %d unfinished records, the directory holds %d", unf, dead.unfinished)
	}

	waitDone(t, survivors, 4*time.Minute)
	rep := checkCrawl(t, webAddr, exp, c.delay, len(ps), exp.Fetches, ps) // duplicates are classified below

	dup := harness.Duplicated(rep, exp)
	var cut, unrecorded, unreplicated, replicaPending, afterSalvage int
	var gap time.Duration // the longest time from a fetch recorded and not replicated to the kill
	var refetched, unexplained []string
	for u, evs := range harness.FetchEvents(dirsOf(ps), dup) {
		first, last := evs[0], evs[len(evs)-1]
		switch {
		case len(evs) == 1 && first.At.After(killAt):
			cut++ // the dead node's request in flight at the kill never reached its log
		case len(evs) == 2 && first.Node == victim.name && first.At.Before(killAt) && last.Node != victim.name && last.At.After(killAt):
			switch {
			case dead.replicaPending[u]:
				replicaPending++ // recorded, its replica still in the outbox
			case !dead.completed[u]:
				unrecorded++ // fetched and logged, its record not committed
			case killAt.Sub(first.At) < 5*time.Second:
				unreplicated++ // recorded, its replica not filed yet
				gap = max(gap, killAt.Sub(first.At))
			default:
				refetched = append(refetched, fmt.Sprintf("%s: %v", u, evs))
			}
			if last.At.After(salvageAt) {
				afterSalvage++
			}
		default:
			unexplained = append(unexplained, fmt.Sprintf("%s: %v", u, evs))
		}
	}
	t.Logf("%d duplicate fetches: %d requests in flight at the kill, %d pages fetched and not recorded, %d recorded and not replicated (fetched at most %v before the kill), %d whose replica was in the outbox (of %d replicas there); %d of them fetched again after the salvage",
		len(dup), cut, unrecorded, unreplicated, gap.Round(time.Millisecond), replicaPending, len(dead.replicaPending), afterSalvage)
	// A fetch that never reached the dead node's crawl log. Per worker at
	// most three: its request in flight, the page before it that is
	// archived and parsed while that request runs (its log line is
	// written once it is archived), and a lent page fetched whose outcome
	// was being recorded (the node records at most one per worker at once
	// while its trips go on).
	if cut > 3*c.workers {
		t.Errorf("%d fetches in flight at the kill fetched again: more than three for each of the dead node's %d workers", cut, c.workers)
	}
	// A page's crawl-log line is written just before the frontier commit
	// that records it, and its replica is filed just after: at the kill,
	// the pages of one commit at most (frontier.batch_size writes; they
	// come from every trip in flight, not one per worker) are logged and
	// not recorded, or recorded and not replicated.
	if group := config.Default().Frontier.BatchSize; unrecorded > group || unreplicated > group {
		t.Errorf("%d pages fetched and not recorded, %d recorded and not replicated at the kill: more than one frontier commit (%d writes)", unrecorded, unreplicated, group)
	}
	if len(refetched) > 0 {
		t.Errorf("%d pages the dead node had fetched, recorded and replicated were fetched again:\n%s", len(refetched), strings.Join(refetched, "\n"))
	}
	if len(unexplained) > 0 {
		t.Errorf("%d duplicates not explained by the kill:\n%s", len(unexplained), strings.Join(unexplained, "\n"))
	}

	// Salvaging the same directory again fetches nothing.
	fetches := func(r map[string]int) (n int) {
		for _, c := range r {
			n += c
		}
		return n
	}
	n0 := fetches(rep.URLs)
	out, errOut, code = runSalvage(t, c, "--data", victim.data, "--node", survivors[1].exchange, "--cluster-key-file", c.keyFile, "--json")
	if code != 0 {
		t.Fatalf("second salvage: exit %d\n%s%s", code, out, errOut)
	}
	var sum2 salvage.Summary
	if err := json.Unmarshal([]byte(out), &sum2); err != nil || sum2.Sent != sum.Sent {
		t.Errorf("second salvage sent %d entries (%v), want %d", sum2.Sent, err, sum.Sent)
	}
	// Every batch was acked, so stored by the peer (in its frontier, or in
	// its outbox for their owners): waitDone waits for the outboxes drained
	// too.
	waitDone(t, survivors, 2*time.Minute)
	rep2, err := harness.WebReport(webAddr)
	if err != nil {
		t.Fatal(err)
	}
	if n1 := fetches(rep2.URLs); n1 != n0 {
		t.Errorf("the second salvage caused %d fetches, want 0", n1-n0)
	}
	t.Logf("second salvage: %d entries sent, %d new to %s, no fetch", sum2.Sent, sum2.Added, sum2.Peer)
	logShares(t, survivors)
}

// TestProcSalvageRefuses: salvage refuses the data directory of a running
// node (its files are locked) and says that salvage is for a node gone for
// good; a --node that is not a live exchange, or the wrong key, is a clear
// error and sends nothing.
func TestProcSalvageRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test in -short mode")
	}
	web, webAddr, _ := clusterWeb(t)
	c := newProcCluster(t, web, webAddr)
	ps := startCluster(t, c, 1)
	live := ps[0]

	data := filepath.Join(c.dir, "dead")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := frontier.Open(frontier.Options{Path: filepath.Join(data, salvage.FrontierFile), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add(context.Background(), []frontier.NewURL{{URL: "http://gone.test/x", Depth: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	otherKey := filepath.Join(c.dir, "other.key")
	if err := os.WriteFile(otherKey, []byte("another key of 32 bytes, not it!"), 0o600); err != nil {
		t.Fatal(err)
	}
	closed := harness.FreePort(t, "127.0.0.1")
	for _, tc := range []struct {
		name string
		args []string
		want []string
		not  []string // not said
	}{
		{"running node's directory", []string{"--data", live.data, "--node", live.exchange, "--cluster-key-file", c.keyFile},
			[]string{"locked by another process", "gone for good"}, nil},
		{"API address", []string{"--data", data, "--node", live.api, "--cluster-key-file", c.keyFile},
			[]string{"exchange handshake failed", "not its API address"}, nil},
		{"nothing listening", []string{"--data", data, "--node", fmt.Sprintf("127.0.0.1:%d", closed), "--cluster-key-file", c.keyFile},
			[]string{"connect to 127.0.0.1:", "connection refused"}, nil},
		{"wrong key", []string{"--data", data, "--node", live.exchange, "--cluster-key-file", otherKey},
			[]string{"did not prove the cluster key", "--cluster-key-file"}, []string{"API address"}},
		{"not an address", []string{"--data", data, "--node", "node0", "--cluster-key-file", c.keyFile},
			[]string{`--node="node0": want HOST:PORT`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runSalvage(t, c, tc.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1\n%s%s", code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not say %q:\n%s", w, errOut)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(errOut, w) {
					t.Errorf("stderr says %q:\n%s", w, errOut)
				}
			}
			t.Logf("%s", strings.TrimSpace(errOut))
		})
	}
	st, err := live.status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Frontier.InList+st.Frontier.Completed+st.Frontier.InProgress+st.Frontier.Stalled != 0 {
		t.Errorf("the live node received records: %+v", st.Frontier)
	}
	// The directory is fine: salvaged into the live node, its URL arrives.
	if out, errOut, code := runSalvage(t, c, "--data", data, "--node", live.exchange, "--cluster-key-file", c.keyFile); code != 0 ||
		!strings.Contains(out, "1 in_list") {
		t.Fatalf("salvage: exit %d\n%s%s", code, out, errOut)
	}
	wait.For(t, 30*time.Second, "the salvaged URL reaches the live node", func() bool {
		st, err := live.status()
		return err == nil && st.Frontier.InList+st.Frontier.Completed+st.Frontier.InProgress+st.Frontier.Stalled == 1
	})
}
