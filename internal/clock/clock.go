// Package clock is the time a node's scheduler and workers read: the real
// clock (Real) in production, a Fake that a test advances by hand. It
// imports no phasecrawl package.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers and tickers on it.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	Until(t time.Time) time.Duration
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
	// After is NewTimer(d).C(), for a timer that is never stopped.
	After(d time.Duration) <-chan time.Time
	// AfterFunc calls f once d has passed on the clock, as time.AfterFunc
	// does; the Timer's C is nil, its Stop cancels the call.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a time.Timer on a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker on a Clock.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system clock (package time).
var Real Clock = realClock{}

// Or is c, or Real when c is nil: a nil Clock in an option means the
// real one.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Sleep waits d on c, or until ctx is done (its error then).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) Since(t time.Time) time.Duration        { return time.Since(t) }
func (realClock) Until(t time.Time) time.Duration        { return time.Until(t) }
func (realClock) NewTimer(d time.Duration) Timer         { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker       { return realTicker{time.NewTicker(d)} }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }
