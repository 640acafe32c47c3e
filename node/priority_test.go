package node

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/clock"
)

// TestSchedulerPriorityLane: dispatched elements of slow hosts and of hosts
// that have not finished a trip yet wait ahead of the others (in their own
// order), and a trip's report makes its host known, and slow or not.
func TestSchedulerPriorityLane(t *testing.T) {
	b, err := bucket.New(bucket.Config{Columns: 199, Rows: 4, ListCap: 20, MaxQueueWait: time.Second, Phases: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{bkt: b, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock.Real}
	s := newScheduler(n)
	now := time.Now()
	batch := func(host string) bucket.Batch {
		if o := b.Add(now, host, frontier.HostHash(host), bucket.Item{FP: frontier.HostHash(host)}); o != bucket.Placed {
			t.Fatalf("add %s: %v", host, o)
		}
		bt, ok := b.DispatchHost(host, frontier.HostHash(host))
		if !ok {
			t.Fatalf("DispatchHost(%s): none", host)
		}
		return bt
	}
	order := func() string {
		var hs []string
		for _, bt := range s.pending {
			hs = append(hs, bt.Host)
		}
		return fmt.Sprintf("%s (%d prio)", strings.Join(hs, " "), s.nprio)
	}
	s.slow["s1"], s.slow["s2"], s.slow["s3"] = struct{}{}, struct{}{}, struct{}{}
	for _, h := range []string{"a", "b", "c", "d", "e", "s1", "s2", "s3"} {
		s.tripDone(h) // known hosts; "n1" and "n2" are new
	}
	steps := []struct {
		enqueue []string // hosts dispatched now, in Dispatch's order
		handOut int      // then this many taken by workers
		want    string
	}{
		{enqueue: []string{"a", "b"}, want: "a b (0 prio)"},
		{enqueue: []string{"c", "s1", "d"}, want: "s1 a b c d (1 prio)"},
		{enqueue: []string{"s2"}, want: "s1 s2 a b c d (2 prio)"},
		{handOut: 1, want: "s2 a b c d (1 prio)"},
		{handOut: 2, want: "b c d (0 prio)"},
		{enqueue: []string{"e"}, handOut: 1, want: "c d e (0 prio)"},
		{enqueue: []string{"n1", "s3", "n2"}, want: "n1 s3 n2 c d e (3 prio)"},
		{handOut: 4, want: "d e (0 prio)"},
	}
	for i, st := range steps {
		var bs []bucket.Batch
		for _, h := range st.enqueue {
			bs = append(bs, batch(h))
		}
		s.enqueue(bs)
		for range st.handOut {
			s.handedOut()
		}
		if got := order(); got != st.want {
			t.Fatalf("step %d: pending %s, want %s", i, got, st.want)
		}
	}

	// Reports: a trip at least slowFactor times slower per request than
	// the recent mean makes its host slow, a faster one clears it; the
	// element goes to TIMEWAIT for the report's wait.
	ms := time.Millisecond
	for _, tc := range []struct {
		host    string
		perPage time.Duration
		avg     time.Duration // the mean before the report (0: none yet)
		want    bool
	}{
		{"x", 30 * ms, 0, false}, // the first report only sets the mean
		{"x", 30 * ms, 10 * ms, true},
		{"x", 19 * ms, 10 * ms, false},
		{"w", 0, 10 * ms, true},       // no request sent: stays as it was (slow before, below)
		{"w", 5 * ms, 10 * ms, false}, // fast now
		{"y", 2 * ms, 10 * ms, false},
	} {
		if tc.host == "w" && tc.perPage == 0 {
			s.slow["w"] = struct{}{}
		}
		s.pageAvg = tc.avg
		bt := batch(tc.host)
		s.finish(finished{id: bt.ID, wait: time.Hour, host: tc.host, perPage: tc.perPage})
		if !s.known(tc.host) {
			t.Fatalf("%s unknown after its trip", tc.host)
		}
		if _, got := s.slow[tc.host]; got != tc.want {
			t.Fatalf("after a trip of %s at %v per request (mean %v): slow %v, want %v", tc.host, tc.perPage, tc.avg, got, tc.want)
		}
		if want := tc.avg + (tc.perPage-tc.avg)/pageAvgWeight; tc.perPage > 0 && tc.avg > 0 && s.pageAvg != want {
			t.Fatalf("mean %v after a trip at %v, want %v", s.pageAvg, tc.perPage, want)
		}
		if v, _ := b.Lookup(tc.host, frontier.HostHash(tc.host)); v.State != bucket.TimeWait || v.At.Before(now.Add(59*time.Minute)) {
			t.Fatalf("%s after finish: %+v, want TIMEWAIT for an hour", tc.host, v)
		}
		b.Release(now.Add(2 * time.Hour))
	}
}

// TestTripReport: the element's TIMEWAIT is what is left of the host's delay
// after the trip's last request, and the time per request is the host's
// delay plus its mean response time.
func TestTripReport(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name     string
		delay    time.Duration
		lastAgo  time.Duration // -1: no request sent
		requests int
		busy     time.Duration
		wait     [2]time.Duration // bounds
		perPage  time.Duration
	}{
		{"no delay", 0, 0, 3, 3 * time.Millisecond, [2]time.Duration{0, 0}, time.Millisecond},
		{"no request: the whole delay", 80 * time.Millisecond, -1, 0, 0, [2]time.Duration{80 * time.Millisecond, 80 * time.Millisecond}, 0},
		{"delay partly spent committing", 80 * time.Millisecond, 30 * time.Millisecond, 1, time.Millisecond, [2]time.Duration{40 * time.Millisecond, 50 * time.Millisecond}, 81 * time.Millisecond},
		{"delay spent", 80 * time.Millisecond, time.Second, 1, time.Millisecond, [2]time.Duration{0, 0}, 81 * time.Millisecond},
		{"slow responses", 0, 0, 4, 4 * 25 * time.Millisecond, [2]time.Duration{0, 0}, 25 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &hostTrip{n: &Node{clock: clock.NewFake(now)}, host: "h", tripPace: tripPace{delay: tc.delay, requests: tc.requests, busy: tc.busy}}
			if tc.lastAgo >= 0 {
				tr.last = now.Add(-tc.lastAgo)
			}
			f := tr.finished(bucket.ElementID{Col: 1})
			if f.wait < tc.wait[0] || f.wait > tc.wait[1] || f.perPage != tc.perPage || f.host != "h" || f.id.Col != 1 {
				t.Fatalf("finished = %+v, want wait in %v, %v per request", f, tc.wait, tc.perPage)
			}
		})
	}
}

