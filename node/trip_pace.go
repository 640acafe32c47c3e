package node

import (
	"context"
	"fmt"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/robots"
)

// tripPace is the pacing of a trip's requests to its host: the delay
// between two (its Crawl-delay, its back-offs and its response times
// grow it), when the last one ended, and the unit's gate it holds.
type tripPace struct {
	delay     time.Duration // max(delay, Crawl-delay)
	last      time.Time     // end of the previous request to this host
	notBefore time.Time     // the end of the host's back-off pause (backoff.go), when it is short enough to wait for
	grown     time.Duration // the host's delay grown by its back-offs (0: none)
	slowed    time.Duration // politeness.delay_factor times the last response time (capped)
	pd        PhaseDeadline // nil without phases that end
	expect    time.Duration // the host's expected response time (latencies)
	requests  int           // requests sent (robots.txt included)
	busy      time.Duration // their response times, summed
	unitKey   string        // the host's politeness unit with politeness.key domain
	gated     bool          // the trip holds its unit's gate (Node.gates) for a request
}

// afterRestart paces the trip after the last request an earlier process of
// this node sent to the host (frontier.HostStats: when, and the host's
// delay then, Crawl-delay included), so a restart does not shorten the
// host's pause. Only needed while the longest delay since the start has not
// passed; later every such request is long enough ago.
func (t *hostTrip) afterRestart() {
	n := t.n
	longest := max(n.cfg.Delay, n.cfg.Robots.MaxCrawlDelay)
	if n.clock.Since(n.started) > longest {
		return
	}
	hs, ok, err := n.front.Host(t.host)
	if err != nil || !ok || !hs.LastFetch.Before(n.started) {
		return
	}
	if hs.LastFetch.After(t.last) {
		t.last = hs.LastFetch
	}
	t.delay = max(t.delay, min(hs.Delay, longest))
}

// errPhaseClosed: the host's phase ended (or entered its guard) before a
// request could be sent; the URL goes back to IN_LIST untried.
var errPhaseClosed = fmt.Errorf("node: the host's phase is closing: %w", robots.ErrAborted)

// phaseOpen reports whether this host's phase is still the node's active
// one and, when phases end, whether a request started now is expected to be
// answered before the phase's request deadline: four times the host's
// remembered response time (at most a quarter of the phase) must fit, so
// that an answer up to four times slower than the host's recent ones is
// not cut at the swap, whatever the guard; a host known
// to be slow stops early instead of being cut at the swap (its URL would be
// fetched twice).
func (t *hostTrip) phaseOpen() bool {
	now := t.n.clock.Now()
	phase, nphase, open := t.n.phases.Active(now)
	if !open || frontier.PhaseOf(t.hostHash, nphase) != phase {
		return false
	}
	if t.pd == nil || t.expect == 0 {
		return true
	}
	// Capped at a quarter of the phase: a host slower than that is still
	// tried early in each phase (and may be cut), never starved.
	need := min(4*t.expect, t.n.cfg.Cluster.PhaseDuration/4)
	return now.Add(need).Before(t.pd.Deadline(now))
}

// observe remembers how long the host took to answer.
func (t *hostTrip) observe(d time.Duration) {
	if t.pd == nil {
		return
	}
	t.expect = max(d, t.expect)
	t.n.lat.observe(t.host, d)
}

// pace waits until the host's delay has passed since the previous request.
func (t *hostTrip) pace(ctx context.Context) error {
	if t.last.IsZero() && t.notBefore.IsZero() {
		return t.waitUntil(ctx, time.Time{})
	}
	at := t.notBefore // the larger of the back-off's end and the delay (Crawl-delay included) wins
	if !t.last.IsZero() && t.last.Add(t.gap()).After(at) {
		at = t.last.Add(t.gap())
	}
	return t.waitUntil(ctx, at)
}

// waitUntil waits until at; with politeness.key domain it then takes the
// unit's gate too (ungate gives it back), which may wait longer.
func (t *hostTrip) waitUntil(ctx context.Context, at time.Time) error {
	if g := t.n.gates; g != nil {
		if t.unitKey == "" {
			t.unitKey = t.n.unit(t.host)
		}
		if err := g.acquire(ctx, t.unitKey, at); err != nil {
			return err
		}
		t.gated = true
		return nil
	}
	d := t.n.clock.Until(at)
	if d <= 0 {
		return nil
	}
	timer := t.n.clock.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C():
		return nil
	}
}

// ungate gives the unit's gate back (politeness.key domain) once the
// trip's request has ended (or was not sent): the unit's next request,
// from any of its hosts, starts a gap after this one's end.
func (t *hostTrip) ungate() {
	if !t.gated {
		return
	}
	t.gated = false
	var next time.Time
	if !t.last.IsZero() {
		next = t.last.Add(t.gap())
	}
	t.n.gates.release(t.unitKey, next)
}

// responded records a request's response time d: with
// politeness.delay_factor the next request waits at least factor × d.
func (t *hostTrip) responded(d time.Duration) {
	t.requests, t.busy = t.requests+1, t.busy+d
	if f := t.n.cfg.Politeness.DelayFactor; f > 0 {
		t.slowed = min(time.Duration(f*float64(d)), max(t.n.cfg.Delay, t.n.cfg.Robots.MaxCrawlDelay))
	}
}
