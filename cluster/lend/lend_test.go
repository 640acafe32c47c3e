package lend

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
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
		got, ok := ParseOutcome(frontier.NewURL{URL: u, Host: OutcomeHost(r)})
		if !ok || !reflect.DeepEqual(got, r) {
			t.Errorf("round trip of %+v: got %+v, %v", r, got, ok)
		}
	}
	// Validators too long for an entry's Host are left out; the digest stays.
	long := frontier.Result{Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok",
		Page: &frontier.PageState{ETag: strings.Repeat("e", exchange.MaxEntryHost), Digest: [20]byte{7}}}
	if h := OutcomeHost(long); len(h) > exchange.MaxEntryHost {
		t.Errorf("outcome of %d bytes, more than %d", len(h), exchange.MaxEntryHost)
	} else if got, ok := ParseOutcome(frontier.NewURL{URL: u, Host: h}); !ok || got.Page == nil || got.Page.Digest != long.Page.Digest || got.Page.ETag != "" {
		t.Errorf("outcome with a long ETag: got %+v, %v", got, ok)
	}
	for _, h := range []string{"a.test", "a.test\n2 200 0 0 0 ok", "a.test\nx 200 0 0 0 ok", "a.test\n1 2 3 4",
		"a.test\n1 200 0 0 0 ok\n1 00 0", "a.test\n1 200 0 0 0 ok\n9 " + strings.Repeat("0", 40) + " 0"} {
		if _, ok := ParseOutcome(frontier.NewURL{URL: u, Host: h}); ok {
			t.Errorf("malformed outcome %q accepted", h)
		}
	}
	if e := (exchange.Entry{Kind: exchange.KindOutcome, NewURL: frontier.NewURL{URL: u, Host: OutcomeHost(frontier.Result{Host: "a.test", State: frontier.Completed})}}); e.Valid() != nil {
		t.Errorf("outcome entry refused: %v", e.Valid())
	}
}

