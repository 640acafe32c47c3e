package node

import (
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
)

// unitHold keeps, with politeness.key domain, at most one element of a
// politeness unit (a registered domain) with the workers at a time: the
// dispatched elements of a unit that has one pending or on a trip wait
// here, in dispatch order, and the next goes to the workers when that
// trip finishes. The unit's gate (unitgate.go) would make their trips wait
// anyway; held here they do not keep workers from other hosts. Their
// elements stay FETCHING in the bucket, so no other element of their host
// is placed meanwhile. Unused (nil maps) with politeness.key host.
type unitHold struct {
	units map[string]int            // elements of each unit pending or on a trip
	held  map[string][]bucket.Batch // elements waiting for their unit's trip to end
}

// holdForUnit counts b against its unit and reports whether it must wait
// (held) because another element of the unit is with the workers.
func (s *scheduler) holdForUnit(b bucket.Batch) bool {
	n := s.n
	if n.gates == nil {
		return false
	}
	if s.units == nil {
		s.units, s.held = map[string]int{}, map[string][]bucket.Batch{}
	}
	u := n.unit(b.Host)
	if s.units[u] > 0 {
		s.held[u] = append(s.held[u], b)
		return true
	}
	s.units[u]++
	return false
}

// unitDone is a trip of host's unit ending: the unit's next held element,
// if any, goes to the workers.
func (s *scheduler) unitDone(host string) {
	n := s.n
	if n.gates == nil || s.units == nil {
		return
	}
	u := n.unit(host)
	if s.units[u]--; s.units[u] <= 0 {
		delete(s.units, u)
	}
	hs := s.held[u]
	if len(hs) == 0 {
		return
	}
	next := hs[0]
	if len(hs) == 1 {
		delete(s.held, u)
	} else {
		s.held[u] = hs[1:]
	}
	s.enqueue([]bucket.Batch{next})
}

// dropUnits uncounts elements taken from the workers' queues before a
// worker took them (a phase swap, the scheduler stopping).
func (s *scheduler) dropUnits(bs []bucket.Batch) {
	if s.units == nil {
		return
	}
	for _, b := range bs {
		u := s.n.unit(b.Host)
		if s.units[u]--; s.units[u] <= 0 {
			delete(s.units, u)
		}
	}
}

// heldBatches returns the held elements, in no particular order.
func (s *scheduler) heldBatches() []bucket.Batch {
	var bs []bucket.Batch
	for _, hs := range s.held {
		bs = append(bs, hs...)
	}
	return bs
}

// dropHeld finishes the held elements' bucket elements (their URLs were
// handed back by unstarted) and forgets them.
func (s *scheduler) dropHeld(now time.Time) {
	for _, hs := range s.held {
		for _, b := range hs {
			_ = s.n.bkt.Finish(b.ID, now, 0)
		}
	}
	clear(s.held)
}
