package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch"
)

// Adaptive timeouts (fetch.adaptive_timeouts, seed 003's future work): a
// live worker's connect and header timeouts for a host are
// fetch.adaptive_factor times the longest of the host's last timesWindow
// response times (the node's last timesWindow answers for a host not
// answered yet), at least fetch.adaptive_floor, at most the configured
// timeouts. A dead host then costs a live worker that much instead of a
// full timeout. What a cut means depends on the host's past: a host that
// never answered goes to the dead-link lane, which tries it again with the
// full timeouts; a host that has answered before is tried again by the
// live workers with the full timeouts (a slow moment of a live host does
// not send it behind the dead ones). Either way no try is used up, and
// from its next answer on the host's own times make its timeout.

const (
	timesWindow = 32
	// minNodeTimes is how many answers the node needs before it derives a
	// timeout for a host not answered yet (before that: the full ones).
	minNodeTimes = 8
	// maxTimesHosts bounds the hosts remembered; past it the table is cleared.
	maxTimesHosts = 1 << 16
)

type timesRing struct {
	d [timesWindow]time.Duration
	n int // answers recorded (the ring holds the last timesWindow)
}

func (r *timesRing) add(d time.Duration) {
	r.d[r.n%timesWindow] = d
	r.n++
}

func (r *timesRing) longest() time.Duration {
	var m time.Duration
	for _, d := range r.d[:min(r.n, timesWindow)] {
		m = max(m, d)
	}
	return m
}

// hostTimes is the node's record of response times, per host and overall.
type hostTimes struct {
	mu  sync.Mutex
	m   map[string]*timesRing
	all timesRing
	// full holds the hosts that answered before and were cut by an
	// adaptive timeout since: their next request has the full timeouts.
	full map[string]struct{}
}

func newHostTimes() *hostTimes {
	return &hostTimes{m: make(map[string]*timesRing), full: make(map[string]struct{})}
}

// cut records an adaptive timeout's cut of host and reports whether the
// host has answered before (it is then given the full timeouts next).
func (h *hostTimes) cut(host string) (answeredBefore bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.m[host]; r == nil || r.n == 0 {
		return false
	}
	if len(h.full) >= maxTimesHosts {
		clear(h.full)
	}
	h.full[host] = struct{}{}
	return true
}

// observe records one response time of host.
func (h *hostTimes) observe(host string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.m[host]
	if r == nil {
		if len(h.m) >= maxTimesHosts {
			clear(h.m)
		}
		r = &timesRing{}
		h.m[host] = r
	}
	r.add(d)
	h.all.add(d)
	delete(h.full, host)
}

// base is the response time a host's timeouts derive from, false when the
// node knows too little yet.
func (h *hostTimes) base(host string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.full[host]; ok {
		return 0, false
	}
	if r := h.m[host]; r != nil && r.n > 0 {
		return r.longest(), true
	}
	if h.all.n >= minNodeTimes {
		return h.all.longest(), true
	}
	return 0, false
}

// adaptiveTimeouts is the pure rule: factor × base, at least floor, at most
// the configured maximums.
func adaptiveTimeouts(base time.Duration, factor int, floor, maxConnect, maxHeader time.Duration) fetch.Timeouts {
	d := max(base*time.Duration(factor), floor)
	return fetch.Timeouts{Connect: min(d, maxConnect), Header: min(d, maxHeader)}
}

// timeouts returns the trip's timeouts for its next request, and whether
// they are shorter than the configured ones (a cut is then the adaptive
// timeout's, not the server's verdict).
func (t *hostTrip) timeouts() (fetch.Timeouts, bool) {
	n := t.n
	f := n.cfg.Fetch
	if !f.AdaptiveTimeouts || t.inactive {
		return fetch.Timeouts{}, false
	}
	base, ok := n.times.base(t.host)
	if !ok {
		return fetch.Timeouts{}, false
	}
	to := adaptiveTimeouts(base, f.AdaptiveFactor, f.AdaptiveFloor, f.ConnectTimeout, f.HeaderTimeout)
	return to, to.Connect < f.ConnectTimeout || to.Header < f.HeaderTimeout
}

// errAdaptiveCut: a robots.txt request was cut by the host's adaptive
// timeout. It wraps fetch.ErrAborted, so the robots cache keeps nothing
// (the cut is not the server's verdict) and the URL is requeued.
var errAdaptiveCut = fmt.Errorf("node: cut by the host's adaptive timeout: %w", fetch.ErrAborted)

// adaptiveCut accounts for a request cut by the host's adaptive timeout: a
// host that never answered goes to the dead-link lane, one that did gets
// the full timeouts next; the rest of the trip's list goes back to the
// queue untried.
func (t *hostTrip) adaptiveCut() {
	t.n.m.AdaptiveCuts.Inc()
	if !t.n.times.cut(t.host) {
		t.failedWith("timeout")
	}
	t.downFree = true
}
