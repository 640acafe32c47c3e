package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// TestRebalanceCarriesDue: records moved by a join and by a graceful leave
// keep their revisit due time: COMPLETED ones (due index), their replicas
// and queued revisits alike.
func TestRebalanceCarriesDue(t *testing.T) {
	ctx := context.Background()
	a := startTestCluster(t, "a")
	a.fetching(t)
	var urls []frontier.NewURL
	for i := range 400 {
		h := fmt.Sprintf("h%d.test", i%10)
		urls = append(urls, frontier.NewURL{URL: fmt.Sprintf("http://%s/p%d", h, i), Host: h})
	}
	if _, err := a.f.Add(ctx, urls); err != nil {
		t.Fatal(err)
	}
	refs := make([]frontier.Ref, len(urls))
	results := make([]frontier.Result, len(urls))
	for i, u := range urls {
		refs[i] = frontier.RefOf(u.URL)
		results[i] = frontier.Result{FP: refs[i].FP, Host: u.Host, State: frontier.Completed, Status: 200, Reason: "ok",
			Revisit: frontier.Schedule{Interval: time.Hour}}
	}
	if err := a.f.MarkInProgress(ctx, refs); err != nil {
		t.Fatal(err)
	}
	// The first half is due in an hour, the second half is released as due
	// (queued revisits): finish it with a 1 ns interval and release it.
	for i := 200; i < 400; i++ {
		results[i].Revisit.Interval = time.Nanosecond
	}
	if err := a.f.Finish(ctx, results); err != nil {
		t.Fatal(err)
	}
	if n, err := a.f.ReleaseDue(ctx, time.Now().Add(time.Second), 0); err != nil || n != 200 {
		t.Fatalf("release: %d %v", n, err)
	}
	want := map[string]time.Time{}
	for u, r := range records(t, a.f) {
		if r.Due.IsZero() {
			t.Fatalf("%s has no due time before the join", u)
		}
		want[u] = r.Due
	}

	check := func(who string, f *frontier.Frontier, owner string, ring *ring.Ring) (completed, queued int) {
		t.Helper()
		for u, r := range records(t, f) {
			if o := ring.Owner(r.FP); o != owner && r.Reason != frontier.ReasonReplica {
				t.Fatalf("%s holds %s owned by %s", who, u, o)
			}
			if d := r.Due.Sub(want[u]); d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("%s: %s (%s) due %v, was due %v", who, u, r.State, r.Due, want[u])
			}
			switch r.State {
			case frontier.Completed:
				completed++
			case frontier.InList:
				queued++
			}
		}
		return completed, queued
	}
	b := startTestCluster(t, "b", a.c.Members().Addr())
	b.fetching(t)
	both := ring.New([]string{"a", "b"})
	bc, bq := check("b", b.f, "b", both)
	if bc == 0 || bq == 0 || b.f.Revisits() != int64(bq) {
		t.Fatalf("b got %d COMPLETED and %d queued revisits (frontier counts %d)", bc, bq, b.f.Revisits())
	}
	if next, ok := b.f.NextDue(); !ok || next.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("b's due index: %v %v", next, ok)
	}
	b.close(t)
	ac, aq := check("a", a.f, "a", ring.New([]string{"a"}))
	if ac != 200 || aq != 200 || a.f.Revisits() != 200 {
		t.Fatalf("after b's hand-off a holds %d COMPLETED and %d queued revisits (frontier counts %d)", ac, aq, a.f.Revisits())
	}
}
