// Package wait is the tests' wait for a state: For polls a condition until
// it holds or a timeout passes. It imports no phasecrawl package, so the
// tests inside every package can use it, as the tests under test/ and
// deploy/ do.
package wait

import (
	"testing"
	"time"
)

// Cond is what For polls: whether the awaited state holds, or that
// and a description of the state seen, which a failed wait reports.
type Cond interface {
	func() bool | func() (bool, string)
}

// For calls cond until it reports true, every thousandth of timeout
// (1 ms to 100 ms); when timeout passes first, it fails t, naming what it
// waited for and, for a cond that describes it, the state it saw last.
func For[C Cond](t testing.TB, timeout time.Duration, what string, cond C) {
	t.Helper()
	every := min(max(timeout/1000, time.Millisecond), 100*time.Millisecond)
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		var state string
		switch c := any(cond).(type) {
		case func() bool:
			ok = c()
		case func() (bool, string):
			ok, state = c()
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if state != "" {
				t.Fatalf("not within %s: %s; last state: %s", timeout, what, state)
			}
			t.Fatalf("not within %s: %s", timeout, what)
		}
		time.Sleep(every)
	}
}
