package sim

import (
	"slices"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/phase"
)

func sortSenders(all []*sender) {
	slices.SortFunc(all, func(a, b *sender) int {
		if a.src != b.src {
			return a.src - b.src
		}
		return a.dst - b.dst
	})
}

// fromEpoch is the epoch at which a member change seen now takes effect
// (Schedule.SetMembersAfter's rule: the next boundary, or the one after
// when its guard has started).
func (s *Sim) fromEpoch() int64 {
	now := s.now()
	d := s.cfg.PhaseDuration
	e := phase.Epoch(now, d)
	from := e + 1
	guard := min(s.cfg.Guard+2*s.cfg.Uncertainty, d*3/4)
	if !now.Before(phase.EpochStart(e+1, d).Add(-guard)) {
		from = e + 2
	}
	return from
}

// setMembers schedules members on the nodes ids from the next possible
// epoch boundary, and wakes them for it.
func (s *Sim) setMembers(ids []int, members []string) {
	from := s.fromEpoch()
	s.viewVer++
	for _, i := range ids {
		n := s.nodes[i]
		n.sched.SetMembersFrom(from, members)
		s.wake(n, s.at(phase.EpochStart(from, s.cfg.PhaseDuration)))
	}
}

func (s *Sim) namesOf(ids []int) []string {
	var out []string
	for _, i := range ids {
		out = append(out, s.names[i])
	}
	return out
}

func (s *Sim) live() []int {
	var out []int
	for _, n := range s.nodes {
		if n.alive && !n.cut {
			out = append(out, n.id)
		}
	}
	return out
}

// lose kills node d: what it held and had not fetched is lost with it
// (its frontier is on its disk); its fetched pages stay known (their
// replicas are on the second owner). The others declare it dead after
// DetectAfter, re-own its share and crawl it after TakeoverAfter. With
// lending, the lends it had queued are lost with its records, and the
// URLs lent to it go back to their owners when those lends expire
// (lendExpiry); the outcomes it had queued are lost.
func (s *Sim) lose(d int) {
	n := s.nodes[d]
	s.res.LossAt = time.Duration(s.t)
	var owned int64
	for g := range s.state {
		if s.state[g]&stKnown != 0 && s.ownerOf(int64(g)) == d {
			owned++
		}
	}
	s.res.LossShare = owned
	s.res.LossKnown = s.res.Discovered
	lost := s.strip(d, false)
	for _, it := range n.bkt.Drain() {
		for _, x := range it.Items {
			if x.Guest {
				continue // another member's: back to it when the lend expires
			}
			s.state[x.FP] = s.state[x.FP]&^stKnown | stLost
			lost++
		}
	}
	for _, b := range n.pending {
		for _, x := range b.Items {
			if x.Guest {
				continue
			}
			s.state[x.FP] = s.state[x.FP]&^stKnown | stLost
			lost++
		}
	}
	n.pending = nil
	n.alive = false
	for _, snd := range s.senders {
		if snd.src != d {
			continue
		}
		for _, e := range snd.q {
			if entKind(e) == entLend {
				s.nodes[snd.dst].inbound--
			}
			// A lend queued here: the URL's record is on the dead disk.
			if g := entPage(e); entKind(e) == entLend && s.isLentTo(g, snd.dst) {
				s.state[g] = s.state[g]&^(stKnown|stLent) | stLost
				snd.lent--
				lost++
				s.res.LendDropped++
			}
		}
		snd.q = nil
	}
	s.res.LossPending = lost
	if s.lentTo != nil {
		// What it lent and is not settled: its records are lost with it
		// (settle and expireLends read the mark when the lend ends).
		for g := range s.state {
			if s.state[g]&stLent != 0 && int(s.lender[g]) == d {
				s.state[g] |= stLost
			}
		}
		s.scenario(s.lendExpiry(), func() { s.expireLends(d) })
	}
	s.scenario(time.Duration(s.t)+s.cfg.DetectAfter, func() {
		live := s.live()
		s.setMembers(live, s.namesOf(live))
		s.setRing(s.namesOf(live), append(s.namesOf(live), n.name))
		s.reroute()
		s.scenario(time.Duration(s.t)+s.cfg.TakeoverAfter, func() {
			s.setRing(s.namesOf(s.live()), nil)
			s.res.TakeoverAt = time.Duration(s.t)
			s.kickAll()
		})
	})
}

