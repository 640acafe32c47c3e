package cluster

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/lend"
	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/cluster/phase"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestOutcomeBeforeRecord: an outcome that reaches the URL's owner without
// the URL's record there (moved by a leaving member and not here yet, or
// with a member away or cut off whose share this node crawls now) is not
// dropped: a fetched page is kept as a COMPLETED record at once, so that
// neither the record when it comes nor the URL discovered again is
// fetched; a failed fetch (a retry later) is kept until the record comes,
// and settles it then.
func TestOutcomeBeforeRecord(t *testing.T) {
	tc := startTestClusterWith(t, "solo", func(c *NodeConfig) {
		c.Lend = true
		c.Revisit = func(string) frontier.Schedule { return frontier.Schedule{Interval: time.Hour} }
	})
	tc.fetching(t)
	ctx := context.Background()
	const u, retried, other, again = "http://a.test/early", "http://a.test/retried", "http://a.test/plain", "http://a.test/again"
	retryAt := time.Now().Add(time.Hour)
	ocs := []frontier.NewURL{
		{URL: u, Host: lend.OutcomeHost(frontier.Result{Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok"}), Depth: 1},
		{URL: retried, Host: lend.OutcomeHost(frontier.Result{Host: "a.test", State: frontier.Stalled, Status: 503, Reason: "http_5xx", RetryAt: retryAt}), Depth: 1},
		{URL: again, Host: lend.OutcomeHost(frontier.Result{Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok"}), Depth: 1},
	}
	if _, err := tc.c.store(ctx, exchange.KindOutcome, ocs); err != nil {
		t.Fatal(err)
	}
	recs := records(t, tc.f)
	if r, ok := recs[u]; !ok || r.State != frontier.Completed || r.Due.IsZero() {
		t.Fatalf("a fetched page's outcome without its record: %+v (found %v), want COMPLETED and due again", r, ok)
	}
	if _, ok := recs[retried]; ok {
		t.Fatal("a failed fetch's outcome without its record made a record")
	}
	moved := []frontier.NewURL{{URL: u, Host: "a.test", Depth: 1}, {URL: retried, Host: "a.test", Depth: 1}, {URL: other, Host: "a.test", Depth: 1}}
	if _, err := tc.c.store(ctx, exchange.KindMoved, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.c.store(ctx, exchange.KindNew, []frontier.NewURL{{URL: again, Host: "a.test", Depth: 2}}); err != nil {
		t.Fatal(err)
	}
	recs = records(t, tc.f)
	for _, x := range []string{u, again} {
		if r := recs[x]; r.State != frontier.Completed {
			t.Errorf("%s, fetched by a holder, then moved or discovered here: %+v, want COMPLETED", x, r)
		}
	}
	if r := recs[retried]; r.State != frontier.Stalled || r.NextTry.UnixMilli() != retryAt.UnixMilli() {
		t.Errorf("the record that came after its failed fetch's outcome: %+v, want STALLED until %v", r, retryAt)
	}
	if r := recs[other]; r.State != frontier.InList {
		t.Errorf("a moved record without an outcome: %+v, want IN_LIST", r)
	}
	if got := tc.c.lends.TakeEarly(moved, time.Now()); len(got) != 0 {
		t.Errorf("outcomes still kept after their records came: %v", got)
	}
}

// TestMovedKeepsLend: a lent record moved to a new owner carries its lend
// mark there: the new owner holds the URL (neither fetches nor lends it)
// until the holder's outcome arrives or the mark expires, and stores the
// record under its plain host.
func TestMovedKeepsLend(t *testing.T) {
	tc := startTestClusterWith(t, "solo", func(c *NodeConfig) { c.Lend = true })
	tc.fetching(t)
	ctx := context.Background()
	const u, other = "http://a.test/lent", "http://a.test/plain"
	m := lend.Mark{Holder: "holder", Slot: 9, Until: time.Now().Add(time.Minute)}
	moved := []frontier.NewURL{{URL: u, Host: lend.MovedHost("a.test", m), Depth: 1}, {URL: other, Host: "a.test", Depth: 1}}
	if _, err := tc.c.store(ctx, exchange.KindMoved, moved); err != nil {
		t.Fatal(err)
	}
	recs := records(t, tc.f)
	if r := recs[u]; r.State != frontier.InList || r.Host != "a.test" {
		t.Fatalf("moved lent record: %+v, want IN_LIST under a.test", r)
	}
	if !tc.c.Held(frontier.Fingerprint(u)) || tc.c.Held(frontier.Fingerprint(other)) {
		t.Errorf("held: lent %v (want true), plain %v (want false)", tc.c.Held(frontier.Fingerprint(u)), tc.c.Held(frontier.Fingerprint(other)))
	}
	oc := frontier.NewURL{URL: u, Host: lend.OutcomeHost(frontier.Result{Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok"}), Depth: 1}
	if _, err := tc.c.store(ctx, exchange.KindOutcome, []frontier.NewURL{oc}); err != nil {
		t.Fatal(err)
	}
	if r := records(t, tc.f)[u]; r.State != frontier.Completed || tc.c.Held(frontier.Fingerprint(u)) {
		t.Errorf("after the holder's outcome: %+v, held %v", r, tc.c.Held(frontier.Fingerprint(u)))
	}
}

// TestHoldForAway: a node whose join gate opened while members were away
// holds its URLs (Held) until each of them came back settled or was
// taken over: they may hold URLs its previous process lent them.
func TestHoldForAway(t *testing.T) {
	woken := 0
	c := &Cluster{log: testLogger(), cfg: NodeConfig{Wake: func() { woken++ }}}
	c.away.Store(&membership.Away{Until: map[string]time.Time{"a": time.Now().Add(time.Minute), "b": time.Now().Add(time.Minute), "gone": time.Now().Add(-time.Second)}})
	c.holdForAway()
	if !c.lendHeld.Load() || len(*c.awayAtGate.Load()) != 2 {
		t.Fatalf("after the gate: held %v, waiting for %v", c.lendHeld.Load(), *c.awayAtGate.Load())
	}
	c.lendHoldUpdate(map[string]bool{"a": true, "b": true})
	c.lendHoldUpdate(map[string]bool{"b": true}) // a came back settled
	if !c.lendHeld.Load() || woken != 0 {
		t.Errorf("released while b is away or not settled (held %v, woken %d)", c.lendHeld.Load(), woken)
	}
	c.lendHoldUpdate(map[string]bool{"a": true}) // a not settled again: it had come back already
	if c.lendHeld.Load() || woken != 1 {
		t.Errorf("not released once every member away at the gate came back settled (held %v, woken %d)", c.lendHeld.Load(), woken)
	}
	c2 := &Cluster{log: testLogger()}
	c2.holdForAway()
	if c2.lendHeld.Load() {
		t.Error("held with no member away")
	}
}

// TestKeepForUnknown: a restarted holder keeps the outcomes for a lender
// it has not heard of yet during its first takeover_after (the lender may
// be on its way back and keeps the records), not for one it knows is gone.
func TestKeepForUnknown(t *testing.T) {
	c := &Cluster{cfg: NodeConfig{Timeouts: Timeouts{TakeoverAfter: time.Minute}}}
	c.started = time.Now()
	c.addrs.Store(&map[string]string{"alive": "127.0.0.1:1"})
	c.known.Store(&map[string]bool{"alive": true, "gone": true})
	for _, tc := range []struct {
		peer string
		want bool
	}{{"alive", true}, {"gone", false}, {"unknown", true}} {
		if got := c.keepFor(tc.peer); got != tc.want {
			t.Errorf("keepFor(%s) = %v, want %v", tc.peer, got, tc.want)
		}
	}
	c.started = time.Now().Add(-2 * time.Minute)
	if c.keepFor("unknown") {
		t.Error("outcomes kept for an unknown lender after takeover_after")
	}
}

// soloLender starts a lone member with lending on, fetching, whose
// frontier holds one IN_LIST URL u (fingerprint fp, of phase q).
func soloLender(t *testing.T) (tc *testCluster, u string, fp uint64, q int) {
	t.Helper()
	tc = startTestClusterWith(t, "solo", func(c *NodeConfig) { c.Lend = true })
	tc.fetching(t)
	u = "http://a.test/page"
	if _, err := tc.f.Add(context.Background(), []frontier.NewURL{{URL: u, Host: "a.test", Depth: 1}}); err != nil {
		t.Fatal(err)
	}
	return tc, u, frontier.Fingerprint(u), frontier.PhaseOf(frontier.HostHash("a.test"), tc.f.Phases())
}

// TestReturnedLentAgain: a URL lent to a member and given back during the
// same epoch (its trip ended before it reached it) is lent again in that
// epoch, although the lend scan's cursor has passed it; a return from
// another epoch is not.
func TestReturnedLentAgain(t *testing.T) {
	tc, u, fp, q := soloLender(t)
	ctx := context.Background()
	until := time.Now().Add(time.Minute)
	lendIt := func() {
		t.Helper()
		if err := tc.c.lendTo(ctx, "p", q, 5, until); err != nil {
			t.Fatal(err)
		}
	}
	giveBack := func(epoch int64) {
		t.Helper()
		r := frontier.Result{Host: "a.test", State: frontier.InList, Reason: "p " + strconv.FormatInt(epoch, 10)}
		if _, err := tc.c.store(ctx, exchange.KindOutcome, []frontier.NewURL{{URL: u, Host: lend.OutcomeHost(r), Depth: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	lendIt()
	if !tc.c.lends.Lent(fp, time.Now()) {
		t.Fatal("not lent")
	}
	giveBack(4) // a return of an earlier lend ends nothing
	if !tc.c.lends.Lent(fp, time.Now()) {
		t.Fatal("an earlier epoch's return ended the lend")
	}
	giveBack(5)
	if tc.c.lends.Lent(fp, time.Now()) {
		t.Fatal("still lent after the holder gave it back")
	}
	lendIt()
	if m, ok := tc.c.lends.MarkOf(fp); !ok || m.Holder != "p" || m.Slot != 5 {
		t.Fatalf("given back in epoch 5, then mark %+v (%v); want lent again to p in epoch 5", m, ok)
	}
}

// TestLendBack: a batch of new URLs from a member is stored, and the ack
// lends it back exactly those this node owns, new here, of the hosts of
// the phase it works on now, marked lent to it; not a URL known here
// already, nor one of another phase, nor one another member owns; a batch
// of the same URLs again lends nothing.
func TestLendBack(t *testing.T) {
	withLend := func(c *NodeConfig) {
		c.Lend = true
		c.PhaseDuration = 2 * time.Second
		c.Guard = 100 * time.Millisecond
	}
	a := startTestClusterWith(t, "a", withLend)
	b := startTestClusterWith(t, "b", withLend, a.c.Members().Addr())
	a.fetching(t)
	b.fetching(t)
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for attempt := 0; ; attempt++ {
		if time.Now().After(deadline) {
			t.Fatalf("no epoch with both members working on a phase and time to lend (%d attempts)", attempt)
		}
		if st := a.c.sched.At(time.Now()); st.NPhase > 1 && a.f.Phases() != st.NPhase {
			// The node re-keys its frontier for the phases (node.Node); here
			// the test does.
			if err := a.f.SetPhases(st.NPhase); err != nil {
				t.Fatal(err)
			}
		}
		st, _, ok := a.c.lendWindow(time.Now())
		q, okq := -1, false
		if ok {
			q, okq = a.c.lendPhase(st, "b")
		}
		if !ok || !okq || len(st.Members) != 2 || time.Until(st.RequestDeadline) < time.Second {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		// URLs a owns: three new ones and a known one of b's phase, and a
		// new one of a's own phase; one b owns of b's phase.
		ring := a.c.ring.Load()
		var fresh []frontier.NewURL
		var known, ownPhase, others frontier.NewURL
		tag := strconv.Itoa(attempt)
		for i := 0; len(fresh) < 3 || known.URL == "" || ownPhase.URL == "" || others.URL == ""; i++ {
			host := "h" + strconv.Itoa(i) + ".test"
			u := frontier.NewURL{URL: "http://" + host + "/" + tag, Host: host, Depth: 2}
			inQ := frontier.PhaseOf(frontier.HostHash(host), st.NPhase) == q
			switch owner := ring.Owner(frontier.Fingerprint(u.URL)); {
			case owner == "b" && inQ && others.URL == "":
				others = u
			case owner != "a":
			case inQ && len(fresh) < 3:
				fresh = append(fresh, u)
			case inQ && known.URL == "":
				known = u
			case !inQ && ownPhase.URL == "":
				ownPhase = u
			}
		}
		if _, err := a.f.Add(ctx, []frontier.NewURL{known}); err != nil {
			t.Fatal(err)
		}
		batch := append(append([]frontier.NewURL{known, ownPhase, others}, fresh...), fresh[0])
		n, lent, err := a.c.receiveNew(ctx, "b", batch, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if after := a.c.sched.At(time.Now()); after.Slot != st.Slot {
			continue // the slot changed meanwhile: try again in the next one
		}
		var got []string
		for _, u := range lent {
			host, rest, _ := strings.Cut(u.Host, "\n")
			if !strings.HasSuffix(rest, " 0 a") || !strings.HasPrefix(rest, strconv.FormatInt(st.Slot, 10)+" ") || u.Depth != 2 || host == "" {
				t.Errorf("lend entry %+v: want host, slot %d, tries 0 and lender a", u, st.Slot)
			}
			got = append(got, u.URL)
		}
		var want []string
		for _, u := range fresh {
			want = append(want, u.URL)
		}
		if !reflect.DeepEqual(got, want) || n != 4 {
			t.Fatalf("stored %d new (want 4: the fresh ones and the own-phase one), lent %v, want %v", n, got, want)
		}
		for _, u := range fresh {
			if !a.c.Held(frontier.Fingerprint(u.URL)) {
				t.Errorf("%s lent but not held", u.URL)
			}
		}
		// (The known URL may be lent by a lend round meanwhile: it is IN_LIST.)
		if _, ok := a.c.lends.MarkOf(frontier.Fingerprint(ownPhase.URL)); ok {
			t.Errorf("%s, of this node's own phase, marked lent", ownPhase.URL)
		}
		if _, again, err := a.c.receiveNew(ctx, "b", fresh, 1<<20); err != nil || len(again) != 0 {
			t.Fatalf("the same URLs again: lent %v, %v; want none", again, err)
		}
		return
	}
}

// guestRecorder is a GuestPool that takes every guest and remembers it.
type guestRecorder struct {
	mu sync.Mutex
	gs []frontier.Guest
}

func (g *guestRecorder) AddGuests(gs []frontier.Guest) []frontier.Guest {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gs = append(g.gs, gs...)
	return nil
}

// TestLendsNameTheSlot: when the member list switches inside an epoch, a
// holder takes only the lends made for the slot it works in now: a lend
// named by the epoch's earlier slot (made before the switch, for the
// holder of that phase then) is given back, however much of the epoch is
// left, and a lend made now carries the slot's name, not the epoch's.
func TestLendsNameTheSlot(t *testing.T) {
	pool := &guestRecorder{}
	tc := startTestClusterWith(t, "b", func(c *NodeConfig) {
		c.Lend, c.Guests, c.PhaseDuration, c.Guard = true, pool, 10*time.Second, 50*time.Millisecond
	})
	tc.fetching(t)
	s := tc.c.sched
	d := s.PhaseDuration()
	// Half the 10 s epoch left at least, so that the steps below end in
	// the epoch they start in (a -race run on a loaded machine took over
	// 2 s), and a second of it gone, so that the switch, 10 ms back, is
	// inside it.
	wait.For(t, 10*time.Second, "a second into an epoch, half of it left", func() bool {
		now := s.ClusterNow(time.Now())
		e := phase.Epoch(now, d)
		return now.Sub(phase.EpochStart(e, d)) > time.Second && phase.EpochStart(e+1, d).Sub(now) > d/2
	})
	now := s.ClusterNow(time.Now())
	epochStart := phase.EpochStart(phase.Epoch(now, d), d)
	s.SetMembersFromInstant(epochStart, []string{"b", "c"})
	switched := now.Add(-10 * time.Millisecond)
	s.SetMembersFromInstant(switched, []string{"a", "b", "c"})
	st := s.At(time.Now())
	if st.Phase < 0 || !st.Open || st.Slot != switched.UnixNano() {
		t.Fatalf("state after the switch: %+v, want open in the slot %d", st, switched.UnixNano())
	}
	host := ""
	for i := 0; host == ""; i++ {
		if h := fmt.Sprintf("h%d.test", i); frontier.PhaseOf(frontier.HostHash(h), st.NPhase) == st.Phase {
			host = h
		}
	}
	tests := []struct {
		name  string
		slot  int64
		taken bool
	}{
		{"the epoch's earlier slot", epochStart.UnixNano(), false},
		{"the epoch's number", st.Epoch, false},
		{"the slot in effect", st.Slot, true},
	}
	for i, tt := range tests {
		u := frontier.NewURL{URL: fmt.Sprintf("http://%s/p%d", host, i), Host: lend.EntryHost(host, tt.slot, 0, "a"), Depth: 1}
		if got := tc.c.takeLends(context.Background(), []frontier.NewURL{u}); (got == 1) != tt.taken {
			t.Errorf("%s: taken %d, want taken %v", tt.name, got, tt.taken)
		}
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if len(pool.gs) != 1 || pool.gs[0].Slot != st.Slot {
		t.Fatalf("guests %+v, want one of slot %d", pool.gs, st.Slot)
	}
}

// TestLendWaitsForPlacedMarks: a URL the scheduler placed in the bucket
// (its IN_PROGRESS mark submitted, not committed yet: the frontier's
// writer is behind) may be fetched here at once; a lend made before that
// mark is committed would read it as IN_LIST and lend it too, and the
// holder would fetch the page a second time (the owner fetched it at the
// end of its phase, and the lend round of the next slot, for the member
// working on that phase now, found it). The first lend of a slot waits
// for the writes submitted before it.
func TestLendWaitsForPlacedMarks(t *testing.T) {
	tc, _, fp, q := soloLender(t)
	ctx := context.Background()

	// Hold the writer in a write of its own, then place the URL as the
	// scheduler does: its mark waits behind that write.
	entered, release := make(chan struct{}), make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		_, err := tc.f.Update(ctx, frontier.Write{Name: "held", Apply: func(*frontier.Tx) (int, error) {
			close(entered)
			<-release
			return 0, nil
		}})
		blocked <- err
	}()
	<-entered
	mark := tc.f.MarkInProgressAsync(ctx, []frontier.Ref{{FP: fp, Host: "a.test"}})

	lent := make(chan error, 1)
	go func() { lent <- tc.c.lendTo(ctx, "p", q, 7, time.Now().Add(time.Minute)) }()
	select {
	case err := <-lent: // returned while the mark was not committed
		close(release)
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(200 * time.Millisecond):
		close(release)
		if err := <-lent; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	if _, err := mark.Wait(); err != nil {
		t.Fatal(err)
	}
	if tc.c.lends.Lent(fp, time.Now()) {
		t.Fatal("a URL placed in the bucket (mark not committed yet) was lent: it would be fetched twice")
	}
	if rec, ok, err := tc.f.Get(frontier.Ref{FP: fp, Host: "a.test"}); err != nil || !ok || rec.State != frontier.InProgress {
		t.Fatalf("record %+v (%v, %v), want IN_PROGRESS", rec, ok, err)
	}
}
