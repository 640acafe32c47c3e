package node

import (
	"slices"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// dispatchQueue holds the dispatched elements waiting for a free worker,
// in the order the workers take them: the priority lane (the first nprio)
// ahead of the others, and within each lane an element ahead of those that
// rank below it (site priority, then round cost), else in arrival order.
// The elements of inactive hosts wait apart, in arrival order, for the
// dead-link lane's workers. It decides nothing else, and reads nothing but
// what it is given.
type dispatchQueue struct {
	pending []bucket.Batch // the first nprio take the priority lane
	nprio   int
	dead    []bucket.Batch // for the dead-link lane (deadlane.go)
}

// rank orders the elements of a lane: the higher site priority waits
// ahead, then the larger round cost.
type rank struct {
	site int
	cost time.Duration
}

// below reports whether r waits behind o.
func (r rank) below(o rank) bool {
	return r.site < o.site || r.site == o.site && r.cost < o.cost
}

// push queues b with rank r, in the priority lane if prio: after the last
// element of its lane that does not rank below it (rankOf gives the rank
// of a waiting element's host; nil: every element ranks alike).
func (q *dispatchQueue) push(b bucket.Batch, prio bool, r rank, rankOf func(host string) rank) {
	lo, hi := q.nprio, len(q.pending) // the lane b joins
	if prio {
		lo, hi = 0, q.nprio
		q.nprio++
	}
	at := hi
	if rankOf != nil {
		for at > lo && rankOf(q.pending[at-1].Host).below(r) {
			at--
		}
	}
	q.pending = slices.Insert(q.pending, at, b)
}

// pushDead queues b for the dead-link lane.
func (q *dispatchQueue) pushDead(b bucket.Batch) { q.dead = append(q.dead, b) }

// took drops pending[0], which a worker took.
func (q *dispatchQueue) took() {
	q.pending = q.pending[1:]
	if q.nprio > 0 {
		q.nprio--
	}
}

// deadTook drops dead[0], which a dead-link lane worker took.
func (q *dispatchQueue) deadTook() { q.dead = q.dead[1:] }

// waiting is how many elements wait, in both lanes and for the dead-link lane.
func (q *dispatchQueue) waiting() int { return len(q.pending) + len(q.dead) }

// hostSpeeds tells, from the trips' reports, which hosts take the
// priority lane: those that have not finished a trip yet (new), and those
// whose last trip was slow.
//
// slow holds the hosts whose last trip was slow: its time per request
// (finished.perPage: the host's delay, a Crawl-delay included, plus its
// mean response time) was at least slowFactor times pageAvg, the mean over
// recent trips of all hosts. A crawl ends with such a host's chain of
// trips, each one's links found by the one before. Their elements take the
// priority lane: dispatched at the end of the pass that placed them,
// whatever max_queue_wait, and handed to the next free worker before the
// other dispatched elements (which could otherwise hold them back for a
// second or more when every worker is busy).
//
// tripped has a bit set for each host (by hash) that has finished a trip. A
// host without one is new: its first element takes the priority lane too,
// so a host found late in the crawl starts at once (its trip then goes on
// with the pages its own pages link to, see frontier.SettleAsyncTaking)
// instead of waiting behind every element dispatched before it; the hosts
// a crawl ends with are such late finds. A collision makes a new host look
// known: it only waits its turn. Fixed size: 128 KiB.
type hostSpeeds struct {
	slow    map[string]struct{}
	pageAvg time.Duration
	tripped []uint64
}

func newHostSpeeds() hostSpeeds {
	return hostSpeeds{slow: make(map[string]struct{}), tripped: make([]uint64, trippedBits/64)}
}

// trippedBits is the size of hostSpeeds.tripped in bits.
const trippedBits = 1 << 20

// trippedBit is host's word in hostSpeeds.tripped and its bit in that word.
func trippedBit(host string) (word int, bit uint64) {
	b := frontier.HostHash(host) % trippedBits
	return int(b / 64), 1 << (b % 64)
}

// known reports whether host has finished a trip (or collides with one that has).
func (h *hostSpeeds) known(host string) bool {
	w, bit := trippedBit(host)
	return h.tripped[w]&bit != 0
}

// tripDone records that host has finished a trip.
func (h *hostSpeeds) tripDone(host string) {
	w, bit := trippedBit(host)
	h.tripped[w] |= bit
}

// priority reports whether host's elements take the priority lane: it is
// slow, or new.
func (h *hostSpeeds) priority(host string) bool {
	if _, ok := h.slow[host]; ok {
		return true
	}
	return !h.known(host)
}

// report takes the report of a trip of host whose time per request was
// perPage (0: it sent none): the host is known from now on, and slow or
// not; the mean moves towards perPage.
func (h *hostSpeeds) report(host string, perPage time.Duration) {
	h.tripDone(host)
	if perPage <= 0 {
		return
	}
	if h.pageAvg > 0 && perPage >= slowFactor*h.pageAvg {
		if len(h.slow) < maxSlow {
			h.slow[host] = struct{}{}
		}
	} else {
		delete(h.slow, host)
	}
	if h.pageAvg == 0 {
		h.pageAvg = perPage
	} else {
		h.pageAvg += (perPage - h.pageAvg) / pageAvgWeight
	}
}
