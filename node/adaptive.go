package node

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/robots"
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
//
// First contacts (fetch.adaptive_connect, on by default): a connect to a
// host that has not answered this node yet is bounded by
// fetch.adaptive_factor times the longest of the node's last timesWindow
// connect times, at least fetch.adaptive_floor (factor × floor until the
// node has seen minNodeTimes connects). A host that accepts nothing then
// holds a live worker that long, not a full connect timeout; the cut sends
// it to the dead-link lane, which tries it with the full timeouts, as
// above. Only the connect is shortened: a host that connects has its full
// header timeout.

const (
	timesWindow = 32
	// minNodeTimes is how many answers the node needs before it derives a
	// timeout for a host not answered yet (before that: the full ones).
	minNodeTimes = 8
	// maxTimesHosts bounds the hosts remembered; past it the table is cleared.
	maxTimesHosts = 1 << 16
)

// answeredBits is the size of hostTimes.answered in bits (128 KiB).
const answeredBits = 1 << 20

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
	// conns is the node's last connect times (new connections only).
	conns timesRing
	// answered has a bit set for each host (by hash) that answered this
	// node; a collision makes a new host look answered: its first contact
	// then has the full connect timeout, as without the rule. Fixed size.
	answered []atomic.Uint64
}

func newHostTimes() *hostTimes {
	return &hostTimes{m: make(map[string]*timesRing), full: make(map[string]struct{}), answered: make([]atomic.Uint64, answeredBits/64)}
}

// answeredBit is host's word in hostTimes.answered and its bit in that word.
func answeredBit(host string) (word int, bit uint64) {
	b := frontier.HostHash(host) % answeredBits
	return int(b / 64), 1 << (b % 64)
}

// answer records that host answered a request (any HTTP status) and, when
// the request opened a new connection, how long that took.
func (h *hostTimes) answer(host string, connect time.Duration) {
	w, bit := answeredBit(host)
	if h.answered[w].Load()&bit == 0 {
		h.answered[w].Or(bit)
	}
	if connect > 0 {
		h.mu.Lock()
		h.conns.add(connect)
		h.mu.Unlock()
	}
}

// hasAnswered reports whether host answered this node (or collides with one that did).
func (h *hostTimes) hasAnswered(host string) bool {
	w, bit := answeredBit(host)
	return h.answered[w].Load()&bit != 0
}

// firstConnect is the connect timeout of a first contact with host, false
// when host has answered before: factor × the longest of the node's last
// connect times, at least floor; factor × floor while the node has seen
// fewer than minNodeTimes connects.
func (h *hostTimes) firstConnect(host string, factor int, floor time.Duration) (time.Duration, bool) {
	if h.hasAnswered(host) {
		return 0, false
	}
	h.mu.Lock()
	base := h.conns.longest()
	if h.conns.n < minNodeTimes {
		base = max(base, floor)
	}
	h.mu.Unlock()
	return max(base*time.Duration(factor), floor), true
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

// timeouts returns the trip's timeouts for its next request (zero: the
// configured one), and whether one is shorter than the configured ones (a
// cut is then the derived timeout's, not the server's verdict: cutBy).
func (t *hostTrip) timeouts() (fetch.Timeouts, bool) {
	n := t.n
	f := n.cfg.Fetch
	if t.inactive {
		return fetch.Timeouts{}, false
	}
	var to fetch.Timeouts
	if f.AdaptiveTimeouts {
		if base, ok := n.times.base(t.host); ok {
			to = adaptiveTimeouts(base, f.AdaptiveFactor, f.AdaptiveFloor, f.ConnectTimeout, f.HeaderTimeout)
		}
	}
	// A first contact's connect (needs the lane: the cut is retried there).
	if f.AdaptiveConnect && n.deadJobs != nil {
		if c, ok := n.times.firstConnect(t.host, f.AdaptiveFactor, f.AdaptiveFloor); ok && c < f.ConnectTimeout && (to.Connect == 0 || c < to.Connect) {
			to.Connect = c
		}
	}
	return to, to.Connect > 0 && to.Connect < f.ConnectTimeout || to.Header > 0 && to.Header < f.HeaderTimeout
}

// cutBy reports whether err is the cut of a derived timeout of to: a
// timeout while connecting with a shortened connect timeout, or while
// waiting for the headers with a shortened header timeout (a body timeout
// is never one).
func (t *hostTrip) cutBy(to fetch.Timeouts, err error) bool {
	if fetch.ErrorKind(err) != "timeout" || errors.Is(err, fetch.ErrBodyTimeout) {
		return false
	}
	f := t.n.cfg.Fetch
	if fetch.InConnect(err) {
		return to.Connect > 0 && to.Connect < f.ConnectTimeout
	}
	return to.Header > 0 && to.Header < f.HeaderTimeout
}

// errAdaptiveCut: a robots.txt request was cut by the host's adaptive
// timeout. It wraps robots.ErrAborted, so the robots cache keeps nothing
// (the cut is not the server's verdict) and the URL is requeued.
var errAdaptiveCut = fmt.Errorf("node: cut by the host's adaptive timeout: %w", robots.ErrAborted)

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
