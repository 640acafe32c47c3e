package frontier

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestSettle: one call adds the discovered URLs, records the results and
// requeues the rest; a bad result state writes nothing at all.
func TestSettle(t *testing.T) {
	f := open(t, nil)
	us := gen("t", 1, 3) // a, b, c of one host
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	a, b, c := Fingerprint(us[0].URL), Fingerprint(us[1].URL), Fingerprint(us[2].URL)
	if err := f.MarkInProgress(ctx, []uint64{a, b, c}); err != nil {
		t.Fatal(err)
	}
	newURL := NewURL{URL: "http://t0.test/new", Host: "t0.test", Depth: 1}
	found := []NewURL{newURL, us[0]} // one new, one known

	// A state other than Completed/Stalled: error, and nothing written.
	if _, err := f.Settle(ctx, found, []Result{{FP: a, State: InList}}, []uint64{c}); err == nil {
		t.Fatal("Settle with state IN_LIST succeeded")
	}
	if got := f.Counts(); got != (Counts{InProgress: 3}) {
		t.Fatalf("after refused Settle: %+v, want 3 in progress and nothing else", got)
	}

	added, err := f.Settle(ctx, found, []Result{{FP: a, State: Completed, Status: 200}, {FP: b, State: Stalled}}, []uint64{c})
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
	if n, err := f.Settle(ctx, nil, nil, nil); n != 0 || err != nil {
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
	a := Fingerprint(us[0].URL)
	p := f.MarkInProgressAsync(ctx, []uint64{a})
	// Submitted after the mark: must see the URL IN_PROGRESS and complete it.
	if _, err := f.Settle(ctx, nil, []Result{{FP: a, State: Completed, Status: 200}}, nil); err != nil {
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
	if _, err := f.MarkInProgressAsync(ctx, []uint64{Fingerprint(us[1].URL)}).Wait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("mark after close: %v, want ErrClosed", err)
	}
}

// TestSettleAsync: pages settled one by one without waiting are all applied
// in order, each reports how many of its links were new, and an invalid
// result fails at once.
func TestSettleAsync(t *testing.T) {
	f := open(t, nil)
	us := gen("a", 1, 3)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	fps := fpsOf(us)
	if err := f.MarkInProgress(ctx, fps); err != nil {
		t.Fatal(err)
	}
	var ps []*Pending
	for i, fp := range fps {
		link := NewURL{URL: fmt.Sprintf("http://a0.test/link/%d", i%2), Host: "a0.test"} // pages 0 and 2 find the same link
		ps = append(ps, f.SettleAsync(ctx, []NewURL{link}, []Result{{FP: fp, State: Completed}}, nil))
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
	if _, err := f.SettleAsync(ctx, nil, []Result{{FP: fps[0], State: InProgress}}, nil).Wait(); err == nil {
		t.Fatal("SettleAsync with state IN_PROGRESS succeeded")
	}
}
