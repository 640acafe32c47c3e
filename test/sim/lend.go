package sim

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/cluster/phase"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// URL lending (cluster.lend, docs/design/lending.md), modelled. The owner
// of a URL that waits for its host's phase lends it to the member working
// on that phase now; that member (the holder) fetches it in its own trip
// to the host and reports the outcome back, or gives it back unfetched.
// In the model the lend is decided when the holder places the host in its
// bucket (place): its owner's pending URLs of the host are lent then, as
// if the owner's lend round had just run.

// Limits of the product, mirrored (unexported there).
const (
	maxLentPerMember = 8192                   // lend.MaxLentPerMember: lent to one member and not settled
	maxGuests        = 1 << 16                // node.maxGuests: guests waiting in a holder's pool
	lendMinLeft      = 150 * time.Millisecond // cluster.lendMinLeft: nothing lent this close to the holder's guard
)

// Exchange entry kinds: an entry queued for a peer is an int64, its kind in
// the top bits and the page id below (page ids are below 2^40).
const (
	entURL     int64 = iota // a link, for its owner (KindNew)
	entLend                 // a URL lent, owner to holder (KindLend)
	entOutcome              // a lent page's outcome, holder to owner (KindOutcome)
	entReturn               // a lent URL given back unfetched (KindOutcome, state IN_LIST)
)

const entShift = 60

func entry(kind, g int64) int64 { return kind<<entShift | g }
func entKind(e int64) int64     { return e >> entShift }
func entPage(e int64) int64     { return e & (1<<entShift - 1) }

// lending reports whether n takes lends in this turn: lending is on, n
// runs the cluster layer and is an owner in the ring.
func (s *Sim) lending(n *node) bool {
	return !s.cfg.NoLend && n.sched != nil && s.inRing[n.id]
}

// poolRoom reports whether n's guest pool has room for more lends: its
// waiting guests and the lends on their way to it are below maxGuests.
// (The product's owner lends regardless and the holder refuses what its
// pool cannot take; in the model the holder pulls no more, so that a
// refused URL is not lent again at once, again and again.)
func (s *Sim) poolRoom(n *node) bool { return n.nguests+n.inbound < maxGuests }

// startLendTurn starts a turn of n's scheduler for the lend decisions
// (the cache of lendFrom and anyLender).
func (s *Sim) startLendTurn(n *node, now time.Time) {
	s.lendStamp++
	if s.lending(n) {
		s.holderSt = n.sched.At(now)
	}
}

// viewOf is an id of the member list that node i's schedule has in effect
// (st is its state now): two nodes with the same id have the same list.
func (s *Sim) viewOf(i int, st phase.State) int {
	if s.viewEp[i] == st.Epoch && s.viewV[i] == s.viewVer {
		return s.viewID[i]
	}
	key := strings.Join(st.Members, "\x00")
	id, ok := s.views[key]
	if !ok {
		id = len(s.views) + 1
		s.views[key] = id
	}
	s.viewEp[i], s.viewV[i], s.viewID[i] = st.Epoch, s.viewVer, id
	return id
}

// lendFrom is the sender from o to n when o lends to n now, nil when it
// does not. It applies the owner's rules (cluster.lendRound): o is alive
// and reachable, not held off its phase, open, more than lendMinLeft
// before the guard, and its schedule says n works on n's phase
// (phase.Of; when o's member list is n's, that is the phase n's
// own schedule gave it). Cached for one turn of n (lendStamp).
func (s *Sim) lendFrom(o int, n *node, now time.Time) *sender {
	if s.lendSeen[o] == s.lendStamp {
		return s.lendSnd[o]
	}
	s.lendSeen[o] = s.lendStamp
	s.lendSnd[o] = nil
	on := s.nodes[o]
	if o == n.id || on.sched == nil || !s.reachable(o, n.id) || !s.inRing[o] {
		return nil
	}
	st := on.sched.At(now)
	if st.Held || !st.Open || st.Phase < 0 || st.NPhase <= 1 || st.NPhase != n.nphase {
		return nil
	}
	if st.Epoch != s.holderSt.Epoch || s.viewOf(o, st) != s.viewOf(n.id, s.holderSt) || s.holderSt.Phase != n.phase {
		if phase.Of(n.name, st.Members, st.Epoch, st.NPhase) != n.phase {
			return nil
		}
	}
	if guardAt := st.RequestDeadline.Add(-st.NextSwap.Sub(st.GuardStart)); guardAt.Sub(now) < lendMinLeft {
		return nil
	}
	s.lendSnd[o] = s.sender(o, n.id)
	return s.lendSnd[o]
}

// anyLender reports whether some member may lend n more now (cached for
// the turn; reset when a member's lends reach maxLentPerMember).
func (s *Sim) anyLender(n *node, now time.Time) bool {
	if s.anySeen == s.lendStamp {
		return s.anyVal
	}
	s.anySeen, s.anyVal = s.lendStamp, false
	for o := range s.nodes {
		if snd := s.lendFrom(o, n, now); snd != nil && snd.lent < maxLentPerMember {
			s.anyVal = true
			break
		}
	}
	return s.anyVal
}

