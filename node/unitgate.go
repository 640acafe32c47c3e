package node

import (
	"context"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/clock"
)

// unitGates keep, with politeness.key domain, one request at a time per
// politeness unit (a registered domain) on this node, and a unit's delay
// between the end of one request and the start of the next, whichever of
// its hosts' trips sends them. The bucket and the trips stay per host
// (robots.txt, connections, back-offs); the phases are per unit
// (frontier.Unit), so no other member fetches the unit meanwhile.
type unitGates struct {
	clock clock.Clock
	mu    sync.Mutex
	m     map[string]*unitGate
}

type unitGate struct {
	busy bool
	next time.Time     // the earliest start of the unit's next request
	wake chan struct{} // closed when the gate is released
	refs int           // trips holding or waiting for the gate
}

// maxIdleGates: past this many gates, release drops the idle ones whose
// pause is over (they hold nothing a later request needs).
const maxIdleGates = 4096

func newUnitGates(c clock.Clock) *unitGates {
	return &unitGates{clock: clock.Or(c), m: map[string]*unitGate{}}
}

// acquire waits until unit has no request in flight on this node and
// notBefore and the unit's pause have passed, then takes it. It returns
// ctx's error when ctx ends first (the gate is not taken).
func (g *unitGates) acquire(ctx context.Context, unit string, notBefore time.Time) error {
	g.mu.Lock()
	u := g.m[unit]
	if u == nil {
		u = &unitGate{wake: make(chan struct{})}
		g.m[unit] = u
	}
	u.refs++
	for {
		if !u.busy {
			at := notBefore
			if u.next.After(at) {
				at = u.next
			}
			d := g.clock.Until(at)
			if d <= 0 {
				u.busy = true
				g.mu.Unlock()
				return nil
			}
			wake := u.wake
			g.mu.Unlock()
			t := g.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				g.done(unit, u)
				return ctx.Err()
			case <-t.C():
			case <-wake:
				t.Stop()
			}
			g.mu.Lock()
			continue
		}
		wake := u.wake
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			g.done(unit, u)
			return ctx.Err()
		case <-wake:
		}
		g.mu.Lock()
	}
}

// done drops a waiter that gave up.
func (g *unitGates) done(unit string, u *unitGate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u.refs--
	g.prune(unit, u)
}

// release gives the gate back after a request: the unit's next request
// starts no earlier than next (the end of this one plus the unit's gap;
// the zero time when no request was sent).
func (g *unitGates) release(unit string, next time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.m[unit]
	if u == nil || !u.busy {
		return
	}
	u.busy = false
	if next.After(u.next) {
		u.next = next
	}
	u.refs--
	close(u.wake)
	u.wake = make(chan struct{})
	g.prune(unit, u)
}

// prune forgets u when it is idle and its pause is over, once there are
// many gates.
func (g *unitGates) prune(unit string, u *unitGate) {
	if u.refs > 0 || u.busy || len(g.m) < maxIdleGates {
		return
	}
	now := g.clock.Now()
	for k, v := range g.m {
		if v.refs == 0 && !v.busy && !v.next.After(now) {
			delete(g.m, k)
		}
	}
}
