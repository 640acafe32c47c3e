package sim

import (
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
)

// links follows page i of host h's links: Tree children on its own host
// (only it links to them), its host's home page, and Cross random pages.
// Each goes to its owner: locally, or through the exchange.
func (s *Sim) links(n *node, h, i int) {
	off, np := s.web.Off[h], s.web.PagesOf(h)
	tree := s.web.cfg.Tree
	for c := tree*i + 1; c <= tree*i+tree && c < np; c++ {
		s.route(n, off+int64(c))
	}
	s.route(n, off)
	for range s.web.cfg.Cross {
		s.route(n, s.rng.Int64N(s.web.Pages()))
	}
}

// route is the exchange's Route: URLs this node owns are stored here,
// the others queued for their owner.
func (s *Sim) route(n *node, g int64) {
	s.res.Links++
	o := s.ownerOf(g)
	if o == n.id {
		s.store(g)
		return
	}
	snd := s.sender(n.id, o)
	snd.q = append(snd.q, g)
	s.try(snd)
}

// store adds page g to its owner's frontier unless it is known there.
func (s *Sim) store(g int64) {
	if s.state[g]&stKnown != 0 {
		s.res.Duplicates++
		return
	}
	if s.state[g]&(stStashed|stLost) != 0 {
		s.res.Refound++ // known before, out of reach now (a cut-off or dead member's)
	} else {
		s.res.Discovered++
	}
	s.state[g] |= stKnown
	h := s.web.HostOf(g)
	s.pend[h] = append(s.pend[h], int32(g-s.web.Off[h]))
	// Tell the owner's scheduler when the host is in its phase now.
	o := s.nodes[s.ownerOf(g)]
	if o.alive && o.nphase > 0 && o.hosts != nil && int(s.web.HostHash[h]%uint64(o.nphase)) == o.phase {
		s.revisit(o, int32(h), s.t, revNotice)
		s.wake(o, s.t)
	}
}

func (s *Sim) sender(src, dst int) *sender {
	k := uint64(src)<<32 | uint64(dst)
	snd := s.senders[k]
	if snd == nil {
		snd = &sender{src: src, dst: dst, last: -1 << 62}
		s.senders[k] = snd
	}
	return snd
}

// reachable reports whether src can deliver to dst now.
func (s *Sim) reachable(src, dst int) bool {
	a, b := s.nodes[src], s.nodes[dst]
	return a.alive && b.alive && a.cut == b.cut
}

// try sends snd's next batch when the real batching rule
// (cluster.BatchDue) says so, or sets the max-delay timer.
func (s *Sim) try(snd *sender) {
	if snd.inflight || len(snd.q) == 0 || !s.reachable(snd.src, snd.dst) {
		return // an unreachable peer's queue waits (retried on a change)
	}
	x := s.cfg.Exchange
	since := time.Duration(s.t - snd.last)
	if !cluster.BatchDue(len(snd.q), x.MinBatch, since, x.MaxDelay, false) {
		if !snd.timer {
			snd.timer = true
			s.push(event{at: snd.last + int64(x.MaxDelay), kind: evTimer, snd: snd})
		}
		return
	}
	k := min(len(snd.q), x.MaxBatch)
	b := make([]int64, k)
	copy(b, snd.q)
	snd.q = snd.q[k:]
	if len(snd.q) == 0 {
		snd.q = nil
	}
	snd.inflight, snd.last = true, s.t
	s.res.Messages++
	s.res.Forwarded += int64(k)
	s.push(event{at: s.t + int64(s.cfg.NetLatency), kind: evArrive, snd: snd, batch: b})
}

func (s *Sim) arrive(snd *sender, b []int64) {
	if !s.nodes[snd.dst].alive {
		// Not acknowledged: the sender keeps the batch and re-files it
		// when the members change.
		snd.q = append(b, snd.q...)
		snd.inflight = false
		return
	}
	for _, g := range b {
		s.store(g)
	}
	s.push(event{at: s.t + int64(s.cfg.StoreTime+s.cfg.NetLatency), kind: evAck, snd: snd})
}

// reroute re-files every queued URL under its current owner (the
// exchange's take does so at send time) and retries every sender.
func (s *Sim) reroute() {
	var all []*sender
	for _, snd := range s.senders {
		all = append(all, snd)
	}
	// Map order is random: sort for determinism.
	sortSenders(all)
	for _, snd := range all {
		if !s.nodes[snd.src].alive {
			snd.q = nil
			continue
		}
		q := snd.q
		snd.q = nil
		for _, g := range q {
			o := s.ownerOf(g)
			if o == snd.src {
				s.store(g)
				continue
			}
			d := s.sender(snd.src, o)
			d.q = append(d.q, g)
		}
	}
	all = all[:0]
	for _, snd := range s.senders {
		all = append(all, snd)
	}
	sortSenders(all)
	for _, snd := range all {
		s.try(snd)
	}
}