// TestSchedulerSitePriority: with sites: priorities, dispatched elements
// wait in order of their site's priority (a site of priority > 0 in the
// priority lane), in dispatch order among equals, so that when more hosts
// are due than workers are free the higher-priority sites are served
// first.
func TestSchedulerSitePriority(t *testing.T) {
	b, err := bucket.New(bucket.Config{Columns: 199, Rows: 4, ListCap: 20, MaxQueueWait: time.Second, Phases: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{bkt: b, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock.Real}
	n.cfg.Sites = []config.Site{{Match: "vip*", Priority: 10}, {Match: "mid*", Priority: 5}, {Match: "low*", Priority: -5}}
	s := newScheduler(n)
	now := time.Now()
	for _, h := range []string{"a", "b", "c", "vip1", "vip2", "mid1", "mid2", "low1", "low2"} {
		s.tripDone(h) // known: only the site priority orders them
	}
	batch := func(host string) bucket.Batch {
		if o := b.Add(now, host, frontier.HostHash(host), bucket.Item{FP: frontier.HostHash(host)}); o != bucket.Placed {
			t.Fatalf("add %s: %v", host, o)
		}
		bt, ok := b.DispatchHost(host, frontier.HostHash(host))
		if !ok {
			t.Fatalf("DispatchHost(%s): none", host)
		}
		return bt
	}
	order := func() string {
		var hs []string
		for _, bt := range s.pending {
			hs = append(hs, bt.Host)
		}
		return fmt.Sprintf("%s (%d prio)", strings.Join(hs, " "), s.nprio)
	}
	for i, st := range []struct {
		enqueue []string
		handOut int
		want    string
	}{
		{enqueue: []string{"low1", "a", "b"}, want: "a b low1 (0 prio)"},
		{enqueue: []string{"mid1", "c", "vip1"}, want: "vip1 mid1 a b c low1 (2 prio)"},
		{enqueue: []string{"mid2", "low2", "vip2"}, want: "vip1 vip2 mid1 mid2 a b c low1 low2 (4 prio)"},
		{handOut: 3, want: "mid2 a b c low1 low2 (1 prio)"},
		{enqueue: []string{"new"}, want: "mid2 new a b c low1 low2 (2 prio)"}, // a new host: the lane, behind higher sites
	} {
		var bs []bucket.Batch
		for _, h := range st.enqueue {
			bs = append(bs, batch(h))
		}
		s.enqueue(bs)
		for range st.handOut {
			s.handedOut()
		}
		if got := order(); got != st.want {
			t.Fatalf("step %d: pending %s, want %s", i, got, st.want)
		}
	}
}
