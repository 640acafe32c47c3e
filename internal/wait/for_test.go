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
	r := &recorder{}
	defer func() {
		if p := recover(); p != nil && p != any(r) {
			panic(p)
		}
		r.mu.Lock()
		msg = r.msg
		r.mu.Unlock()
	}()
	For(r, timeout, what, cond)
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
