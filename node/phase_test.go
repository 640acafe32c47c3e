package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// handoverClock is a phase clock whose one phase never ends and whose
// previous owner's last request was at `at` (Handover).
type handoverClock struct{ at time.Time }

func (handoverClock) Active(time.Time) (int, int, bool) { return 0, 1, true }
func (handoverClock) Deadline(now time.Time) time.Time  { return now.Add(time.Hour) }
func (c handoverClock) Handover(time.Time) time.Time    { return c.at }
func (c handoverClock) Bound(parent context.Context, now time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(parent, c.Deadline(now))
}

// TestHandoverPacesFirstRequest: the first request of a host trip waits
// until the previous phase owner's last possible request plus the host's
// delay, even when the node itself never contacted the host.
func TestHandoverPacesFirstRequest(t *testing.T) {
	var mu sync.Mutex
	var first time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>no links</p>")
	}))
	defer srv.Close()
	c := testConfig(t, srv)
	c.Delay = 200 * time.Millisecond
	handover := time.Now().Add(300 * time.Millisecond)
	n, stop := startWith(t, c, Options{Cluster: Delegates(ClusterDelegates{Phases: handoverClock{at: handover}, Deadlines: handoverClock{at: handover}})})
	defer stop()
	wait.For(t, 30*time.Second, "the seed fetched", func() bool { return n.Status().PagesFetched == 1 })
	mu.Lock()
	defer mu.Unlock()
	if want := handover.Add(c.Delay); first.Before(want) {
		t.Fatalf("first request at %s, before the handover plus the delay (%s)", first.Format("15:04:05.000"), want.Format("15:04:05.000"))
	}
}

// deadlineClock is a phase clock whose one phase is open until its request
// deadline, then closed.
type deadlineClock struct{ deadline time.Time }

func (c deadlineClock) Active(now time.Time) (int, int, bool) { return 0, 1, now.Before(c.deadline) }
func (c deadlineClock) Deadline(time.Time) time.Time          { return c.deadline }
func (deadlineClock) Handover(time.Time) time.Time            { return time.Time{} }
func (c deadlineClock) Bound(parent context.Context, now time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(parent, c.Deadline(now))
}

// TestSlowHostStopsBeforeDeadline: once a host answered slowly, a request
// to it starts only if four times that time fits before the phase's request
// deadline; otherwise its URLs go back to IN_LIST untried, instead of being
// sent and cut at the swap.
func TestSlowHostStopsBeforeDeadline(t *testing.T) {
	const slow = time.Second
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		time.Sleep(slow) // every answer is slow
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/a">a</a><a href="/b">b</a>`)
	}))
	defer srv.Close()
	c := testConfig(t, srv)
	c.Fetch.HeaderTimeout = 5 * slow
	// robots.txt (slow) and / (slow) fit: / starts once robots.txt is
	// answered, at 1-2 × slow, and 4 × slow (four times the host's
	// expected answer) still fits before 6 × slow; then, at 2-3 × slow, it
	// no longer does, so /a and /b are never sent. The node's start and the
	// requests' overhead may take up to 1 × slow (a loaded machine).
	dl := time.Now().Add(6 * slow)
	n, stop := startWith(t, c, Options{Cluster: Delegates(ClusterDelegates{Phases: deadlineClock{deadline: dl}, Deadlines: deadlineClock{deadline: dl}})})
	defer stop()
	wait.For(t, 30*time.Second, "/a and /b discovered", func() bool { return n.Frontier().Counts().InList+n.Frontier().Counts().InProgress >= 2 })
	time.Sleep(time.Until(dl.Add(200 * time.Millisecond)))
	mu.Lock()
	got := fmt.Sprint(paths)
	mu.Unlock()
	if got != "[/robots.txt /]" {
		t.Fatalf("requests %s, want [/robots.txt /]: a request that could not end before the deadline was sent", got)
	}
	if s := n.Status(); s.PagesFetched != 1 {
		t.Fatalf("pages fetched %d, want 1", s.PagesFetched)
	}
}
