package node

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/clock"
)

var clockStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fakeTrip is a trip to host "h" of a node whose clock is f, with the
// default configuration and the node's back-off state.
func fakeTrip(f *clock.Fake, p tripPace) *hostTrip {
	cfg := config.Default()
	n := &Node{cfg: cfg, clock: f}
	n.backoff = newBackoffs(cfg.Fetch.BackoffMax, cfg.Fetch.ParkAfter, cfg.Fetch.ParkDuration)
	return &hostTrip{n: n, host: "h", tripPace: p}
}

// waitOrFail waits for the fake clock to have k timers armed (the code
// under test waiting on it), failing t after 10 s.
func waitOrFail(t *testing.T, f *clock.Fake, k int) {
	t.Helper()
	giveUp := make(chan struct{})
	tm := time.AfterFunc(10*time.Second, func() { close(giveUp) })
	defer tm.Stop()
	if !f.WaitTimers(k, giveUp) {
		t.Fatalf("%d timers armed after 10 s, want %d", f.Timers(), k)
	}
}

// paced runs tr.pace and checks that it returns exactly once the fake
// clock reaches want after the start (at once for 0): not one
// millisecond of fake time before.
func paced(t *testing.T, f *clock.Fake, tr *hostTrip, want time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- tr.pace(context.Background()) }()
	if want > 0 {
		waitOrFail(t, f, 1)
		f.Advance(want - time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("pace returned (%v) %s early", err, time.Millisecond)
		default:
		}
		if f.Timers() != 1 {
			t.Fatalf("%d timers armed a millisecond before the end of the pause, want pace's", f.Timers())
		}
		f.Advance(time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pace: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("pace still waiting %s after the start", want)
	}
	if f.Timers() != 0 {
		t.Errorf("%d timers left armed", f.Timers())
	}
}

// TestTripPaceClock: a trip's next request waits, on the node's clock,
// for the largest of the host's gap after its last request (the delay,
// grown by back-offs or by politeness.delay_factor) and the end of a
// back-off pause; a trip with neither starts at once.
func TestTripPaceClock(t *testing.T) {
	tests := []struct {
		name      string
		delay     time.Duration
		lastAgo   time.Duration // the last request ended this long ago (0: none)
		grown     time.Duration
		slowed    time.Duration
		notBefore time.Duration // the back-off's end, from now (0: none)
		want      time.Duration
	}{
		{"first request: at once", time.Second, 0, 0, 0, 0, 0},
		{"the rest of the delay", 200 * time.Millisecond, 50 * time.Millisecond, 0, 0, 0, 150 * time.Millisecond},
		{"delay passed already", 200 * time.Millisecond, time.Second, 0, 0, 0, 0},
		{"grown by back-offs", 200 * time.Millisecond, 100 * time.Millisecond, 2 * time.Second, 0, 0, 1900 * time.Millisecond},
		{"delay_factor", 100 * time.Millisecond, time.Millisecond, 0, 600 * time.Millisecond, 0, 599 * time.Millisecond},
		{"back-off pause longer than the delay", 200 * time.Millisecond, 100 * time.Millisecond, 0, 0, 800 * time.Millisecond, 800 * time.Millisecond},
		{"back-off pause shorter than the delay", time.Second, 100 * time.Millisecond, 0, 0, 300 * time.Millisecond, 900 * time.Millisecond},
		{"back-off pause, no request yet", time.Second, 0, 0, 0, 700 * time.Millisecond, 700 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(clockStart)
			p := tripPace{delay: tc.delay, grown: tc.grown, slowed: tc.slowed}
			if tc.lastAgo > 0 {
				p.last = f.Now().Add(-tc.lastAgo)
			}
			if tc.notBefore > 0 {
				p.notBefore = f.Now().Add(tc.notBefore)
			}
			paced(t, f, fakeTrip(f, p), tc.want)
		})
	}
}

// TestTripBackoffClock: a back-off pause the host asked for (Retry-After)
// is waited out within the trip when it is at most maxInTripWait (the next
// request comes exactly at its end on the node's clock); a longer one
// holds the trip: its pages are STALLED until the pause's end, and its
// element waits in TIMEWAIT until then (at most maxBackoffTimeWait).
func TestTripBackoffClock(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
		held       bool
		timewait   time.Duration
	}{
		{"short pause: waited out", "1", false, 0},
		{"longer pause: held", "5", true, 5 * time.Second},
		{"past maxBackoffTimeWait: TIMEWAIT bounded", "120", true, maxBackoffTimeWait},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clock.NewFake(clockStart)
			tr := fakeTrip(f, tripPace{delay: 10 * time.Millisecond})
			tr.n.backoff.answered("h", http.StatusTooManyRequests, http.Header{"Retry-After": {tc.retryAfter}}, tr.delay, f.Now())
			if got := tr.onHold(); got != tc.held {
				t.Fatalf("onHold = %v, want %v", got, tc.held)
			}
			if !tc.held {
				pause, _ := time.ParseDuration(tc.retryAfter + "s")
				paced(t, f, tr, pause)
				return
			}
			until := tr.held.until
			var res frontier.Result
			var entry archive.LogEntry
			tr.stallHeld(&res, &entry)
			if res.State != frontier.Stalled || !res.RetryAt.Equal(until) || !res.Free {
				t.Errorf("held page: %+v, want STALLED for free until %s", res, until)
			}
			if got := tr.finished(bucket.ElementID{}).wait; got != tc.timewait {
				t.Errorf("TIMEWAIT %s, want %s", got, tc.timewait)
			}
		})
	}
}

// TestStallRetryAtClock: a failed fetch's URL is due for its next try
// fetch.retry_backoff × 2^tries after now on the node's clock.
func TestStallRetryAtClock(t *testing.T) {
	tests := []struct {
		tries int
		want  time.Duration
	}{
		{0, 30 * time.Second},
		{1, time.Minute},
		{3, 4 * time.Minute},
	}
	for _, tc := range tests {
		f := clock.NewFake(clockStart)
		tr := fakeTrip(f, tripPace{})
		tr.n.cfg.Fetch.RetryBackoff = 30 * time.Second
		var res frontier.Result
		var entry archive.LogEntry
		tr.stall(&res, &entry, bucket.Item{Tries: tc.tries}, "http_5xx", "HTTP 500")
		if res.State != frontier.Stalled || !res.RetryAt.Equal(clockStart.Add(tc.want)) {
			t.Errorf("tries %d: %s retry at %s, want %s after the start", tc.tries, res.State, res.RetryAt.Sub(clockStart), tc.want)
		}
	}
}

// runClock moves f a millisecond forward every millisecond until the
// returned stop is called (or the test ends): a node on f runs as on the
// real clock until the test stops its time to move it by hand.
func runClock(t *testing.T, f *clock.Fake) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				f.Advance(time.Millisecond)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-stopped }) }
	t.Cleanup(stop)
	return stop
}
