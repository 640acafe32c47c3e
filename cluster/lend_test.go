package cluster

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// TestOutcomeRoundTrip: an outcome travels in an entry's Host and comes
// back whole; malformed ones are refused.
func TestOutcomeRoundTrip(t *testing.T) {
	retry := time.UnixMilli(time.Now().Add(time.Minute).UnixMilli())
	const u = "http://a.test/x"
	for _, r := range []frontier.Result{
		{FP: frontier.Fingerprint(u), Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok", Bytes: 1234, Delay: 20 * time.Millisecond},
		{FP: frontier.Fingerprint(u), Host: "a.test:8080", State: frontier.Stalled, Status: 503, Reason: "http_5xx", RetryAt: retry},
		{FP: frontier.Fingerprint(u), Host: "a.test", State: frontier.InList, Reason: "node2 42"},
		{FP: frontier.Fingerprint(u), Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok", Change: frontier.Changed,
			Page: &frontier.PageState{ETag: `"abc def"`, LastModified: "Wed, 25 Nov 2026 10:00:00 GMT", Digest: [20]byte{1, 2, 3}, Archived: retry}},
		{FP: frontier.Fingerprint(u), Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok",
			Page: &frontier.PageState{Digest: [20]byte{9}}},
	} {
		got, ok := parseOutcome(frontier.NewURL{URL: u, Host: outcomeHost(r)})
		if !ok || !reflect.DeepEqual(got, r) {
			t.Errorf("round trip of %+v: got %+v, %v", r, got, ok)
		}
	}
	// Validators too long for an entry's Host are left out; the digest stays.
	long := frontier.Result{Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok",
		Page: &frontier.PageState{ETag: strings.Repeat("e", MaxEntryHost), Digest: [20]byte{7}}}
	if h := outcomeHost(long); len(h) > MaxEntryHost {
		t.Errorf("outcome of %d bytes, more than %d", len(h), MaxEntryHost)
	} else if got, ok := parseOutcome(frontier.NewURL{URL: u, Host: h}); !ok || got.Page == nil || got.Page.Digest != long.Page.Digest || got.Page.ETag != "" {
		t.Errorf("outcome with a long ETag: got %+v, %v", got, ok)
	}
	for _, h := range []string{"a.test", "a.test\n2 200 0 0 0 ok", "a.test\nx 200 0 0 0 ok", "a.test\n1 2 3 4",
		"a.test\n1 200 0 0 0 ok\n1 00 0", "a.test\n1 200 0 0 0 ok\n9 " + strings.Repeat("0", 40) + " 0"} {
		if _, ok := parseOutcome(frontier.NewURL{URL: u, Host: h}); ok {
			t.Errorf("malformed outcome %q accepted", h)
		}
	}
	if e := (Entry{Kind: KindOutcome, NewURL: frontier.NewURL{URL: u, Host: outcomeHost(frontier.Result{Host: "a.test", State: frontier.Completed})}}); checkEntry(e) != nil {
		t.Errorf("outcome entry refused: %v", checkEntry(e))
	}
}

// TestLendingMarks: a mark holds until it expires, longer while its
// holder is pending, and ends early only by the outcome or by a return
// from the same holder for the same epoch.
func TestLendingMarks(t *testing.T) {
	now := time.Now()
	l := lending{marks: map[uint64]lendMark{}, out: map[string]int{}, again: map[uint64]frontier.Ref{}}
	l.marks[1] = lendMark{holder: "p", epoch: 7, until: now.Add(time.Second)}
	l.marks[2] = lendMark{holder: "q", epoch: 7, until: now.Add(-time.Second)}
	l.marks[3] = lendMark{holder: "p", epoch: 7, until: now.Add(time.Second)}
	l.out["p"], l.out["q"] = 2, 1
	if !l.lent(1, now) {
		t.Error("mark 1 not held before it expires")
	}
	l.pending = map[string]bool{"q": true}
	if !l.lent(2, now) {
		t.Error("expired mark of a pending holder not held")
	}
	if l.active(2, now) || !l.active(1, now) {
		t.Error("active: an expired mark counts, or a running one does not")
	}
	l.pending = nil
	if l.lent(2, now) || l.out["q"] != 0 {
		t.Errorf("expired mark still held (out %d)", l.out["q"])
	}
	r1 := frontier.Ref{FP: 1, Host: "h1"}
	l.returned(r1, "q", 7) // another holder
	l.returned(r1, "p", 6) // an earlier lend
	if !l.lent(1, now) || len(l.again) != 0 {
		t.Errorf("a return from another holder or epoch ended the lend (again %v)", l.again)
	}
	l.returned(r1, "p", 7)
	if l.lent(1, now) {
		t.Error("the holder's return did not end the lend")
	}
	// Given back, it is lent again to the member working on its host's
	// phase, and only once, in that epoch or (a return that arrives after
	// the swap, when the next epoch's scans may have passed it) in the
	// next; this node's own phase forgets it (its scheduler finds it).
	ph := frontier.PhaseOf(frontier.HostHash("h1"), 3)
	if got := l.takeAgain((ph+1)%3, 3, nil, 10); len(got) != 0 {
		t.Errorf("takeAgain for another phase = %v", got)
	}
	if got := l.takeAgain(ph, 3, nil, 10); len(got) != 1 || got[0] != r1 {
		t.Errorf("takeAgain = %v, want [%v]", got, r1)
	}
	if got := l.takeAgain(ph, 3, nil, 10); len(got) != 0 {
		t.Errorf("takeAgain twice = %v", got)
	}
	l.marks[1] = lendMark{holder: "p", epoch: 7, until: now.Add(time.Second)}
	l.out["p"]++
	l.returned(r1, "p", 7)
	if got := l.takeAgain(ph, 3, nil, 0); len(got) != 0 || len(l.again) != 1 {
		t.Errorf("takeAgain of at most 0 = %v (again %v)", got, l.again)
	}
	l.dropAgain((ph+1)%3, 3, nil)
	if len(l.again) != 1 {
		t.Errorf("dropAgain of another phase forgot %v", r1)
	}
	l.dropAgain(ph, 3, nil)
	if len(l.again) != 0 {
		t.Errorf("dropAgain of its phase kept %v", l.again)
	}
	l.settle([]uint64{3})
	if l.lent(3, now) || len(l.marks) != 0 || len(l.out) != 0 {
		t.Errorf("after the outcome: marks %v, out %v", l.marks, l.out)
	}

	// A holder that is gone (not a member, not away) is not pending any
	// more: its expired marks are forgotten even when the last pass still
	// counted it pending, while a running mark holds until its time (the
	// holder may have vanished from the ring for a moment, its outcome on
	// the way). A pending holder (away) keeps even its expired marks.
	l.marks[4] = lendMark{holder: "gone", epoch: 8, until: now.Add(time.Minute)}
	l.marks[5] = lendMark{holder: "away", epoch: 8, until: now.Add(-time.Minute)}
	l.marks[6] = lendMark{holder: "p", epoch: 8, until: now.Add(time.Minute)}
	l.marks[7] = lendMark{holder: "gone", epoch: 8, until: now.Add(-time.Minute)}
	l.out["gone"], l.out["away"], l.out["p"] = 2, 1, 1
	l.pending = map[string]bool{"away": true, "gone": true}
	gone := func(h string) bool { return h == "gone" }
	if n := l.expire(now, gone); n != 1 || !l.lent(4, now) || !l.lent(5, now) || !l.lent(6, now) {
		t.Errorf("expire with a holder gone: %d forgotten, marks %v", n, l.marks)
	}
	if _, ok := l.marks[7]; ok {
		t.Error("the expired mark of a holder gone was kept")
	}
}

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
		{URL: u, Host: outcomeHost(frontier.Result{Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok"}), Depth: 1},
		{URL: retried, Host: outcomeHost(frontier.Result{Host: "a.test", State: frontier.Stalled, Status: 503, Reason: "http_5xx", RetryAt: retryAt}), Depth: 1},
		{URL: again, Host: outcomeHost(frontier.Result{Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok"}), Depth: 1},
	}
	if _, err := tc.c.store(ctx, KindOutcome, ocs); err != nil {
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
	if _, err := tc.c.store(ctx, KindMoved, moved); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.c.store(ctx, KindNew, []frontier.NewURL{{URL: again, Host: "a.test", Depth: 2}}); err != nil {
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
	if got := tc.c.lends.takeEarly(moved, time.Now()); len(got) != 0 {
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
	m := lendMark{holder: "holder", epoch: 9, until: time.Now().Add(time.Minute)}
	moved := []frontier.NewURL{{URL: u, Host: movedHost("a.test", m), Depth: 1}, {URL: other, Host: "a.test", Depth: 1}}
	if _, err := tc.c.store(ctx, KindMoved, moved); err != nil {
		t.Fatal(err)
	}
	recs := records(t, tc.f)
	if r := recs[u]; r.State != frontier.InList || r.Host != "a.test" {
		t.Fatalf("moved lent record: %+v, want IN_LIST under a.test", r)
	}
	if !tc.c.Held(frontier.Fingerprint(u)) || tc.c.Held(frontier.Fingerprint(other)) {
		t.Errorf("held: lent %v (want true), plain %v (want false)", tc.c.Held(frontier.Fingerprint(u)), tc.c.Held(frontier.Fingerprint(other)))
	}
	oc := frontier.NewURL{URL: u, Host: outcomeHost(frontier.Result{Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok"}), Depth: 1}
	if _, err := tc.c.store(ctx, KindOutcome, []frontier.NewURL{oc}); err != nil {
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
	c.away.Store(&away{until: map[string]time.Time{"a": time.Now().Add(time.Minute), "b": time.Now().Add(time.Minute), "gone": time.Now().Add(-time.Second)}})
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
	c := &Cluster{started: time.Now(), cfg: NodeConfig{TakeoverAfter: time.Minute}}
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

// TestReturnedLentAgain: a URL lent to a member and given back during the
// same epoch (its trip ended before it reached it) is lent again in that
// epoch, although the lend scan's cursor has passed it; a return from
// another epoch is not.
func TestReturnedLentAgain(t *testing.T) {
	tc := startTestClusterWith(t, "solo", func(c *NodeConfig) { c.Lend = true })
	tc.fetching(t)
	ctx := context.Background()
	const u = "http://a.test/page"
	if _, err := tc.f.Add(ctx, []frontier.NewURL{{URL: u, Host: "a.test", Depth: 1}}); err != nil {
		t.Fatal(err)
	}
	fp := frontier.Fingerprint(u)
	q := frontier.PhaseOf(frontier.HostHash("a.test"), tc.f.Phases())
	until := time.Now().Add(time.Minute)
	lend := func() {
		t.Helper()
		if err := tc.c.lendTo(ctx, "p", q, 5, until); err != nil {
			t.Fatal(err)
		}
	}
	giveBack := func(epoch int64) {
		t.Helper()
		r := frontier.Result{Host: "a.test", State: frontier.InList, Reason: "p " + strconv.FormatInt(epoch, 10)}
		if _, err := tc.c.store(ctx, KindOutcome, []frontier.NewURL{{URL: u, Host: outcomeHost(r), Depth: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	lend()
	if !tc.c.lends.lent(fp, time.Now()) {
		t.Fatal("not lent")
	}
	giveBack(4) // a return of an earlier lend ends nothing
	if !tc.c.lends.lent(fp, time.Now()) {
		t.Fatal("an earlier epoch's return ended the lend")
	}
	giveBack(5)
	if tc.c.lends.lent(fp, time.Now()) {
		t.Fatal("still lent after the holder gave it back")
	}
	lend()
	if m, ok := tc.c.lends.markOf(fp); !ok || m.holder != "p" || m.epoch != 5 {
		t.Fatalf("given back in epoch 5, then mark %+v (%v); want lent again to p in epoch 5", m, ok)
	}
}

// TestLendBack: a batch of new URLs from a member is stored, and the ack
// lends it back exactly those this node owns, new here, of the hosts of
// the phase it works on now, marked lent to it; not a URL known here
// already, nor one of another phase, nor one another member owns; a batch
// of the same URLs again lends nothing.
func TestLendBack(t *testing.T) {
	lend := func(c *NodeConfig) {
		c.Lend = true
		c.PhaseDuration = 2 * time.Second
		c.Guard = 100 * time.Millisecond
	}
	a := startTestClusterWith(t, "a", lend)
	b := startTestClusterWith(t, "b", lend, a.c.Members().Addr())
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
		if after := a.c.sched.At(time.Now()); after.Epoch != st.Epoch {
			continue // the epoch changed meanwhile: try again in the next one
		}
		var got []string
		for _, u := range lent {
			host, rest, _ := strings.Cut(u.Host, "\n")
			if !strings.HasSuffix(rest, " 0 a") || !strings.HasPrefix(rest, strconv.FormatInt(st.Epoch, 10)+" ") || u.Depth != 2 || host == "" {
				t.Errorf("lend entry %+v: want host, epoch %d, tries 0 and lender a", u, st.Epoch)
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
		if _, ok := a.c.lends.markOf(frontier.Fingerprint(ownPhase.URL)); ok {
			t.Errorf("%s, of this node's own phase, marked lent", ownPhase.URL)
		}
		if _, again, err := a.c.receiveNew(ctx, "b", fresh, 1<<20); err != nil || len(again) != 0 {
			t.Fatalf("the same URLs again: lent %v, %v; want none", again, err)
		}
		return
	}
}
