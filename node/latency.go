package node

import (
	"sync"
	"time"
)

// maxLatencyHosts bounds the hosts latencies remembers; past it the table is
// cleared (a host seen again is simply learned again).
const maxLatencyHosts = 1 << 16

// latencies remembers, per host, a slowly decaying maximum of its response
// times. With phases (cluster), a worker starts a request only when the
// host's expected response time still fits before the phase's request
// deadline, so a slow host is not cut at a swap (and fetched again by the
// next phase's member) while fast hosts keep working up to the guard.
type latencies struct {
	mu sync.Mutex
	m  map[string]time.Duration
	// recent is the same decaying maximum over every host's answers: what
	// a host this node has not fetched yet (a URL lent to it by the
	// member that owns it, a host whose phase it has not worked on) is
	// expected to take.
	recent time.Duration
}

func newLatencies() *latencies { return &latencies{m: make(map[string]time.Duration)} }

// get returns the remembered response time of host (0 when unknown).
func (l *latencies) get(host string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[host]
}

// expect returns the remembered response time of host or, when the host
// is unknown, the recent one of all hosts.
func (l *latencies) expect(host string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.m[host]; ok {
		return d
	}
	return l.recent
}

// observe records one response time d of host: the remembered value is
// max(d, 3/4 of the previous one), so one fast answer does not make a slow
// host look fast, and a host that became fast is trusted again after a few.
func (l *latencies) observe(host string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.m[host]
	if !ok && len(l.m) >= maxLatencyHosts {
		clear(l.m)
	}
	l.m[host] = max(d, old*3/4)
	l.recent = max(d, l.recent*3/4)
}
