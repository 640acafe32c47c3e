package frontier

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

func TestScanRecordsPagesEveryRecord(t *testing.T) {
	f := open(t, nil)
	us := gen("s", 7, 1000)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	odd := func(fp uint64) bool { return fp%2 == 1 }
	var got []uint64
	var from Cursor
	calls := 0
	for {
		recs, next, end, err := f.ScanRecords(from, 64, odd)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		for _, r := range recs {
			if r.FP%2 != 1 || r.URL == "" || r.State != InList {
				t.Fatalf("bad record %+v", r)
			}
			got = append(got, r.FP)
		}
		if end {
			break
		}
		if bytes.Compare(next, from) <= 0 && calls > 1 {
			t.Fatalf("cursor went back: %x after %x", []byte(next), []byte(from))
		}
		from = next
	}
	var want []uint64
	for _, r := range refsOf(us) {
		if r.FP%2 == 1 {
			want = append(want, r.FP)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("scanned %d odd fingerprints, want %d", len(got), len(want))
	}
	if calls != 1000/64+1 {
		t.Fatalf("%d calls for 1000 records by 64", calls)
	}
}

// TestClaimRemove moves records of every state out: IN_LIST and STALLED
// records are claimed and deleted, COMPLETED ones deleted, IN_PROGRESS ones
// skipped, and a claimed record fetched in the meantime (the scheduler had
// read it just before the claim) is kept.
func TestClaimRemove(t *testing.T) {
	f := open(t, func(o *Options) { o.MaxTries = 5 })
	us := gen("c", 3, 10)
	fps := refsOf(us)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	// 0,1: completed; 2: stalled; 3: in progress; 4..9: in list.
	if err := f.MarkInProgress(ctx, fps[:4]); err != nil {
		t.Fatal(err)
	}
	if err := f.Finish(ctx, []Result{{FP: fps[0].FP, Host: fps[0].Host, State: Completed, Status: 200}, {FP: fps[1].FP, Host: fps[1].Host, State: Completed, Status: 404},
		{FP: fps[2].FP, Host: fps[2].Host, State: Stalled, RetryAt: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, f, Counts{InList: 6, InProgress: 1, Completed: 2, Stalled: 1})

	claimed, err := claim(f, append(slices.Clone(fps), Ref{FP: 12345, Host: fps[0].Host}))
	if err != nil {
		t.Fatal(err)
	}
	states := map[uint64]State{}
	for _, r := range claimed {
		states[r.FP] = r.State
	}
	if len(claimed) != 9 || states[fps[0].FP] != Completed || states[fps[2].FP] != Stalled || states[fps[5].FP] != InList {
		t.Fatalf("claimed %d records: %v", len(claimed), states)
	}
	if _, ok := states[fps[3].FP]; ok {
		t.Fatal("an IN_PROGRESS record was claimed")
	}
	wantCounts(t, f, Counts{InProgress: 8, Completed: 2})
	if n := len(scanAll(t, f, 0, 100)); n != 0 {
		t.Fatalf("scan still returns %d claimed URLs", n)
	}
	if k, err := f.ReleaseStalled(ctx, time.Now().Add(2*time.Hour), 0); err != nil || k != 0 {
		t.Fatalf("retry lane released %d claimed URLs (%v)", k, err)
	}
	// The scheduler read fps[9] before the claim, marked it (ignored: not
	// IN_LIST any more) and fetched it: Finish completes it.
	if err := f.MarkInProgress(ctx, fps[9:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Finish(ctx, []Result{{FP: fps[9].FP, Host: fps[9].Host, State: Completed, Status: 200}}); err != nil {
		t.Fatal(err)
	}
	n, err := remove(f, claimed)
	if err != nil || n != 8 {
		t.Fatalf("removed %d (%v), want 8", n, err)
	}
	wantCounts(t, f, Counts{InProgress: 1, Completed: 1})
	if r, ok, _ := f.Get(fps[9]); !ok || r.State != Completed {
		t.Fatalf("the record fetched after its claim must stay COMPLETED: %+v %v", r, ok)
	}
	for _, i := range []int{0, 2, 5} {
		if _, ok, _ := f.Get(fps[i]); ok {
			t.Fatalf("record %d not removed", i)
		}
	}
	// Removed URLs are new again (a later rebalance may bring them back).
	if k, err := f.Add(ctx, us[5:6]); err != nil || k != 1 {
		t.Fatalf("re-add of a moved URL: %d, %v", k, err)
	}
}

// TestClaimedRecordAddedBack: a claimed record moved back before its
// removal to this node, which owns it again (its new owner left and the
// outbox gave it back), is queued again, and the removal leaves it: the
// URL is not lost. The other claimed records are removed as ever.
func TestClaimedRecordAddedBack(t *testing.T) {
	f := open(t, nil)
	us := gen("b", 1, 3)
	fps := refsOf(us)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	claimed, err := claim(f, fps)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claimed %d (%v), want 3", len(claimed), err)
	}
	// A plain Add (a link) and a move by a member whose view is behind
	// (this node does not own the URL) leave the claim as it is.
	if k, err := f.Add(ctx, us[1:2]); err != nil || k != 0 {
		t.Fatalf("add: %d new (%v), want 0 (known)", k, err)
	}
	mine := func(fp uint64) bool { return fp == fps[0].FP }
	if k, err := f.AddMoved(ctx, us, mine); err != nil || k != 0 {
		t.Fatalf("add back: %d new (%v), want 0 (known)", k, err)
	}
	wantCounts(t, f, Counts{InList: 1, InProgress: 2})
	if n, err := remove(f, claimed); err != nil || n != 2 {
		t.Fatalf("removed %d (%v), want 2", n, err)
	}
	wantCounts(t, f, Counts{InList: 1})
	if r, ok, _ := f.Get(fps[0]); !ok || r.State != InList {
		t.Fatalf("the record added back: %+v %v, want IN_LIST", r, ok)
	}
	if n := len(scanAll(t, f, 0, 100)); n != 1 {
		t.Fatalf("scan returns %d URLs, want 1", n)
	}
}

// TestClaimSurvivesCrash: claimed records not yet removed return to IN_LIST
// at their original position when the frontier is opened again, and Requeue
// undoes a claim.
func TestClaimSurvivesCrash(t *testing.T) {
	f := open(t, nil)
	us := gen("k", 2, 6)
	fps := refsOf(us)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	if _, err := claim(f, fps[:2]); err != nil {
		t.Fatal(err)
	}
	if err := f.Requeue(ctx, fps[:1]); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, f, Counts{InList: 5, InProgress: 1})
	if _, err := claim(f, fps[2:4]); err != nil {
		t.Fatal(err)
	}
	g := reopen(t, f, nil)
	wantCounts(t, g, Counts{InList: 6})
	var got []string
	for _, r := range scanAll(t, g, 0, 100) {
		got = append(got, r.URL)
	}
	var want []string
	for _, u := range us {
		want = append(want, u.URL)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after reopen the queue is %q, want %q", got, want)
	}
}

// TestAddDone: Tx.AddCompleted with ReasonMoved stores moved COMPLETED
// records: unknown URLs inserted, IN_LIST and STALLED ones completed,
// IN_PROGRESS and COMPLETED ones left alone; a later Add of the same URL
// is a duplicate.
func TestAddDone(t *testing.T) {
	f := open(t, func(o *Options) { o.MaxPerHost = 2 })
	us := gen("d", 1, 6)
	fps := refsOf(us)
	if _, err := f.Add(ctx, us[:2]); err != nil { // host cap reached
		t.Fatal(err)
	}
	if err := f.MarkInProgress(ctx, fps[1:2]); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, f, Counts{InList: 1, InProgress: 1})
	n, err := addCompleted(f, append(slices.Clone(us), us[4], NewURL{}), ReasonMoved)
	if err != nil || n != 5 {
		t.Fatalf("AddDone = %d, %v; want 5 (4 inserted past the host cap, 1 completed)", n, err)
	}
	wantCounts(t, f, Counts{InProgress: 1, Completed: 5})
	if r, _, _ := f.Get(fps[0]); r.State != Completed || r.Reason != "done_elsewhere" {
		t.Fatalf("IN_LIST record after AddDone: %+v", r)
	}
	if r, _, _ := f.Get(fps[3]); r.State != Completed || r.Reason != "moved" || r.URL != us[3].URL || r.Host != us[3].Host {
		t.Fatalf("inserted record: %+v", r)
	}
	if len(scanAll(t, f, 0, 100)) != 0 {
		t.Fatal("a completed URL is still queued")
	}
	if k, err := f.Add(ctx, us); err != nil || k != 0 {
		t.Fatalf("Add after AddDone added %d (%v)", k, err)
	}
	if k, err := addCompleted(f, us, ReasonMoved); err != nil || k != 0 {
		t.Fatalf("second AddDone changed %d (%v)", k, err)
	}
	g := reopen(t, f, nil)
	wantCounts(t, g, Counts{InList: 1, Completed: 5}) // the IN_PROGRESS one returns to IN_LIST
}

// TestAddCopied: a record a replica holder moved (ReasonCopied) is filed
// where no record of its URL is and completes a queued one, but leaves a
// completed one as it is (the owner's due time); the owner's copy that
// comes after it replaces its due time, later or not.
func TestAddCopied(t *testing.T) {
	f := open(t, nil)
	us := gen("c", 1, 3)
	fps := refsOf(us)
	now := time.Now()
	stale, fresh := now.Add(-time.Second), now.Add(time.Minute)
	at := func(u NewURL, due time.Time) NewURL { u.Due = due; return u }
	// 0: unknown here; 1: queued here; 2: completed with the owner's due.
	if _, err := f.Add(ctx, us[1:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := addCompleted(f, []NewURL{at(us[2], fresh)}, ReasonMoved); err != nil {
		t.Fatal(err)
	}
	n, err := addCompleted(f, []NewURL{at(us[0], stale), at(us[1], stale), at(us[2], stale)}, ReasonCopied)
	if err != nil || n != 2 {
		t.Fatalf("copied: %d filed (%v), want 2", n, err)
	}
	for i, want := range []struct {
		state  State
		reason string
		due    time.Time
	}{{Completed, ReasonCopied, stale}, {Completed, ReasonCopied, stale}, {Completed, ReasonMoved, fresh}} {
		r, ok, _ := f.Get(fps[i])
		if !ok || r.State != want.state || r.Reason != want.reason || !r.Due.Equal(want.due) {
			t.Errorf("record %d: %v %q due %v, want %v %q due %v", i, r.State, r.Reason, r.Due, want.state, want.reason, want.due)
		}
	}
	// The owner's moved copy comes: its due time holds, though later.
	if _, err := addCompleted(f, []NewURL{at(us[0], fresh)}, ReasonMoved); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := f.Get(fps[0]); r.Reason != ReasonMoved || !r.Due.Equal(fresh) {
		t.Errorf("after the owner's copy: %q due %v, want %q due %v", r.Reason, r.Due, ReasonMoved, fresh)
	}
}
