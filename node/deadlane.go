package node

import (
	"sync"
)

// The dead-link lane (seed 003, Kim, Kim & Chin): a host whose last attempt
// timed out, was refused or failed DNS is inactive; its elements are
// handed to the lane's own workers (fetch.inactive_workers) instead of the
// live ones, so a dead server holds up one of those, never a worker of a
// live host. A host leaves the lane with its first answer (any HTTP
// status). See docs/design/dead-links.md.

// maxInactiveHosts bounds the inactive set; past it, a newly dead host
// stays with the live workers.
const maxInactiveHosts = 1 << 17

// inactiveHosts is the node's set of inactive hosts, shared by its workers
// (which mark and clear) and its scheduler (which routes).
type inactiveHosts struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func newInactiveHosts() *inactiveHosts { return &inactiveHosts{m: make(map[string]struct{})} }

func (h *inactiveHosts) mark(host string) {
	h.mu.Lock()
	if len(h.m) < maxInactiveHosts {
		h.m[host] = struct{}{}
	}
	h.mu.Unlock()
}

func (h *inactiveHosts) clear(host string) {
	h.mu.Lock()
	delete(h.m, host)
	h.mu.Unlock()
}

func (h *inactiveHosts) has(host string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[host]
	return ok
}

// isDeadKind reports whether a fetch error kind makes its host inactive:
// a timeout, a refused connection or a DNS failure.
func isDeadKind(kind string) bool {
	switch kind {
	case "timeout", "conn_refused", "dns":
		return true
	}
	return false
}

// lane is the label of a trip's lane (phasecrawl_host_trips_total).
func lane(inactive bool) string {
	if inactive {
		return "inactive"
	}
	return "live"
}

// failedWith moves the trip's host to the dead-link lane when the error
// kind says it is dead (when the lane is on).
func (t *hostTrip) failedWith(kind string) {
	if t.n.deadJobs != nil && isDeadKind(kind) {
		t.n.inactive.mark(t.host)
	}
}