// strip takes every pending page owned by d out of the frontier: lost
// (unknown again) or, with stash, kept aside. It returns how many.
func (s *Sim) strip(d int, stash bool) int64 {
	var k int64
	for h := range s.pend {
		p := s.pend[h]
		off := s.web.Off[h]
		for i := 0; i < len(p); {
			g := off + int64(p[i])
			if s.ownerOf(g) != d {
				i++
				continue
			}
			if stash {
				s.state[g] = s.state[g]&^stKnown | stStashed
				s.stash = append(s.stash, g)
			} else {
				s.state[g] = s.state[g]&^stKnown | stLost
			}
			k++
			p[i] = p[len(p)-1]
			p = p[:len(p)-1]
		}
		s.pend[h] = p
	}
	return k
}

// cutOff separates the last m nodes from the others for d. They are
// fenced (start no request: a frozen or cut-off member, Schedule.SetHold),
// keep their frontier, and come back as members at the first boundary
// after the heal, fenced for two more epochs (Schedule.Fence).
func (s *Sim) cutOff(m int, d time.Duration) {
	s.res.PartitionAt, s.res.PartitionFor = time.Duration(s.t), d
	var minority []int
	for i := len(s.nodes) - m; i < len(s.nodes); i++ {
		n := s.nodes[i]
		n.cut = true
		n.sched.SetHold(true)
		minority = append(minority, i)
		s.res.PartitionStashed += s.strip(i, true)
	}
	if s.lentTo != nil {
		// The URLs lent to the minority go back to their owners when the
		// lends expire, if the minority is still cut off then.
		s.scenario(s.lendExpiry(), func() {
			for _, i := range minority {
				if s.nodes[i].cut {
					s.expireLends(i)
				}
			}
		})
	}
	all := s.namesOf(s.live())
	all = append(all, s.namesOf(minority)...)
	s.scenario(time.Duration(s.t)+s.cfg.DetectAfter, func() {
		live := s.live()
		s.setMembers(live, s.namesOf(live))
		s.setRing(s.namesOf(live), all)
		s.reroute()
		s.scenario(time.Duration(s.t)+s.cfg.TakeoverAfter, func() {
			if s.nodes[minority[0]].cut {
				s.setRing(s.namesOf(s.live()), nil)
				s.res.TakeoverAt = time.Duration(s.t)
				s.kickAll()
			}
		})
	})
	s.scenario(time.Duration(s.t)+d, func() {
		s.res.HealAt = time.Duration(s.t)
		for _, i := range minority {
			s.nodes[i].cut = false
		}
		ids := s.live()
		s.setMembers(ids, all)
		s.setRing(all, nil)
		for _, g := range s.stash {
			s.state[g] &^= stStashed
			if s.state[g]&stKnown == 0 {
				s.state[g] |= stKnown
				h := s.web.HostOf(g)
				s.pend[h] = append(s.pend[h], int32(g-s.web.Off[h]))
			}
		}
		s.stash = nil
		for _, i := range minority {
			n := s.nodes[i]
			n.sched.Fence(s.now(), 2)
			n.sched.SetHold(false)
		}
		s.reroute()
		s.kickAll()
	})
}

// kickAll restarts every live node's scan of its phase (new URLs became
// crawlable: a takeover or a heal).
func (s *Sim) kickAll() {
	for _, n := range s.nodes {
		if n.alive {
			n.cursor = 0
			s.wake(n, s.t)
		}
	}
}
