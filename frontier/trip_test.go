package frontier

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"
)

// TestSettle: one call adds the discovered URLs, records the results and
// requeues the rest; a bad result state writes nothing at all.
func TestSettle(t *testing.T) {
	f := open(t, nil)
	us := gen("t", 1, 3) // a, b, c of one host
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	a, b, c := RefOf(us[0].URL), RefOf(us[1].URL), RefOf(us[2].URL)
	if err := f.MarkInProgress(ctx, []Ref{a, b, c}); err != nil {
		t.Fatal(err)
	}
	newURL := NewURL{URL: "http://t0.test/new", Host: "t0.test", Depth: 1}
	found := []NewURL{newURL, us[0]} // one new, one known

	// A state other than Completed/Stalled: error, and nothing written.
	if _, err := f.Settle(ctx, SettleRequest{Found: found, Results: []Result{{FP: a.FP, Host: a.Host, State: InList}}, Requeue: []Ref{c}}).Wait(); err == nil {
		t.Fatal("Settle with state IN_LIST succeeded")
	}
	if got := f.Counts(); got != (Counts{InProgress: 3}) {
		t.Fatalf("after refused Settle: %+v, want 3 in progress and nothing else", got)
	}

	added, err := f.Settle(ctx, SettleRequest{Found: found, Results: []Result{{FP: a.FP, Host: a.Host, State: Completed, Status: 200}, {FP: b.FP, Host: b.Host, State: Stalled}}, Requeue: []Ref{c}}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if added != 1 {
		t.Fatalf("added %d, want 1", added)
	}
	want := map[string]State{us[0].URL: Completed, us[1].URL: Stalled, us[2].URL: InList, newURL.URL: InList}
	for u, st := range want {
		if r := mustGet(t, f, u); r.State != st {
			t.Errorf("%s: state %s, want %s", u, r.State, st)
		}
	}
	if got := f.Counts(); got != (Counts{InList: 2, Completed: 1, Stalled: 1}) {
		t.Fatalf("counts %+v", got)
	}
	// c went back to its original queue position: before the new URL.
	if got := urlsOf(scanAll(t, f, 0, 0)); len(got) != 2 || got[0] != us[2].URL || got[1] != newURL.URL {
		t.Fatalf("queue %v, want [%s %s]", got, us[2].URL, newURL.URL)
	}
	if n, err := f.Settle(ctx, SettleRequest{}).Wait(); n != 0 || err != nil {
		t.Fatalf("empty Settle = %d, %v", n, err)
	}
}

// TestMarkInProgressAsync: the mark is applied before a Settle submitted
// after it, Poll reports completion once, and a closed frontier answers
// with ErrClosed instead of blocking.
func TestMarkInProgressAsync(t *testing.T) {
	f := open(t, nil)
	us := gen("m", 1, 2)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	a := RefOf(us[0].URL)
	p := f.MarkInProgressAsync(ctx, []Ref{a})
	// Submitted after the mark: must see the URL IN_PROGRESS and complete it.
	if _, err := f.Settle(ctx, SettleRequest{Results: []Result{{FP: a.FP, Host: a.Host, State: Completed, Status: 200}}}).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if done, _, _ := p.Poll(); done {
		t.Fatal("Poll reported done twice")
	}
	if r := mustGet(t, f, us[0].URL); r.State != Completed {
		t.Fatalf("state %s, want COMPLETED (mark applied before the settle)", r.State)
	}
	empty := f.MarkInProgressAsync(ctx, nil)
	if done, _, err := empty.Poll(); !done || err != nil {
		t.Fatalf("empty mark: done=%v err=%v", done, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.MarkInProgressAsync(ctx, []Ref{RefOf(us[1].URL)}).Wait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("mark after close: %v, want ErrClosed", err)
	}
}

// TestSettleInOrder: pages settled one by one without waiting are all applied
// in order, each reports how many of its links were new, and an invalid
// result fails at once.
func TestSettleInOrder(t *testing.T) {
	f := open(t, nil)
	us := gen("a", 1, 3)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	fps := refsOf(us)
	if err := f.MarkInProgress(ctx, fps); err != nil {
		t.Fatal(err)
	}
	var ps []*Pending
	for i, fp := range fps {
		link := NewURL{URL: fmt.Sprintf("http://a0.test/link/%d", i%2), Host: "a0.test"} // pages 0 and 2 find the same link
		ps = append(ps, f.Settle(ctx, SettleRequest{Found: []NewURL{link}, Results: []Result{{FP: fp.FP, Host: fp.Host, State: Completed}}}))
	}
	var added []int
	for _, p := range ps {
		n, err := p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		added = append(added, n)
	}
	if !slices.Equal(added, []int{1, 1, 0}) {
		t.Fatalf("added per page %v, want [1 1 0]", added)
	}
	if got := f.Counts(); got != (Counts{InList: 2, Completed: 3}) {
		t.Fatalf("counts %+v", got)
	}
	if _, err := f.Settle(ctx, SettleRequest{Results: []Result{{FP: fps[0].FP, Host: fps[0].Host, State: InProgress}}}).Wait(); err == nil {
		t.Fatal("Settle with state IN_PROGRESS succeeded")
	}
}

// TestSettleTake: a settle write takes up to room of the new URLs of
// the trip's host straight to IN_PROGRESS (no queue entry) and lists them;
// known URLs, other hosts' URLs and those beyond room are queued as usual;
// a taken URL is the caller's (Finish, Requeue) and returns to IN_LIST at
// the next Open if the process dies first.
func TestSettleTake(t *testing.T) {
	f := open(t, nil)
	seed := NewURL{URL: "http://h.test/", Host: "h.test"}
	if _, err := f.Add(ctx, []NewURL{seed}); err != nil {
		t.Fatal(err)
	}
	sfp := RefOf(seed.URL)
	if err := f.MarkInProgress(ctx, []Ref{sfp}); err != nil {
		t.Fatal(err)
	}
	found := []NewURL{
		{URL: "http://h.test/1", Host: "h.test", Depth: 1},
		seed, // known
		{URL: "http://other.test/x", Host: "other.test", Depth: 1},
		{URL: "http://H.test/2", Host: "H.TEST", Depth: 1}, // the host as the page wrote it
		{URL: "http://h.test/3", Host: "h.test", Depth: 1}, // beyond room
	}
	p := f.Settle(ctx, SettleRequest{Found: found, Results: []Result{{FP: sfp.FP, Host: sfp.Host, State: Completed, Status: 200}}, Take: &Take{Host: "h.test", Room: 2}})
	if got := p.Taken(); got != nil {
		t.Fatalf("Taken before the write is done: %v", got)
	}
	added, err := p.Wait()
	if err != nil || added != 4 {
		t.Fatalf("Wait = %d, %v; want 4 new URLs", added, err)
	}
	var taken []string
	for _, tk := range p.Taken() {
		taken = append(taken, tk.URL)
		if tk.FP != Fingerprint(tk.URL) || tk.Depth != 1 {
			t.Errorf("taken %+v: wrong fingerprint or depth", tk)
		}
	}
	if want := []string{"http://h.test/1", "http://H.test/2"}; !slices.Equal(taken, want) {
		t.Fatalf("taken %v, want %v", taken, want)
	}
	wantCounts(t, f, Counts{InList: 2, InProgress: 2, Completed: 1})
	if got := urlsOf(scanAll(t, f, 0, 0)); !slices.Equal(got, []string{"http://other.test/x", "http://h.test/3"}) {
		t.Fatalf("queue %v: the taken URLs must not be in it", got)
	}
	if hs, ok, err := f.Host("h.test"); err != nil || !ok || hs.Admitted != 4 {
		t.Fatalf("host stats %+v, %v, %v: want 4 admitted (the seed, 2 taken, 1 queued)", hs, ok, err)
	}

	// The caller finishes one and the process dies with the other in flight.
	if err := f.Finish(ctx, []Result{{FP: Fingerprint("http://h.test/1"), Host: "h.test", State: Completed, Status: 200}}); err != nil {
		t.Fatal(err)
	}
	f = reopen(t, f, nil)
	wantCounts(t, f, Counts{InList: 3, Completed: 2})
	if r := mustGet(t, f, "http://H.test/2"); r.State != InList {
		t.Fatalf("taken URL after a restart: %s, want IN_LIST", r.State)
	}

	// No room, or no host: nothing is taken.
	for _, tc := range []struct {
		host string
		room int
	}{{"h.test", 0}, {"", 5}} {
		u := NewURL{URL: fmt.Sprintf("http://h.test/none-%d-%s", tc.room, tc.host), Host: "h.test"}
		p := f.Settle(ctx, SettleRequest{Found: []NewURL{u}, Take: &Take{Host: tc.host, Room: tc.room}})
		if n, err := p.Wait(); err != nil || n != 1 || len(p.Taken()) != 0 {
			t.Fatalf("host %q room %d: added %d, %v, taken %v; want 1 added, none taken", tc.host, tc.room, n, err, p.Taken())
		}
	}
}

// TestSettleNotDurable: a result whose Durable says no, asked after the
// before-commit hook, puts its URL back to IN_LIST at its queue position
// with no try counted; a durable one completes; Undurable counts them.
func TestSettleNotDurable(t *testing.T) {
	f := open(t, nil)
	us := gen("d", 1, 3)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	a, b, c := RefOf(us[0].URL), RefOf(us[1].URL), RefOf(us[2].URL)
	if err := f.MarkInProgress(ctx, []Ref{a, b, c}); err != nil {
		t.Fatal(err)
	}
	written := false // set by the hook: Durable must be asked after it
	f.SetBeforeCommit(func() { written = true })
	lost := func() bool { return false }
	kept := func() bool { return written }
	if _, err := f.Settle(ctx, SettleRequest{Results: []Result{
		{FP: a.FP, Host: a.Host, State: Completed, Status: 200, Durable: lost},
		{FP: b.FP, Host: b.Host, State: Stalled, Durable: lost},
		{FP: c.FP, Host: c.Host, State: Completed, Status: 200, Durable: kept},
	}}).Wait(); err != nil {
		t.Fatal(err)
	}
	for u, st := range map[string]State{us[0].URL: InList, us[1].URL: InList, us[2].URL: Completed} {
		if r := mustGet(t, f, u); r.State != st {
			t.Errorf("%s: state %s, want %s", u, r.State, st)
		}
	}
	if r := mustGet(t, f, us[0].URL); r.Tries != 0 || r.Status != 0 {
		t.Errorf("a lost fetch was counted: tries %d, status %d", r.Tries, r.Status)
	}
	if got := f.Counts(); got != (Counts{InList: 2, Completed: 1}) {
		t.Fatalf("counts %+v", got)
	}
	if got := urlsOf(scanAll(t, f, 0, 0)); len(got) != 2 || got[0] != us[0].URL || got[1] != us[1].URL {
		t.Fatalf("queue %v, want [%s %s] (their original positions)", got, us[0].URL, us[1].URL)
	}
	if n := f.Undurable(); n != 2 {
		t.Fatalf("Undurable = %d, want 2", n)
	}
}

// TestRunKept: a URL's run (the trap limits' steps on its way) is kept
// with its record: a scan, a URL taken for the caller's trip, a record
// read back, a retry and a restart give it back; a known URL keeps the
// run it was first added with.
func TestRunKept(t *testing.T) {
	f := open(t, nil)
	us := []NewURL{
		{URL: "http://r.test/cal/2026-11/", Host: "r.test", Depth: 1},
		{URL: "http://r.test/cal/2026-12/", Host: "r.test", Depth: 2, Run: 1},
		{URL: "http://r.test/cal/2027-01/", Host: "r.test", Depth: 3, Run: 2, Due: time.Unix(1700000000, 0)},
		{URL: "http://r.test/cal/2027-02/", Host: "r.test", Depth: 4, Run: maxRun + 9}, // capped
	}
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{us[0].URL: 0, us[1].URL: 1, us[2].URL: 2, us[3].URL: maxRun}
	check := func(when string) {
		t.Helper()
		got := map[string]int{}
		for _, r := range scanAll(t, f, 0, 0) {
			got[r.URL] = r.Run
			if g := mustGet(t, f, r.URL); g.Run != r.Run {
				t.Errorf("%s: %s: record run %d, queue run %d", when, r.URL, g.Run, r.Run)
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: runs %v, want %v", when, got, want)
		}
	}
	check("added")
	// Found again with another run: the record keeps the first.
	if n, err := f.Add(ctx, []NewURL{{URL: us[1].URL, Host: "r.test", Depth: 9, Run: 7}}); err != nil || n != 0 {
		t.Fatalf("known URL: added %d, %v", n, err)
	}
	check("found again")
	ref := RefOf(us[2].URL)
	if err := f.MarkInProgress(ctx, []Ref{ref}); err != nil {
		t.Fatal(err)
	}
	if err := f.Finish(ctx, []Result{{FP: ref.FP, Host: ref.Host, State: Stalled, Reason: "timeout"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ReleaseStalled(ctx, time.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("ReleaseStalled = %d, %v", n, err)
	}
	check("retried")
	f = reopen(t, f, nil)
	check("reopened")
	recs, _, _, err := f.ScanRecords(nil, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Run != want[r.URL] {
			t.Errorf("ScanRecords: %s run %d, want %d", r.URL, r.Run, want[r.URL])
		}
	}
	p := f.Settle(ctx, SettleRequest{Found: []NewURL{{URL: "http://r.test/cal/2027-03/", Host: "r.test", Depth: 5, Run: 3}}, Take: &Take{Host: "r.test", Room: 1}})
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if tk := p.Taken(); len(tk) != 1 || tk[0].Run != 3 {
		t.Fatalf("taken %+v, want the URL with run 3", tk)
	}
}
