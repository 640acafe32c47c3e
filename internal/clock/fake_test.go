package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// received returns the value waiting on c, if any, without blocking.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

// TestFakeTimer: a timer fires inside the Advance that reaches its due
// time, with that time, and not before; Stop and Reset behave as time's.
func TestFakeTimer(t *testing.T) {
	tests := []struct {
		name    string
		d       time.Duration
		steps   []time.Duration // advances
		fired   []bool          // after each step
		stopped bool            // stopped before the steps
	}{
		{"fires at its due time", 100 * time.Millisecond, []time.Duration{99 * time.Millisecond, time.Millisecond}, []bool{false, true}, false},
		{"fires once past it", time.Second, []time.Duration{5 * time.Second, time.Second}, []bool{true, false}, false},
		{"zero: at once", 0, []time.Duration{0}, []bool{true}, false},
		{"stopped: never", time.Second, []time.Duration{time.Hour}, []bool{false}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake(t0)
			tm := f.NewTimer(tc.d)
			if tc.stopped && !tm.Stop() {
				t.Fatal("Stop of an armed timer reported false")
			}
			for i, s := range tc.steps {
				f.Advance(s)
				v, ok := received(tm.C())
				if ok != tc.fired[i] {
					t.Fatalf("step %d (+%s): fired %v, want %v", i, s, ok, tc.fired[i])
				}
				if ok && !v.Equal(t0.Add(tc.d)) {
					t.Errorf("fired with %s, want %s", v, t0.Add(tc.d))
				}
			}
			if f.Timers() != 0 {
				t.Errorf("%d timers armed at the end, want 0", f.Timers())
			}
		})
	}
}

// TestFakeOrder: one Advance fires every due timer in due order, the
// clock reading each one's due time as it fires, and a ticker once per
// period (a tick not taken drops the next).
func TestFakeOrder(t *testing.T) {
	f := NewFake(t0)
	a, b := f.NewTimer(3*time.Second), f.NewTimer(time.Second)
	tk := f.NewTicker(time.Second)
	defer tk.Stop()
	if at, ok := f.Next(); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("Next = %s %v, want %s", at, ok, t0.Add(time.Second))
	}
	f.Advance(10 * time.Second)
	va, _ := received(a.C())
	vb, _ := received(b.C())
	if !vb.Before(va) || !va.Equal(t0.Add(3*time.Second)) {
		t.Errorf("b at %s, a at %s: want 1 s and 3 s", vb.Sub(t0), va.Sub(t0))
	}
	if v, ok := received(tk.C()); !ok || !v.Equal(t0.Add(time.Second)) {
		t.Errorf("first tick %s %v, want the one at 1 s (the others dropped)", v.Sub(t0), ok)
	}
	f.Advance(time.Second)
	if v, ok := received(tk.C()); !ok || !v.Equal(t0.Add(11*time.Second)) {
		t.Errorf("tick %s %v, want 11 s", v.Sub(t0), ok)
	}
	if got := f.Now(); !got.Equal(t0.Add(11 * time.Second)) {
		t.Errorf("Now = %s, want 11 s", got.Sub(t0))
	}
}

// TestFakeSleep: Sleep on a Fake returns once the clock is advanced past
// its end (WaitTimers tells when it waits), or with the context's error.
func TestFakeSleep(t *testing.T) {
	f := NewFake(t0)
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Minute) }()
	if !f.WaitTimers(1, nil) {
		t.Fatal("WaitTimers gave up")
	}
	f.Advance(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v a second early", err)
	default:
	}
	f.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, f, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a cancelled context: %v", err)
	}
	if f.Timers() != 0 {
		t.Errorf("%d timers left armed", f.Timers())
	}
}

// TestFakeUnread: a fired value counts as unread until its owner takes
// it; a stopped timer's value is dropped.
func TestFakeUnread(t *testing.T) {
	f := NewFake(t0)
	tk := f.NewTicker(time.Second)
	tm := f.NewTimer(time.Second)
	if k := f.Unread(); k != 0 {
		t.Fatalf("Unread = %d before any fire, want 0", k)
	}
	f.Advance(time.Second)
	if k := f.Unread(); k != 2 {
		t.Fatalf("Unread = %d after two fired, want 2", k)
	}
	<-tk.C()
	if k := f.Unread(); k != 1 {
		t.Fatalf("Unread = %d after the tick was taken, want 1", k)
	}
	tm.Stop()
	tk.Stop()
	if k := f.Unread(); k != 0 {
		t.Fatalf("Unread = %d after Stop, want 0", k)
	}
}

// TestFakeAfterFunc: a function is called inside the Advance that reaches
// its due time, with the clock reading that time, in due order with the
// timers; a stopped one never is, and a zero delay calls it at once.
func TestFakeAfterFunc(t *testing.T) {
	f := NewFake(t0)
	var calls []time.Duration
	record := func() { calls = append(calls, f.Now().Sub(t0)) }
	f.AfterFunc(2*time.Second, record)
	stopped := f.AfterFunc(time.Second, record)
	tm := f.NewTimer(1500 * time.Millisecond)
	if stopped.C() != nil {
		t.Fatal("an AfterFunc timer has a channel")
	}
	if !stopped.Stop() {
		t.Fatal("Stop of an armed AfterFunc timer reported false")
	}
	f.Advance(1999 * time.Millisecond)
	if len(calls) != 0 {
		t.Fatalf("called at %v, before its due time", calls)
	}
	if _, ok := received(tm.C()); !ok {
		t.Fatal("the timer between did not fire")
	}
	f.Advance(time.Hour)
	if len(calls) != 1 || calls[0] != 2*time.Second {
		t.Fatalf("calls at %v, want one at 2s", calls)
	}
	f.AfterFunc(0, record)
	if len(calls) != 2 || calls[1] != time.Hour+1999*time.Millisecond {
		t.Fatalf("calls at %v, want the zero delay's at once", calls)
	}
	if f.Timers() != 0 || f.Unread() != 0 {
		t.Errorf("%d timers armed, %d unread at the end, want 0", f.Timers(), f.Unread())
	}
}
