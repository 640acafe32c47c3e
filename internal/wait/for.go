// Package wait is the tests' wait for a state: For polls a condition until
// it holds or a timeout passes, Steady until it has held for a while. It
// imports no phasecrawl package, so the tests inside every package can use
// it, as the tests under test/ and deploy/ do.
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
		ok, state := check(cond)
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

// check calls cond: whether it holds and, for a condition that describes
// it, the state seen.
func check[C Cond](cond C) (ok bool, state string) {
	switch c := any(cond).(type) {
	case func() bool:
		ok = c()
	case func() (bool, string):
		ok, state = c()
	}
	return ok, state
}

// Steady is For of a state that must last: it returns once cond has held
// at every poll for at least hold (a crawl done, and still done a moment
// later, with nothing that arrived in between to undo it). A poll that
// sees cond false starts the span again.
func Steady[C Cond](t testing.TB, timeout, hold time.Duration, what string, cond C) {
	t.Helper()
	var since time.Time
	For(t, timeout, what+" (for "+hold.String()+")", func() (bool, string) {
		ok, state := check(cond)
		switch {
		case !ok:
			since = time.Time{}
			return false, state
		case since.IsZero():
			since = time.Now()
		}
		return time.Since(since) >= hold, state
	})
}
