package node

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/clock"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// TestDelayFactor: with politeness.delay_factor the gap before a unit's
// next request is at least factor × the last response time, capped at the
// longest delay (delay, robots.max_crawl_delay); 0 leaves the delay alone.
func TestDelayFactor(t *testing.T) {
	tests := []struct {
		name   string
		factor float64
		delay  time.Duration
		resp   time.Duration
		want   time.Duration
	}{
		{"off", 0, 100 * time.Millisecond, time.Second, 100 * time.Millisecond},
		{"fast answer: the delay", 2, 100 * time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond},
		{"slow answer: factor x response", 2, 100 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond},
		{"fractional factor", 0.5, 0, 300 * time.Millisecond, 150 * time.Millisecond},
		{"capped at max_crawl_delay", 10, time.Second, 10 * time.Second, 30 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Delay, cfg.Politeness.DelayFactor = tc.delay, tc.factor
			tr := &hostTrip{n: &Node{cfg: cfg}, tripPace: tripPace{delay: tc.delay}}
			tr.responded(tc.resp)
			if got := tr.gap(); got != tc.want {
				t.Errorf("gap = %s, want %s", got, tc.want)
			}
			if tr.requests != 1 || tr.busy != tc.resp {
				t.Errorf("requests %d busy %s, want 1 and %s", tr.requests, tr.busy, tc.resp)
			}
		})
	}
}

// TestUnitGates: one holder at a time per unit, the next one no earlier
// than the time the last release gave (on the gates' clock, a fake one
// here: no holder starts a millisecond before it, one starts at it);
// other units are not held up; a waiter whose context ends gives up
// without taking the gate.
func TestUnitGates(t *testing.T) {
	f := clock.NewFake(clockStart)
	g := newUnitGates(f)
	ctx := context.Background()
	const (
		holders = 6
		gap     = 20 * time.Millisecond
		holdFor = 2 * time.Millisecond // each holder's request
	)
	holding := make(chan time.Time) // a holder took the gate at
	proceed := make(chan time.Time) // release it, the next start no earlier than
	var wg sync.WaitGroup
	for range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.acquire(ctx, "d.test", time.Time{}); err != nil {
				t.Error(err)
				return
			}
			holding <- f.Now()
			g.release("d.test", <-proceed)
		}()
	}
	var next time.Time
	for i := range holders {
		select {
		case s := <-holding:
			if s.Before(next) {
				t.Errorf("holder %d started %s before the previous one's release allowed", i, next.Sub(s))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("holder %d never took the gate", i)
		}
		if i == 0 {
			// Another unit is free meanwhile.
			if err := g.acquire(ctx, "other.test", time.Time{}); err != nil {
				t.Fatal(err)
			}
			g.release("other.test", time.Time{})
		}
		f.Advance(holdFor)
		next = f.Now().Add(gap)
		proceed <- next
		if i == holders-1 {
			break
		}
		// The others wait on the clock for next: none starts before it.
		waitOrFail(t, f, holders-1-i)
		f.Advance(gap - time.Millisecond)
		select {
		case s := <-holding:
			t.Fatalf("holder %d started %s before the gap's end", i+1, next.Sub(s))
		default:
		}
		f.Advance(time.Millisecond)
	}
	wg.Wait()
	f.Advance(gap) // the last release's pause is over
	// A held gate: a waiter with a short context gives up.
	if err := g.acquire(ctx, "d.test", time.Time{}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := g.acquire(short, "d.test", time.Time{}); err == nil {
		t.Fatal("acquire of a held gate returned without error")
	}
	g.release("d.test", time.Time{})
	g.mu.Lock()
	refs := g.m["d.test"].refs
	g.mu.Unlock()
	if refs != 0 {
		t.Errorf("refs = %d after every holder and waiter left, want 0", refs)
	}
}

// TestSchedulerUnitHold: with politeness.key domain the scheduler hands
// the workers one element per unit at a time; the others wait, in
// dispatch order, until the unit's trip ends, and go back with the
// unstarted URLs at a phase swap.
func TestSchedulerUnitHold(t *testing.T) {
	b, err := bucket.New(bucket.Config{Columns: 199, Rows: 4, ListCap: 20, MaxQueueWait: time.Second, Phases: 1})
	if err != nil {
		t.Fatal(err)
	}
	dom, err := urlscope.NewDomains(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{bkt: b, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock.Real, hostState: hostState{unit: dom.Registered, gates: newUnitGates(clock.Real)}}
	s := newScheduler(n)
	now := time.Now()
	batch := func(host string) bucket.Batch {
		if o := b.Add(now, host, frontier.HostHash(host), bucket.Item{FP: frontier.HostHash(host), URL: "http://" + host + "/"}); o != bucket.Placed {
			t.Fatalf("add %s: %v", host, o)
		}
		bt, ok := b.DispatchHost(host, frontier.HostHash(host))
		if !ok {
			t.Fatalf("DispatchHost(%s): none", host)
		}
		return bt
	}
	state := func() string {
		var hs []string
		for _, bt := range s.pending {
			hs = append(hs, bt.Host)
		}
		var held []string
		for _, bt := range s.held["x.com"] {
			held = append(held, bt.Host)
		}
		return strings.Join(hs, " ") + " | " + strings.Join(held, " ")
	}
	for _, h := range []string{"a.x.com", "b.x.com", "c.y.com", "d.x.com", "x.com:8080"} {
		s.tripDone(h) // known hosts: no priority lane
	}
	steps := []struct {
		enqueue []string
		handOut int
		done    string // a trip of this host ends
		want    string
	}{
		{enqueue: []string{"a.x.com", "b.x.com", "c.y.com", "d.x.com"}, want: "a.x.com c.y.com | b.x.com d.x.com"},
		{handOut: 1, want: "c.y.com | b.x.com d.x.com"},
		{done: "a.x.com", want: "c.y.com b.x.com | d.x.com"},
		{enqueue: []string{"x.com:8080"}, want: "c.y.com b.x.com | d.x.com x.com:8080"},
		{handOut: 2, done: "c.y.com", want: " | d.x.com x.com:8080"},
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
		if st.done != "" {
			s.unitDone(st.done)
		}
		if got := state(); got != st.want {
			t.Fatalf("step %d: pending | held %q, want %q", i, got, st.want)
		}
	}
	if got := len(s.batchRefs(s.heldBatches())); got != 2 {
		t.Errorf("held URLs %d, want 2 (handed back at a swap)", got)
	}
	s.dropHeld(time.Now())
	if len(s.held) != 0 || s.units["x.com"] != 1 {
		t.Errorf("after the swap: held %v, units %v; want none held, x.com's trip still counted", s.held, s.units)
	}
	s.unitDone("b.x.com")
	if len(s.units) != 0 {
		t.Errorf("units %v after every trip ended, want none", s.units)
	}
}

// TestSchedulerNoUnitHoldByHost: with politeness.key host nothing is held.
func TestSchedulerNoUnitHoldByHost(t *testing.T) {
	n := &Node{clock: clock.Real}
	s := newScheduler(n)
	if s.holdForUnit(bucket.Batch{Host: "a.x.com"}) || s.holdForUnit(bucket.Batch{Host: "b.x.com"}) {
		t.Error("an element was held with politeness.key host")
	}
}