// TestLendingMarks: a mark holds until it expires, longer while its
// holder is pending, and ends early only by the outcome or by a return
// from the same holder for the same epoch.
func TestLendingMarks(t *testing.T) {
	now := time.Now()
	l := Ledger{marks: map[uint64]Mark{}, out: map[string]int{}, again: map[uint64]frontier.Ref{}}
	l.marks[1] = Mark{Holder: "p", Slot: 7, Until: now.Add(time.Second)}
	l.marks[2] = Mark{Holder: "q", Slot: 7, Until: now.Add(-time.Second)}
	l.marks[3] = Mark{Holder: "p", Slot: 7, Until: now.Add(time.Second)}
	l.out["p"], l.out["q"] = 2, 1
	if !l.Lent(1, now) {
		t.Error("mark 1 not held before it expires")
	}
	l.pending = map[string]bool{"q": true}
	if !l.Lent(2, now) {
		t.Error("expired mark of a pending holder not held")
	}
	if l.Active(2, now) || !l.Active(1, now) {
		t.Error("active: an expired mark counts, or a running one does not")
	}
	l.pending = nil
	if l.Lent(2, now) || l.out["q"] != 0 {
		t.Errorf("expired mark still held (out %d)", l.out["q"])
	}
	r1 := frontier.Ref{FP: 1, Host: "h1"}
	l.Returned(r1, "q", 7) // another holder
	l.Returned(r1, "p", 6) // an earlier lend
	if !l.Lent(1, now) || len(l.again) != 0 {
		t.Errorf("a return from another holder or epoch ended the lend (again %v)", l.again)
	}
	l.Returned(r1, "p", 7)
	if l.Lent(1, now) {
		t.Error("the holder's return did not end the lend")
	}
	// Given back, it is lent again to the member working on its host's
	// phase, and only once, in that epoch or (a return that arrives after
	// the swap, when the next epoch's scans may have passed it) in the
	// next; this node's own phase forgets it (its scheduler finds it).
	ph := frontier.PhaseOf(frontier.HostHash("h1"), 3)
	if got := l.TakeAgain((ph+1)%3, 3, nil, 10); len(got) != 0 {
		t.Errorf("takeAgain for another phase = %v", got)
	}
	if got := l.TakeAgain(ph, 3, nil, 10); len(got) != 1 || got[0] != r1 {
		t.Errorf("takeAgain = %v, want [%v]", got, r1)
	}
	if got := l.TakeAgain(ph, 3, nil, 10); len(got) != 0 {
		t.Errorf("takeAgain twice = %v", got)
	}
	l.marks[1] = Mark{Holder: "p", Slot: 7, Until: now.Add(time.Second)}
	l.out["p"]++
	l.Returned(r1, "p", 7)
	if got := l.TakeAgain(ph, 3, nil, 0); len(got) != 0 || len(l.again) != 1 {
		t.Errorf("takeAgain of at most 0 = %v (again %v)", got, l.again)
	}
	l.DropAgain((ph+1)%3, 3, nil)
	if len(l.again) != 1 {
		t.Errorf("dropAgain of another phase forgot %v", r1)
	}
	l.DropAgain(ph, 3, nil)
	if len(l.again) != 0 {
		t.Errorf("dropAgain of its phase kept %v", l.again)
	}
	l.Settle([]uint64{3})
	if l.Lent(3, now) || len(l.marks) != 0 || len(l.out) != 0 {
		t.Errorf("after the outcome: marks %v, out %v", l.marks, l.out)
	}

	// A holder that is gone (not a member, not away) is not pending any
	// more: its expired marks are forgotten even when the last pass still
	// counted it pending, while a running mark holds until its time (the
	// holder may have vanished from the ring for a moment, its outcome on
	// the way). A pending holder (away) keeps even its expired marks.
	l.marks[4] = Mark{Holder: "gone", Slot: 8, Until: now.Add(time.Minute)}
	l.marks[5] = Mark{Holder: "away", Slot: 8, Until: now.Add(-time.Minute)}
	l.marks[6] = Mark{Holder: "p", Slot: 8, Until: now.Add(time.Minute)}
	l.marks[7] = Mark{Holder: "gone", Slot: 8, Until: now.Add(-time.Minute)}
	l.out["gone"], l.out["away"], l.out["p"] = 2, 1, 1
	l.pending = map[string]bool{"away": true, "gone": true}
	gone := func(h string) bool { return h == "gone" }
	if n := l.Expire(now, gone); n != 1 || !l.Lent(4, now) || !l.Lent(5, now) || !l.Lent(6, now) {
		t.Errorf("expire with a holder gone: %d forgotten, marks %v", n, l.marks)
	}
	if _, ok := l.marks[7]; ok {
		t.Error("the expired mark of a holder gone was kept")
	}
}

// TestReplicaTargetOwnerAway: the replica of a page a member fetched for an
// owner that is away goes to the member that crawls the owner's share once
// it is taken over (the first of the ring without the owner), not to the
// one ranked second in that ring: that member would fetch the page again
// at the takeover, before the outcome waiting for the owner reached it. An
// owner ranked second (crawling the share of the first, away) has the
// replica go to the first, as the owner's own replica would.
func TestReplicaTargetOwnerAway(t *testing.T) {
	all := ring.New([]string{"a", "b", "c"})
	live := ring.New([]string{"a", "b"})
	// A URL c owns, whose second in the ring without c is not its owner
	// there (always so with two members left: the second is the other).
	var fp uint64
	for i := 0; ; i++ {
		fp = frontier.Fingerprint("http://h" + strconv.Itoa(i) + ".test/")
		if all.Owner(fp) == "c" {
			break
		}
	}
	_, secondAll := all.Top2(fp)
	firstLive, secondLive := live.Top2(fp)
	if firstLive != secondAll {
		t.Fatalf("ring: the owner without c is %s, c's second %s", firstLive, secondAll)
	}
	tests := []struct {
		name  string
		r     *ring.Ring
		owner string
		want  string
	}{
		{"owner in the ring", all, "c", secondAll},
		{"owner away", live, "c", firstLive},
		{"an owner ranked second (it crawls the first's share)", live, secondLive, firstLive},
		{"no owner", live, "", secondLive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplicaTarget(tc.r, tc.owner, fp); got != tc.want {
				t.Errorf("ReplicaTarget(%v, %q) = %q, want %q", tc.r.Members(), tc.owner, got, tc.want)
			}
		})
	}
	if secondLive == firstLive {
		t.Fatalf("ring: first and second are both %s", firstLive)
	}
}
