package clock

import (
	"sync"
	"time"
)

// Fake is a Clock that moves only when Advance or Set moves it. Its
// timers and tickers fire inside that call, in the order of their due
// times, each value sent (or AfterFunc's function called, in the caller's
// goroutine) before the call returns (the channels have room
// for one, as time's do; a ticker whose last tick was not taken drops the
// next, as time's does). A Fake is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers map[*fakeTimer]struct{}
	fired  map[*fakeTimer]struct{} // fired since Unread last saw their value taken
	// added is closed and renewed whenever a timer or ticker is armed
	// (WaitTimers).
	added chan struct{}
}

// NewFake returns a Fake that reads start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, timers: map[*fakeTimer]struct{}{}, fired: map[*fakeTimer]struct{}{}, added: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since is Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// Until is t.Sub(Now()).
func (f *Fake) Until(t time.Time) time.Duration { return t.Sub(f.Now()) }

// NewTimer returns a timer that fires once the fake time reaches now+d
// (at once, in this call, when d <= 0).
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// NewTicker returns a ticker that fires every d of fake time.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1), period: d}
	t.Reset(d)
	return fakeTicker{t}
}

// After is NewTimer(d).C().
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.NewTimer(d).C() }

// AfterFunc returns a timer that calls fn once the fake time reaches
// now+d, in the goroutine that moves the clock there (at once, in this
// call, when d <= 0). Its C is nil.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{f: f, fn: fn}
	t.Reset(d)
	return t
}

// Advance moves the fake time d forward and fires every timer and tick
// due by then, earliest first, each at its own due time.
func (f *Fake) Advance(d time.Duration) {
	f.Set(f.Now().Add(d))
}

// Set moves the fake time to at (never back) and fires what is due, as
// Advance does.
func (f *Fake) Set(at time.Time) {
	for {
		f.mu.Lock()
		var next *fakeTimer
		for t := range f.timers {
			if t.when.After(at) {
				continue
			}
			if next == nil || t.when.Before(next.when) || t.when.Equal(next.when) && t.seq < next.seq {
				next = t
			}
		}
		if next == nil {
			if at.After(f.now) {
				f.now = at
			}
			f.mu.Unlock()
			return
		}
		if next.when.After(f.now) {
			f.now = next.when
		}
		fn := f.fireLocked(next)
		f.mu.Unlock()
		if fn != nil {
			fn()
		}
	}
}

// Timers returns how many timers and tickers are armed.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Next returns the earliest due time of the armed timers and tickers
// (ok false: none is armed).
func (f *Fake) Next() (at time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t := range f.timers {
		if !ok || t.when.Before(at) {
			at, ok = t.when, true
		}
	}
	return at, ok
}

// Unread returns how many fired timers and tickers hold a value their
// owner has not received yet: once it is 0, every goroutine a fire woke
// has taken its value (a loop that takes a tick, works, then waits for
// the next has finished the work of a tick once the next is taken).
func (f *Fake) Unread() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t := range f.fired {
		if len(t.ch) == 0 {
			delete(f.fired, t)
		}
	}
	return len(f.fired)
}

// WaitTimers returns once at least k timers and tickers are armed, or
// when done is closed (false then): a test waits so for the code it
// drives to be waiting on the clock before it advances it.
func (f *Fake) WaitTimers(k int, done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		n, added := len(f.timers), f.added
		f.mu.Unlock()
		if n >= k {
			return true
		}
		select {
		case <-added:
		case <-done:
			return false
		}
	}
}

// fireLocked sends t's value and disarms it, or re-arms a ticker; for
// an AfterFunc timer it disarms it and returns the function to call once
// f.mu is released.
func (f *Fake) fireLocked(t *fakeTimer) func() {
	if t.fn != nil {
		delete(f.timers, t)
		return t.fn
	}
	select {
	case t.ch <- t.when:
	default: // a tick not taken yet: this one is dropped
	}
	f.fired[t] = struct{}{}
	if t.period > 0 {
		t.when = t.when.Add(t.period)
		return nil
	}
	delete(f.timers, t)
	return nil
}

// armLocked puts t among the armed timers, due at when.
func (f *Fake) armLocked(t *fakeTimer, when time.Time) {
	f.seq++
	t.when, t.seq = when, f.seq
	f.timers[t] = struct{}{}
	close(f.added)
	f.added = make(chan struct{})
}

type fakeTimer struct {
	f      *Fake
	ch     chan time.Time
	when   time.Time
	seq    int
	period time.Duration // a ticker's
	fn     func()        // an AfterFunc timer's (ch is nil then)
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer; it reports whether it was armed. As with
// time's timers (Go 1.23 on), no stale value is received after Stop.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, armed := t.f.timers[t]
	delete(t.f.timers, t)
	t.drainLocked()
	return armed
}

// Reset re-arms the timer d from now; it reports whether it was armed.
// A d <= 0 fires it at once.
func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	_, armed := t.f.timers[t]
	t.drainLocked()
	t.f.armLocked(t, t.f.now.Add(d))
	var fn func()
	if d <= 0 && t.period == 0 {
		fn = t.f.fireLocked(t)
	}
	t.f.mu.Unlock()
	if fn != nil {
		fn()
	}
	return armed
}

// fakeTicker is a fakeTimer with a period, stopped without a report.
type fakeTicker struct{ *fakeTimer }

func (t fakeTicker) Stop() { t.fakeTimer.Stop() }

func (t *fakeTimer) drainLocked() {
	select {
	case <-t.ch:
	default:
	}
}
