package cluster

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// testRecords is a frontier with the cluster's writes on it through
// Records: the tests set records up and read them with the frontier's
// own methods.
type testRecords struct {
	*frontier.Frontier
	RecordWriter
}

// openRecords opens a frontier in a temporary directory.
func openRecords(t *testing.T) testRecords {
	t.Helper()
	f, err := frontier.Open(frontier.Options{Path: filepath.Join(t.TempDir(), "frontier.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return testRecords{Frontier: f, RecordWriter: RecordWriter{Records: f}}
}

func getRecord(t *testing.T, f Records, url string) frontier.Record {
	t.Helper()
	r, ok, err := f.Get(frontier.RefOf(url))
	if err != nil || !ok {
		t.Fatalf("Get(%s) = %v, %v", url, ok, err)
	}
	return r
}

// TestRecordsMove: the writes of a rebalance. Claim takes IN_LIST and
// STALLED records out of the crawl (and reports COMPLETED ones as they
// are, never IN_PROGRESS or unknown ones), Remove deletes what is still
// as claimed, MarkReplicas relabels COMPLETED records once; on the
// receiving side AddDone completes or inserts moved records (past the
// host cap), AddReplicas keeps replicas, and a second call changes
// nothing.
func TestRecordsMove(t *testing.T) {
	ctx := context.Background()
	f := openRecords(t)
	var us []frontier.NewURL
	var refs []frontier.Ref
	for i := range 6 {
		u := frontier.NewURL{URL: "http://m.test/" + string(rune('a'+i)), Host: "m.test"}
		us, refs = append(us, u), append(refs, frontier.RefOf(u.URL))
	}
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	// 0: completed, 1: stalled, 2: in progress, 3..5: in list.
	if err := f.MarkInProgress(ctx, refs[:3]); err != nil {
		t.Fatal(err)
	}
	if err := f.Finish(ctx, []frontier.Result{{FP: refs[0].FP, Host: "m.test", State: frontier.Completed, Status: 200},
		{FP: refs[1].FP, Host: "m.test", State: frontier.Stalled, RetryAt: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := f.Claim(ctx, append(slices.Clone(refs), frontier.Ref{FP: 1, Host: "m.test"}))
	if err != nil || len(claimed) != 5 {
		t.Fatalf("Claim = %d records, %v; want 5 (not the one in progress, not the unknown one)", len(claimed), err)
	}
	if claimed[0].State != frontier.Completed || claimed[1].State != frontier.Stalled || claimed[2].State != frontier.InList {
		t.Fatalf("claimed states %v %v %v, want the states before the claim", claimed[0].State, claimed[1].State, claimed[2].State)
	}
	if c := f.Counts(); c != (frontier.Counts{InProgress: 5, Completed: 1}) {
		t.Fatalf("after Claim: %+v", c)
	}
	if n, err := f.MarkReplicas(ctx, refs[:2]); err != nil || n != 1 {
		t.Fatalf("MarkReplicas = %d, %v; want 1 (the completed record)", n, err)
	}
	if n, err := f.MarkReplicas(ctx, refs[:1]); err != nil || n != 0 {
		t.Fatalf("second MarkReplicas = %d, %v; want 0", n, err)
	}
	if err := f.Requeue(ctx, refs[5:]); err != nil { // a claim undone
		t.Fatal(err)
	}
	if n, err := f.Remove(ctx, claimed); err != nil || n != 4 {
		t.Fatalf("Remove = %d, %v; want 4 (not the requeued one)", n, err)
	}
	if c := f.Counts(); c != (frontier.Counts{InList: 1, InProgress: 1}) {
		t.Fatalf("after Remove: %+v", c)
	}

	g := openRecords(t)
	if n, err := g.AddDone(ctx, us[:3]); err != nil || n != 3 {
		t.Fatalf("AddDone = %d, %v; want 3", n, err)
	}
	if n, err := g.AddReplicas(ctx, us[2:]); err != nil || n != 3 {
		t.Fatalf("AddReplicas = %d, %v; want 3 (not the one moved already)", n, err)
	}
	if n, err := g.AddDone(ctx, us); err != nil || n != 0 {
		t.Fatalf("second AddDone = %d, %v; want 0", n, err)
	}
	if r := getRecord(t, g, us[0].URL); r.State != frontier.Completed || r.Reason != frontier.ReasonMoved {
		t.Fatalf("moved record %+v", r)
	}
	if r := getRecord(t, g, us[4].URL); r.State != frontier.Completed || r.Reason != frontier.ReasonReplica {
		t.Fatalf("replica %+v", r)
	}
	if hs, _, _ := g.Host("m.test"); hs.Admitted != 3 {
		t.Fatalf("admitted %d, want 3 (moved records count, replicas do not)", hs.Admitted)
	}
}

// TestSettleLent: the result of a URL fetched elsewhere settles an IN_LIST
// record (COMPLETED or STALLED, tries counted) or an IN_PROGRESS one, and
// leaves COMPLETED records and unknown URLs alone.
func TestSettleLent(t *testing.T) {
	const (
		a = "http://a.test/1"
		b = "http://a.test/2"
		c = "http://a.test/3"
		d = "http://a.test/4"
	)
	ctx := context.Background()
	f := openRecords(t)
	if _, err := f.Add(ctx, []frontier.NewURL{{URL: a, Host: "a.test"}, {URL: b, Host: "a.test"}, {URL: c, Host: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkInProgress(ctx, []frontier.Ref{frontier.RefOf(c)}); err != nil {
		t.Fatal(err)
	}
	retry := time.Now().Add(time.Hour)
	rs := []frontier.Result{
		{FP: frontier.Fingerprint(a), Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok", Bytes: 10},
		{FP: frontier.Fingerprint(b), Host: "a.test", State: frontier.Stalled, Status: 503, Reason: "http_5xx", RetryAt: retry},
		{FP: frontier.Fingerprint(c), Host: "a.test", State: frontier.Completed, Status: 404, Reason: "http_4xx"},
		{FP: frontier.Fingerprint(d), Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok"}, // unknown
	}
	done, err := f.SettleLent(ctx, rs)
	if err != nil || len(done) != 4 || !done[0] || !done[1] || !done[2] || done[3] {
		t.Fatalf("SettleLent = %v, %v; want the first 3 settled", done, err)
	}
	for _, tc := range []struct {
		url    string
		state  frontier.State
		status int
	}{{a, frontier.Completed, 200}, {b, frontier.Stalled, 503}, {c, frontier.Completed, 404}} {
		r := getRecord(t, f, tc.url)
		if r.State != tc.state || r.Status != tc.status || r.Tries != 1 {
			t.Errorf("%s: state %v status %d tries %d, want %v %d 1", tc.url, r.State, r.Status, r.Tries, tc.state, tc.status)
		}
	}
	if got := f.Counts(); got.InList != 0 || got.InProgress != 0 || got.Completed != 2 || got.Stalled != 1 { // before the claim below
		t.Errorf("counts %+v, want 0 in list, 0 in progress, 2 completed, 1 stalled", got)
	}
	// A second outcome for a COMPLETED record changes nothing.
	if done, err := f.SettleLent(ctx, rs[:1]); err != nil || done[0] {
		t.Errorf("SettleLent of a completed record = %v, %v; want not settled", done, err)
	}
	// A record claimed by a rebalance (being moved) is left to its new owner.
	const e = "http://a.test/5"
	if _, err := f.Add(ctx, []frontier.NewURL{{URL: e, Host: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Claim(ctx, []frontier.Ref{frontier.RefOf(e)}); err != nil {
		t.Fatal(err)
	}
	if done, err := f.SettleLent(ctx, []frontier.Result{{FP: frontier.Fingerprint(e), Host: "a.test", State: frontier.Completed, Status: 200}}); err != nil || done[0] {
		t.Errorf("SettleLent of a claimed record = %v, %v; want not settled", done, err)
	}
	if _, err := f.SettleLent(ctx, []frontier.Result{{FP: 1, Host: "a.test", State: frontier.InList}}); err == nil {
		t.Error("SettleLent accepted a result in state IN_LIST")
	}
}

// TestSettleLentRevisit: a lent page's outcome makes the record due again
// as the owner's own fetch does (its Revisit), keeps the page's validators
// and digest, and, when the holder had nothing to compare with, tells a
// change by the record's digest (an adaptive interval grows when the page
// did not change and shrinks when it did).
func TestSettleLentRevisit(t *testing.T) {
	const u = "http://a.test/r"
	ctx := context.Background()
	f := openRecords(t)
	if _, err := f.Add(ctx, []frontier.NewURL{{URL: u, Host: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	sched := frontier.Schedule{Interval: time.Hour, Adaptive: true}
	settle := func(digest byte) frontier.Record {
		t.Helper()
		p := &frontier.PageState{ETag: `"e"`, Digest: [20]byte{digest}, Archived: time.UnixMilli(time.Now().UnixMilli())}
		before := time.Now()
		done, err := f.SettleLent(ctx, []frontier.Result{{FP: frontier.Fingerprint(u), Host: "a.test", State: frontier.Completed, Status: 200, Reason: "ok", Revisit: sched, Page: p}})
		if err != nil || !done[0] {
			t.Fatalf("SettleLent = %v, %v", done, err)
		}
		r, ok, err := f.Get(frontier.RefOf(u))
		if err != nil || !ok {
			t.Fatalf("Get = %v, %v", ok, err)
		}
		if r.State != frontier.Completed || r.Page.Digest != p.Digest || r.Page.ETag != p.ETag || r.Due.Before(before.Add(r.Page.Interval)) {
			t.Fatalf("settled: %+v, want COMPLETED with the page's state, due %v after the fetch", r, r.Page.Interval)
		}
		return r
	}
	release := func() {
		t.Helper()
		if n, err := f.ReleaseDue(ctx, time.Now().Add(24*time.Hour), 0); err != nil || n != 1 {
			t.Fatalf("ReleaseDue = %d, %v", n, err)
		}
	}
	if r := settle(1); r.Page.Interval != time.Hour {
		t.Errorf("first fetch: interval %v, want 1h", r.Page.Interval)
	}
	release()
	near := func(a, b time.Duration) bool { return a-b < time.Millisecond && b-a < time.Millisecond }
	if r := settle(1); !near(r.Page.Interval, time.Hour*14/10) {
		t.Errorf("the same digest: interval %v, want 1h24m (unchanged: ×1.4)", r.Page.Interval)
	}
	release()
	if r := settle(2); !near(r.Page.Interval, time.Hour*14/10*8/10) {
		t.Errorf("another digest: interval %v, want ×0.8 (changed)", r.Page.Interval)
	}
}