// lendOne lends page g through snd (owner to holder): marked lent, out of
// the owner's pending list (the caller removes it), queued as a lend
// entry, sent at once (the owner flushes its lends: Exchange.Flush).
func (s *Sim) lendOne(snd *sender, g int64) {
	s.state[g] |= stLent
	s.lentTo[g] = uint16(snd.dst)
	s.lender[g] = uint16(snd.src)
	snd.lent++
	if snd.lent >= maxLentPerMember {
		s.anySeen = 0
	}
	snd.q = append(snd.q, entry(entLend, g))
	s.nodes[snd.dst].inbound++
	snd.urgent = true
	s.dirty(snd)
	s.res.Lent++
}

// lentTo reports whether page g is lent to node x now.
func (s *Sim) isLentTo(g int64, x int) bool {
	return s.state[g]&stLent != 0 && int(s.lentTo[g]) == x
}

// takeLends files the lends of a batch that reached holder n: kept as
// guests of their host when n works on the host's phase now, open, and
// its pool has room; given back at once otherwise (node.AddGuests,
// cluster.takeLends).
func (s *Sim) takeLend(n *node, g int64, hosts *[]int32) {
	n.inbound--
	if !s.isLentTo(g, n.id) {
		return // the lend ended meanwhile (expired): nothing to do
	}
	h := s.web.HostOf(g)
	phase, nphase, open := s.active(n, s.now())
	if !open || n.cut || phase != n.phase || nphase != n.nphase || frontier.PhaseOf(s.web.HostHash[h], nphase) != phase || n.nguests >= maxGuests {
		s.giveBack(n, g)
		return
	}
	k := int32(h)
	if len(n.guests[k]) == 0 {
		*hosts = append(*hosts, k)
	}
	n.guests[k] = append(n.guests[k], int32(g-s.web.Off[h]))
	n.nguests++
	s.res.Guests++
}

// placeGuests adds n's guests of host h to its bucket, in the host's
// element with n's own URLs of it, until the bucket refuses one; the rest
// waits in the pool (node's placeGuests). It reports whether the bucket
// took them all.
func (s *Sim) placeGuests(n *node, h int, now time.Time) bool {
	k := int32(h)
	gs := n.guests[k]
	if len(gs) == 0 {
		return true
	}
	name, hh, off := s.web.Names[h], s.web.HostHash[h], s.web.Off[h]
	i := 0
	for ; i < len(gs); i++ {
		g := off + int64(gs[i])
		if !s.isLentTo(g, n.id) {
			s.violate("node %d holds page %d as a guest, not lent to it", n.id, g)
			continue
		}
		if n.bkt.Add(now, name, hh, bucket.Item{FP: uint64(g), Guest: true}) == bucket.Rejected {
			break
		}
	}
	n.nguests -= i
	if i == len(gs) {
		delete(n.guests, k)
		return true
	}
	n.guests[k] = gs[i:]
	return false
}

// giveBack returns a lent URL n will not fetch to its owner: an IN_LIST
// outcome through the exchange, flushed at once (cluster.ReturnLent).
func (s *Sim) giveBack(n *node, g int64) {
	s.res.Returned++
	s.report(n, g, entReturn)
}

// outcome reports a lent page n fetched to its owner (cluster.ReportLent):
// an outcome entry, batched like the links.
func (s *Sim) outcome(n *node, g int64) {
	s.res.Outcomes++
	s.report(n, g, entOutcome)
}

// reportTo is where a report on lent page g goes: the member that lent
// it while it is alive (cut off or not: cluster.outcomeTo keeps a report
// for a lender away), else the URL's owner in the ring now.
func (s *Sim) reportTo(g int64) int {
	if o := int(s.lender[g]); s.nodes[o].alive {
		return o
	}
	return s.ownerOf(g)
}

// report queues an outcome or a give-back for the URL's lender (settled
// here when that is n itself).
func (s *Sim) report(n *node, g int64, kind int64) {
	o := s.reportTo(g)
	if o == n.id {
		s.settle(n.id, g, kind == entReturn)
		return
	}
	snd := s.sender(n.id, o)
	snd.q = append(snd.q, entry(kind, g))
	if kind == entReturn {
		snd.urgent = true
	}
	s.dirty(snd)
}

// settle ends the lend of g to holder, when it still runs: an outcome
// (the page is fetched) or a give-back (the URL is pending again at its
// owner, which may lend it to the next holder or fetch it). When the
// lender died meanwhile (stLost on a lent page), its record was lost with
// its disk: a page fetched is known to the new owner from the outcome, a
// URL given back is lost.
func (s *Sim) settle(holder int, g int64, back bool) {
	if !s.isLentTo(g, holder) {
		return // a report of a lend that expired meanwhile
	}
	s.state[g] &^= stLent
	if snd := s.senders[uint64(s.lender[g])<<32|uint64(holder)]; snd != nil {
		snd.lent--
	}
	s.settled++
	switch {
	case s.state[g]&stLost != 0 && back:
		s.state[g] &^= stKnown
		s.res.LossPending++
	case s.state[g]&stLost != 0:
		s.state[g] &^= stLost
	case back:
		s.addPending(g)
	}
}

