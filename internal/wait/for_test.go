package wait

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as the real one does.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	panic(r)
}

// try runs For on a recorder and returns what it failed with ("" when
// it returned).
func try[C Cond](timeout time.Duration, what string, cond C) (msg string) {
	return record(func(r *recorder) { For(r, timeout, what, cond) })
}

// record runs wait on a recorder and returns what it failed with ("" when
// it returned).
func record(wait func(*recorder)) (msg string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil && p != any(r) {
			panic(p)
		}
		r.mu.Lock()
		msg = r.msg
		r.mu.Unlock()
	}()
	wait(r)
	return ""
}

func TestFor(t *testing.T) {
	calls := 0
	if msg := try(time.Minute, "third call", func() bool { calls++; return calls == 3 }); msg != "" || calls != 3 {
		t.Errorf("a condition that holds at the third call: %q after %d calls", msg, calls)
	}
	msg := try(20*time.Millisecond, "never", func() bool { return false })
	if msg != "not within 20ms: never" {
		t.Errorf("a condition that never holds: %q", msg)
	}
	n := 0
	msg = try(20*time.Millisecond, "the cluster", func() (bool, string) { n++; return false, fmt.Sprintf("look %d", n) })
	if !strings.HasPrefix(msg, "not within 20ms: the cluster; last state: look ") || !strings.HasSuffix(msg, fmt.Sprintf("look %d", n)) || n < 2 {
		t.Errorf("a described condition that never holds: %q after %d looks", msg, n)
	}
	if msg := try(time.Minute, "described", func() (bool, string) { return true, "done" }); msg != "" {
		t.Errorf("a described condition that holds: %q", msg)
	}
}

// TestSteady: Steady returns only once the condition held at every poll
// for the span, a false poll starting the span again; a condition that
// holds now and then, never for the span, fails it.
func TestSteady(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cond  func(call int) bool // call counts from 1
		fails bool
	}{
		{"always", func(int) bool { return true }, false},
		{"from the fifth call", func(call int) bool { return call >= 5 }, false},
		{"one call in two", func(call int) bool { return call%2 == 0 }, true},
		{"never", func(int) bool { return false }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const hold = 30 * time.Millisecond
			var calls int
			var trueFrom, end time.Time // the start of the last run of true polls
			timeout := 300 * time.Millisecond
			msg := record(func(r *recorder) {
				Steady(r, timeout, hold, "steady", func() bool {
					calls++
					ok := tc.cond(calls)
					switch {
					case !ok:
						trueFrom = time.Time{}
					case trueFrom.IsZero():
						trueFrom = time.Now()
					}
					return ok
				})
				end = time.Now()
			})
			if tc.fails {
				if msg != "not within 300ms: steady (for 30ms)" {
					t.Errorf("failed with %q, want the timeout", msg)
				}
				return
			}
			if msg != "" {
				t.Fatalf("failed: %q", msg)
			}
			if trueFrom.IsZero() || end.Sub(trueFrom) < hold {
				t.Errorf("returned after %d calls, the condition true since %v only", calls, end.Sub(trueFrom))
			}
		})
	}
}
