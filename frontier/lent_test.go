package frontier

import (
	"testing"
	"time"
)

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
	f := open(t, nil)
	if _, err := f.Add(ctx, []NewURL{{URL: a, Host: "a.test"}, {URL: b, Host: "a.test"}, {URL: c, Host: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkInProgress(ctx, []Ref{RefOf(c)}); err != nil {
		t.Fatal(err)
	}
	retry := time.Now().Add(time.Hour)
	rs := []Result{
		{FP: Fingerprint(a), Host: "a.test", State: Completed, Status: 200, Reason: "ok", Bytes: 10},
		{FP: Fingerprint(b), Host: "a.test", State: Stalled, Status: 503, Reason: "http_5xx", RetryAt: retry},
		{FP: Fingerprint(c), Host: "a.test", State: Completed, Status: 404, Reason: "http_4xx"},
		{FP: Fingerprint(d), Host: "a.test", State: Completed, Status: 200, Reason: "ok"}, // unknown
	}
	done, err := f.SettleLent(ctx, rs)
	if err != nil || len(done) != 4 || !done[0] || !done[1] || !done[2] || done[3] {
		t.Fatalf("SettleLent = %v, %v; want the first 3 settled", done, err)
	}
	for _, tc := range []struct {
		url    string
		state  State
		status int
	}{{a, Completed, 200}, {b, Stalled, 503}, {c, Completed, 404}} {
		r := mustGet(t, f, tc.url)
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
	if _, err := f.Add(ctx, []NewURL{{URL: e, Host: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Claim(ctx, []Ref{RefOf(e)}); err != nil {
		t.Fatal(err)
	}
	if done, err := f.SettleLent(ctx, []Result{{FP: Fingerprint(e), Host: "a.test", State: Completed, Status: 200}}); err != nil || done[0] {
		t.Errorf("SettleLent of a claimed record = %v, %v; want not settled", done, err)
	}
	if _, err := f.SettleLent(ctx, []Result{{FP: 1, Host: "a.test", State: InList}}); err == nil {
		t.Error("SettleLent accepted a result in state IN_LIST")
	}
}

// TestScanSince: the cursor returned reads only what was queued after it.
func TestScanSince(t *testing.T) {
	f := open(t, nil)
	add := func(urls ...string) {
		var us []NewURL
		for _, u := range urls {
			us = append(us, NewURL{URL: u, Host: "a.test"})
		}
		if _, err := f.Add(ctx, us); err != nil {
			t.Fatal(err)
		}
	}
	add("http://a.test/1", "http://a.test/2", "http://a.test/3")
	recs, cur, err := f.ScanSince(0, nil, 2)
	if err != nil || len(recs) != 2 || recs[0].URL != "http://a.test/1" {
		t.Fatalf("first read: %v, %v", recs, err)
	}
	recs, cur, err = f.ScanSince(0, cur, 10)
	if err != nil || len(recs) != 1 || recs[0].URL != "http://a.test/3" {
		t.Fatalf("second read: %v, %v", recs, err)
	}
	recs, cur2, err := f.ScanSince(0, cur, 10)
	if err != nil || len(recs) != 0 || string(cur2) != string(cur) {
		t.Fatalf("read at the end: %v, %v (cursor moved: %v)", recs, err, string(cur2) != string(cur))
	}
	add("http://a.test/4")
	if recs, _, err = f.ScanSince(0, cur, 10); err != nil || len(recs) != 1 || recs[0].URL != "http://a.test/4" {
		t.Fatalf("read after an add: %v, %v", recs, err)
	}
	if _, _, err := f.ScanSince(5, nil, 1); err == nil {
		t.Error("ScanSince accepted a phase out of range")
	}
}

// TestSettleLentRevisit: a lent page's outcome makes the record due again
// as the owner's own fetch does (its Revisit), keeps the page's validators
// and digest, and, when the holder had nothing to compare with, tells a
// change by the record's digest (an adaptive interval grows when the page
// did not change and shrinks when it did).
func TestSettleLentRevisit(t *testing.T) {
	const u = "http://a.test/r"
	f := open(t, nil)
	if _, err := f.Add(ctx, []NewURL{{URL: u, Host: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	sched := Schedule{Interval: time.Hour, Adaptive: true}
	settle := func(digest byte) Record {
		t.Helper()
		p := &PageState{ETag: `"e"`, Digest: [20]byte{digest}, Archived: time.UnixMilli(time.Now().UnixMilli())}
		before := time.Now()
		done, err := f.SettleLent(ctx, []Result{{FP: Fingerprint(u), Host: "a.test", State: Completed, Status: 200, Reason: "ok", Revisit: sched, Page: p}})
		if err != nil || !done[0] {
			t.Fatalf("SettleLent = %v, %v", done, err)
		}
		r := mustGet(t, f, u)
		if r.State != Completed || r.Page.Digest != p.Digest || r.Page.ETag != p.ETag || r.Due.Before(before.Add(r.Page.Interval)) {
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
