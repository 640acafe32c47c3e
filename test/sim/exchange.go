package sim

import (
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
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
	s.state[g] = s.state[g]&^stLost | stKnown
	s.addPending(g)
}

// addPending puts known page g in its owner's pending list and tells the
// owner's scheduler when the host is in its phase now, and with lending
// the member working on the host's phase (the owner may lend it the URL).
func (s *Sim) addPending(g int64) {
	h := s.web.HostOf(g)
	s.pend[h] = append(s.pend[h], int32(g-s.web.Off[h]))
	oid := s.ownerOf(g)
	o := s.nodes[oid]
	if o.alive && o.nphase > 0 && o.hosts != nil && int(s.web.HostHash[h]%uint64(o.nphase)) == o.phase {
		s.revisit(o, int32(h), s.t, revNotice)
		s.wake(o, s.t)
	}
	if s.lentTo != nil {
		s.noticeWorker(h, oid)
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
// (exchange.BatchDue) says so, or sets the max-delay timer.
func (s *Sim) try(snd *sender) {
	if snd.inflight || len(snd.q) == 0 || !s.reachable(snd.src, snd.dst) {
		return // an unreachable peer's queue waits (retried on a change)
	}
	x := s.cfg.Exchange
	since := time.Duration(s.t - snd.last)
	due := exchange.BatchDue(len(snd.q), x.MinBatch, since, x.MaxDelay, false)
	if !due && snd.urgent {
		due, snd.urgent = true, false // waitReady: urgent.Swap(false)
	}
	if !due {
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
	s.res.Entries += int64(k)
	for _, e := range b {
		if entKind(e) == entURL {
			s.res.Forwarded++
		}
	}
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
	n := s.nodes[snd.dst]
	var hosts []int32 // hosts with new guests
	for _, e := range b {
		g := entPage(e)
		switch entKind(e) {
		case entURL:
			s.store(g)
		case entLend:
			s.takeLend(n, g, &hosts)
		case entOutcome:
			s.settle(snd.src, g, false)
		case entReturn:
			s.settle(snd.src, g, true)
		}
	}
	for _, h := range hosts {
		s.revisit(n, h, s.t, revNotice)
	}
	if len(hosts) > 0 {
		s.wake(n, s.t)
	}
	s.push(event{at: s.t + int64(s.cfg.StoreTime+s.cfg.NetLatency), kind: evAck, snd: snd})
}

// reroute re-files every queued URL under its current owner (the
// exchange's take does so at send time), and every outcome and give-back
// for the member that lent the URL, or the URL's owner now when that
// member died (reportTo); lends stay for their holder. It retries every
// sender.
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
		for _, e := range q {
			g := entPage(e)
			k := entKind(e)
			if k == entLend {
				snd.q = append(snd.q, e)
				continue
			}
			o := s.ownerOf(g)
			if k != entURL {
				o = s.reportTo(g)
			}
			if o == snd.src {
				if k == entURL {
					s.store(g)
				} else {
					s.settle(snd.src, g, k == entReturn)
				}
				continue
			}
			d := s.sender(snd.src, o)
			d.q = append(d.q, e)
			if k == entReturn {
				d.urgent = true
			}
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