// giveBackAll returns every guest n holds (its phase swapped).
func (s *Sim) giveBackAll(n *node) {
	if n.nguests == 0 && len(n.guests) == 0 {
		return
	}
	for _, h := range slices.Sorted(maps.Keys(n.guests)) {
		off := s.web.Off[h]
		for _, i := range n.guests[h] {
			if g := off + int64(i); s.isLentTo(g, n.id) {
				s.giveBack(n, g)
			}
		}
	}
	clear(n.guests)
	n.nguests = 0
}

// lendExpiry is when the lends to a holder that died or was cut off now
// run out at their owners: the end of its phase plus the grace for its
// report (cluster.lendGrace), plus the mark's slack (cluster.lendSlack);
// and not before the holder is taken over (an away holder's marks hold).
func (s *Sim) lendExpiry() time.Duration {
	d, u := s.cfg.PhaseDuration, s.cfg.Uncertainty
	end := phase.EpochStart(phase.Epoch(s.now(), d)+1, d)
	grace := time.Second + 2*s.cfg.Exchange.MaxDelay + 4*u
	hold := end.Add(grace + max(d, 2*time.Second)).Sub(s.base)
	return max(hold, time.Duration(s.t)+s.cfg.DetectAfter+s.cfg.TakeoverAfter)
}

// expireLends gives every URL lent to holder x (dead, or still cut off)
// back to its owner's pending list: the lends and reports still queued
// for or by x are dropped. A page x fetched and whose outcome never left
// is fetched again (counted in RefetchedLostOutcome, not in Fetched).
func (s *Sim) expireLends(x int) {
	var all []*sender
	for _, snd := range s.senders {
		if snd.dst == x || snd.src == x {
			all = append(all, snd)
		}
	}
	sortSenders(all)
	for _, snd := range all {
		q := snd.q[:0]
		for _, e := range snd.q {
			k := entKind(e)
			if snd.dst == x && k == entLend || snd.src == x && (k == entOutcome || k == entReturn) {
				if k == entLend {
					s.nodes[x].inbound--
				}
				continue
			}
			q = append(q, e)
		}
		snd.q = q
	}
	n := s.nodes[x]
	clear(n.guests)
	n.nguests = 0
	for g := range s.state {
		if !s.isLentTo(int64(g), x) {
			continue
		}
		s.state[g] &^= stLent
		if snd := s.senders[uint64(s.lender[g])<<32|uint64(x)]; snd != nil {
			snd.lent--
		}
		s.res.LendExpired++
		fetched := s.state[g]&stFetched != 0
		if fetched {
			s.res.LostOutcomes++
		}
		switch {
		case s.state[g]&stLost != 0 && !fetched:
			s.state[g] &^= stKnown // its lender died too: lost with it
			s.res.LossPending++
		case s.state[g]&stLost != 0:
			s.state[g] &^= stLost // known as fetched; no owner left to fetch it again
		case fetched:
			s.state[g] |= stLostOutcome
			s.addPending(int64(g))
		default:
			s.addPending(int64(g))
		}
	}
}

// dirty has snd tried at the end of the event (its entries of the event
// go in one batch, as one outbox write does).
func (s *Sim) dirty(snd *sender) {
	if !snd.dirty {
		snd.dirty = true
		s.dirtied = append(s.dirtied, snd)
	}
}

func (s *Sim) flushDirty() {
	for len(s.dirtied) > 0 {
		d := s.dirtied
		s.dirtied = nil
		for _, snd := range d {
			snd.dirty = false
			s.try(snd)
		}
	}
}

// setWorker records that n works on phase of nphase now (for the notices
// of URLs that another member may lend it).
func (s *Sim) setWorker(n *node, phase, nphase int) {
	if old := [2]int{n.nphase, n.phase}; s.workers[old] == n.id+1 {
		delete(s.workers, old)
	}
	if !slices.Contains(s.nps, nphase) {
		s.nps = append(s.nps, nphase)
	}
	s.workers[[2]int{nphase, phase}] = n.id + 1
}

// noticeWorker tells the member working on host h's phase now, other than
// the owner o, to look at h again: o has a URL of h it may lend (the
// owner's lend round starts at once when URLs arrive: lendKick).
func (s *Sim) noticeWorker(h int, o int) {
	for _, np := range s.nps {
		w := s.workers[[2]int{np, int(s.web.HostHash[h] % uint64(np))}] - 1
		if w < 0 || w == o {
			continue
		}
		if wn := s.nodes[w]; wn.alive && wn.nphase == np && s.lending(wn) {
			s.revisit(wn, int32(h), s.t, revNotice)
			s.wake(wn, s.t)
		}
	}
}
