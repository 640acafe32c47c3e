package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/cluster/phase"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// Page state bits.
const (
	stKnown       uint8 = 1 << iota // in some member's frontier (pending, queued, being fetched or done)
	stFetched                       // fetched (COMPLETED)
	stStashed                       // pending on a member cut off by a partition
	stLost                          // was pending on a member that died; on a lent page: its lender died
	stLent                          // lent: out of its owner's pending list until the holder's outcome or give-back, or the lend's expiry
	stLostOutcome                   // fetched by a holder whose outcome was lost: its owner may fetch it again
)

const noOwner = 0xffff

// simClock is the schedule's TimeSource: zero offset from the virtual
// local clock, a fixed uncertainty. Schedule only calls Now without an
// Offset method, so Now is never used.
type simClock struct{ u time.Duration }

func (simClock) Now() time.Time               { return time.Time{} }
func (c simClock) Uncertainty() time.Duration { return c.u }
func (simClock) Offset() time.Duration        { return 0 }

type node struct {
	id    int
	name  string
	sched *phase.Schedule // nil when solo
	bkt   *bucket.Bucket
	alive bool
	cut   bool // on the minority side of a partition

	phase, nphase int
	hosts         []int32 // the current phase's hosts
	cursor        int
	rev           queue          // hosts to look at again (event.node is the host), by time
	inRev         map[int32]bool // hosts in rev due now (deduplicates the store's notices)
	backlog       [][]int32      // per bucket column: hosts refused for want of a free row
	inBack        map[int32]bool
	pending       []bucket.Batch // dispatched, not taken by a worker
	idle          int
	wakeAt        int64 // the turn scheduled, -1 none
	fetched       int64
	guests        map[int32][]int32 // lent to this node: per host, page indices not in the bucket yet
	nguests       int
	inbound       int // lends on their way to this node
}

type trip struct {
	n    *node
	b    bucket.Batch
	h    int
	next int
	last time.Time
	cut  bool // the running request ends at the phase deadline, unanswered
}

type sender struct {
	src, dst int
	q        []int64 // entries (entry): links, and with lending lends, outcomes, give-backs
	inflight bool
	timer    bool
	urgent   bool // send without waiting for MaxDelay (Exchange.Flush: lends, give-backs)
	dirty    bool // in Sim.dirtied
	last     int64
	lent     int // src's URLs lent to dst and not settled (maxLentPerMember)
}

// Sim is one simulated run. Create it with New, run it with Run.
type Sim struct {
	cfg  Config
	web  *Web
	base time.Time
	t    int64 // virtual now, ns since base
	seq  uint64
	q    queue
	rng  *rand.Rand

	nodes   []*node
	names   []string
	ring    *ring.Ring // owners' ring: where URLs are stored
	ringIDs []int      // node id of ring.Members()[i]
	inRing  []bool     // per node: an owner in ring
	away    *ring.Ring // owners plus members away < takeover_after; nil when none
	awayIDs []int
	owner   []uint16 // cached ring owner per page, noOwner = not computed
	state   []uint8
	pend    [][]int32 // per host: pending page indices not in a bucket or trip
	phases  map[int][][]int32
	senders map[uint64]*sender
	stash   []int64

	simLend  // lending
	simHosts // per host

	res Result
}

// simLend is the run's lending state.
type simLend struct {
	lentTo, lender []uint16 // per page, while lent: its holder and the owner that lent it
	lendStamp      uint64   // one per scheduler turn: the cache of lendFrom
	lendSeen       []uint64
	lendSnd        []*sender
	anySeen        uint64
	anyVal         bool
	dirtied        []*sender
	workers        map[[2]int]int // (nphase, phase) -> node id + 1 working on it now
	settled        int64          // lends ended by an outcome or a give-back reaching the lender
	nps            []int
	holderSt       phase.State    // the turning node's schedule state (startLendTurn)
	views          map[string]int // member lists seen in schedules: id
	viewEp         []int64        // per node: the epoch of viewID
	viewV          []uint64       // per node: the viewVer of viewID
	viewID         []int
	viewVer        uint64 // changed when a schedule gets a member list
}

// simHosts is the run's state per host: who fetches it, since when.
type simHosts struct {
	busy      []bool
	lastStart []int64
	lastEnd   []int64
	lastNode  []int32
	requests  []int32
}

func (s *Sim) now() time.Time { return s.base.Add(time.Duration(s.t)) }

func (s *Sim) at(t time.Time) int64 { return int64(t.Sub(s.base)) }

func (s *Sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.q.push(e)
}

// New prepares a run of cfg over web. The web is shared read-only: several
// runs may use one Web, one after the other.
func New(cfg Config, web *Web) (*Sim, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if cfg.Nodes > noOwner-1 {
		return nil, fmt.Errorf("sim: nodes=%d: must be below %d", cfg.Nodes, noOwner)
	}
	pd := cfg.PhaseDuration
	s := &Sim{cfg: cfg, web: web, rng: rand.New(rand.NewPCG(cfg.Seed, 0x51)),
		base:   phase.EpochStart(phase.Epoch(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), pd), pd),
		phases: map[int][][]int32{}, senders: map[uint64]*sender{}, simLend: simLend{workers: map[[2]int]int{}}}
	H := web.Hosts()
	P := web.Pages()
	s.owner = make([]uint16, P)
	s.state = make([]uint8, P)
	s.pend = make([][]int32, H)
	s.busy = make([]bool, H)
	s.lastStart = make([]int64, H)
	s.lastEnd = make([]int64, H)
	s.lastNode = make([]int32, H)
	s.requests = make([]int32, H)
	if !cfg.NoLend && !cfg.Solo {
		s.lentTo = make([]uint16, P)
		s.lender = make([]uint16, P)
	}
	s.lendSeen = make([]uint64, cfg.Nodes)
	s.lendSnd = make([]*sender, cfg.Nodes)
	s.views = map[string]int{}
	s.viewEp = make([]int64, cfg.Nodes)
	s.viewV = make([]uint64, cfg.Nodes)
	s.viewID = make([]int, cfg.Nodes)
	for h := range H {
		s.lastStart[h], s.lastEnd[h], s.lastNode[h] = -1<<62, -1<<62, -1
		n := web.PagesOf(h)
		k := max(1, int(float64(n)*web.cfg.Known+0.5))
		k = min(k, n)
		s.pend[h] = make([]int32, k)
		for i := range k {
			s.pend[h][i] = int32(i)
			s.state[web.Off[h]+int64(i)] = stKnown
		}
		s.res.Discovered += int64(k)
	}
	for i := range cfg.Nodes {
		s.names = append(s.names, nodeName(i))
	}
	s.setRing(s.names, nil)
	e0 := phase.Epoch(s.base, pd)
	for i, name := range s.names {
		b, err := bucket.New(cfg.Bucket)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		n := &node{id: i, name: name, bkt: b, alive: true, phase: -1, idle: cfg.Workers, wakeAt: -1, inRev: map[int32]bool{}, inBack: map[int32]bool{}, guests: map[int32][]int32{}}
		if !cfg.Solo {
			sc := phase.ScheduleConfig{Self: name, Phases: 1, PhaseDuration: pd, Guard: cfg.Guard, Columns: cfg.Bucket.Columns, Clock: simClock{cfg.Uncertainty}}
			n.sched, err = phase.NewSchedule(sc)
			if err != nil {
				return nil, fmt.Errorf("sim: %w", err)
			}
			n.sched.SetMembersFrom(e0-1, s.names)
		}
		s.nodes = append(s.nodes, n)
	}
	s.res.Nodes, s.res.Hosts, s.res.Pages, s.res.Duration = cfg.Nodes, H, P, cfg.Duration
	s.res.StartKnown = s.res.Discovered
	s.res.Phase = cfg.PhaseDuration
	s.res.NPhase = 1
	if !cfg.Solo {
		s.res.NPhase = phase.Count(1, cfg.Nodes, cfg.Bucket.Columns)
	}
	s.res.Bins = make([]int64, int(cfg.Duration/time.Second)+1)
	return s, nil
}

// setRing makes owners the owners' ring and awayNames (owners plus the
// members away) the ring that decides which URLs wait.
func (s *Sim) setRing(owners, awayNames []string) {
	ids := func(r *ring.Ring) []int {
		var out []int
		for _, m := range r.Members() {
			out = append(out, slices.Index(s.names, m))
		}
		return out
	}
	s.ring = ring.New(owners)
	s.ringIDs = ids(s.ring)
	s.inRing = make([]bool, len(s.names))
	for _, i := range s.ringIDs {
		s.inRing[i] = true
	}
	s.away, s.awayIDs = nil, nil
	if len(awayNames) > 0 {
		s.away = ring.New(awayNames)
		s.awayIDs = ids(s.away)
	}
	s.fillOwners()
}

// fillOwners computes the owner of every page with the real ring, on all
// cores: a pure function of the page, so the result does not depend on
// the scheduling of the goroutines.
func (s *Sim) fillOwners() {
	parts := max(runtime.GOMAXPROCS(0), 1)
	P := int64(len(s.owner))
	var wg sync.WaitGroup
	for k := range parts {
		lo, hi := P*int64(k)/int64(parts), P*int64(k+1)/int64(parts)
		wg.Go(func() {
			h := s.web.HostOf(lo)
			for g := lo; g < hi; g++ {
				for g >= s.web.Off[h+1] {
					h++
				}
				if s.state[g] == 0 {
					s.owner[g] = noOwner // never seen: computed when first linked
					continue
				}
				s.owner[g] = uint16(s.ringIDs[s.ring.OwnerIndex(s.web.FP(h, int(g-s.web.Off[h])))])
			}
		})
	}
	wg.Wait()
}

// ownerOf is the node storing page g (real rendezvous ring).
func (s *Sim) ownerOf(g int64) int {
	if o := s.owner[g]; o != noOwner {
		return int(o)
	}
	h := s.web.HostOf(g)
	o := s.ringIDs[s.ring.OwnerIndex(s.web.FP(h, int(g-s.web.Off[h])))]
	s.owner[g] = uint16(o)
	return o
}

// held reports whether page g of host h waits for an away member.
func (s *Sim) held(h int, g int64) bool {
	if s.away == nil {
		return false
	}
	o := s.awayIDs[s.away.OwnerIndex(s.web.FP(h, int(g-s.web.Off[h])))]
	return !slices.Contains(s.ringIDs, o)
}

func (s *Sim) phaseHosts(np int) [][]int32 {
	if ph, ok := s.phases[np]; ok {
		return ph
	}
	// Biggest hosts first: the frontier's window holds its oldest URLs,
	// and a host with many URLs always has some there, a host with few
	// only now and then.
	ph := make([][]int32, np)
	for _, h := range s.web.order {
		p := frontier.PhaseOf(s.web.HostHash[h], np)
		ph[p] = append(ph[p], h)
	}
	s.phases[np] = ph
	return ph
}

// Run simulates cfg.Duration of virtual time and returns the figures. It
// returns an error when an invariant breaks.
func (s *Sim) Run() (*Result, error) {
	for _, n := range s.nodes {
		s.wake(n, 0)
	}
	if l := s.cfg.Loss; l != nil {
		s.scenario(l.At, func() { s.lose(l.Node) })
	}
	if p := s.cfg.Partition; p != nil {
		s.scenario(p.At, func() { s.cutOff(p.Minority, p.For) })
	}
	end := int64(s.cfg.Duration)
	for s.q.len() > 0 && s.q.ev[0].at <= end {
		e := s.q.pop()
		s.t = e.at
		s.res.Events++
		switch e.kind {
		case evTurn:
			n := s.nodes[e.node]
			if n.wakeAt != e.at {
				continue // superseded
			}
			n.wakeAt = -1
			s.turn(n)
		case evStep:
			s.step(e.trip)
		case evReqEnd:
			s.reqEnd(e.trip)
		case evArrive:
			s.arrive(e.snd, e.batch)
		case evAck:
			e.snd.inflight = false
			s.try(e.snd)
		case evTimer:
			e.snd.timer = false
			s.try(e.snd)
		case evScenario:
			e.fn()
		}
		if len(s.dirtied) > 0 {
			s.flushDirty()
		}
		if s.res.Violations > 0 {
			return &s.res, fmt.Errorf("sim: invariant broken at %s: %s", time.Duration(s.t), s.res.FirstViolation)
		}
	}
	s.t = end
	s.finish()
	return &s.res, nil
}

func (s *Sim) scenario(at time.Duration, fn func()) {
	s.push(event{at: int64(at), kind: evScenario, fn: fn})
}

func (s *Sim) violate(format string, args ...any) {
	if s.res.Violations == 0 {
		s.res.FirstViolation = fmt.Sprintf(format, args...)
	}
	s.res.Violations++
}

// wake schedules n's scheduler turn at t (or keeps an earlier one).
func (s *Sim) wake(n *node, t int64) {
	t = max(t, s.t)
	if n.wakeAt >= 0 && n.wakeAt <= t {
		return
	}
	n.wakeAt = t
	s.push(event{at: t, kind: evTurn, node: int32(n.id)})
}

// active is n's phase state now (real Schedule), solo: always open.
func (s *Sim) active(n *node, now time.Time) (phase, nphase int, open bool) {
	if n.sched == nil {
		return 0, 1, true
	}
	return n.sched.Active(now)
}

// turn is one turn of n's scheduler (node/scheduler.go, modelled): swap,
// release, fill the bucket from the phase's hosts, dispatch, hand out.
func (s *Sim) turn(n *node) {
	if !n.alive {
		return
	}
	now := s.now()
	phase, nphase, open := s.active(n, now)
	if phase != n.phase || nphase != n.nphase {
		s.swap(n, phase, nphase)
	}
	n.bkt.Release(now)
	more := false
	if open {
		s.startLendTurn(n, now)
		more = s.fill(n, now)
	}
	if open && len(n.pending) < s.cfg.Workers {
		n.pending = append(n.pending, n.bkt.Dispatch(now)...)
	}
	for open && n.idle > 0 && len(n.pending) > 0 {
		b := n.pending[0]
		n.pending = n.pending[1:]
		n.idle--
		h := s.hostOfBatch(b)
		s.step(&trip{n: n, b: b, h: h})
	}
	next := int64(s.cfg.Duration) + 1
	if n.sched != nil {
		next = s.at(n.sched.At(now).NextSwap)
	}
	if more {
		next = min(next, s.t+int64(time.Millisecond))
	}
	if n.rev.len() > 0 {
		next = min(next, max(n.rev.ev[0].at, s.t+int64(time.Millisecond)))
	}
	if t, ok := n.bkt.NextEvent(); ok && (len(n.pending) < s.cfg.Workers || n.idle > 0) {
		next = min(next, max(s.at(t), s.t+int64(time.Millisecond)))
	}
	s.wake(n, next)
}

func (s *Sim) hostOfBatch(b bucket.Batch) int { return s.web.HostOf(int64(b.Items[0].FP)) }

// swap returns the queued URLs of the old phase to the frontier and points
// the scan at the new phase's hosts.
func (s *Sim) swap(n *node, phase, nphase int) {
	now := s.now()
	for _, b := range n.bkt.Drain() {
		s.requeue(n, b.Items)
	}
	for _, b := range n.pending {
		_ = n.bkt.Finish(b.ID, now, 0)
		s.requeue(n, b.Items)
	}
	n.pending = nil
	s.giveBackAll(n)
	s.setWorker(n, phase, nphase)
	n.phase, n.nphase = phase, nphase
	n.hosts = s.phaseHosts(nphase)[phase]
	n.cursor = 0
	n.rev.ev = n.rev.ev[:0]
	clear(n.inRev)
	for c := range n.backlog {
		n.backlog[c] = n.backlog[c][:0]
	}
	clear(n.inBack)
	s.res.Swaps++
}

// requeue puts URLs n took out of the frontier and did not fetch back:
// its own in the pending list, its guests back to their owners.
func (s *Sim) requeue(n *node, items []bucket.Item) {
	for _, it := range items {
		g := int64(it.FP)
		if it.Guest {
			if s.isLentTo(g, n.id) {
				s.giveBack(n, g)
			}
			continue
		}
		if s.state[g]&stKnown == 0 {
			continue // lost with a dead member
		}
		h := s.web.HostOf(g)
		s.pend[h] = append(s.pend[h], int32(g-s.web.Off[h]))
	}
}

const fillBudget = 4096 // host visits per turn (the scheduler's scan chunk, modelled)

// fill offers the bucket the URLs n owns of its phase's hosts: first the
// hosts due for another look, then the next hosts of the scan. It reports
// whether the scan has more to read now.
func (s *Sim) fill(n *node, now time.Time) bool {
	full := false
	for visits := 0; visits < fillBudget; visits++ {
		if n.bkt.Counts().Free == 0 {
			full = true
			break
		}
		var h int32
		switch {
		case n.rev.len() > 0 && n.rev.ev[0].at <= s.t:
			e := n.rev.pop()
			h = e.node
			delete(n.inRev, h)
			// The host's element is free again: so is a row of its
			// column, which the hosts refused for want of one may take.
			if e.kind == revFreed && n.backlog != nil {
				c := n.bkt.Column(s.web.HostHash[h])
				for _, x := range n.backlog[c] {
					delete(n.inBack, x)
					s.revisit(n, x, s.t, revNotice)
				}
				n.backlog[c] = n.backlog[c][:0]
			}
		case n.cursor < len(n.hosts):
			h = n.hosts[n.cursor]
			n.cursor++
		default:
			if len(n.pending) < s.cfg.Workers {
				n.pending = append(n.pending, n.bkt.Flush(now)...)
			}
			return false
		}
		s.place(n, int(h), now)
	}
	return !full
}

// place adds host h's pending URLs owned by n to n's bucket until it
// refuses one. With lending, n's guests of h go first (the node places its
// guests at the start of each pass), and the pending URLs of h that other
// members own and may lend n now are lent to it (sent through the
// exchange, they come back as guests).
func (s *Sim) place(n *node, h int, now time.Time) {
	name, hh := s.web.Names[h], s.web.HostHash[h]
	if !n.bkt.Accepts(name, hh) {
		if _, ok := n.bkt.Lookup(name, hh); !ok {
			// Its column has no free row: look again when one frees.
			// (A host with an element is looked at again at its trip's end.)
			if n.backlog == nil {
				n.backlog = make([][]int32, n.bkt.Config().Columns)
			}
			if !n.inBack[int32(h)] {
				n.inBack[int32(h)] = true
				c := n.bkt.Column(hh)
				n.backlog[c] = append(n.backlog[c], int32(h))
			}
		}
		return
	}
	lend := s.lending(n)
	full := lend && !s.placeGuests(n, h, now)
	off := s.web.Off[h]
	p := s.pend[h]
	for i := 0; i < len(p); {
		if full && (!lend || !s.poolRoom(n) || !s.anyLender(n, now)) {
			break
		}
		g := off + int64(p[i])
		if o := s.ownerOf(g); o == n.id {
			if full || s.held(h, g) {
				i++
				continue
			}
			if n.bkt.Add(now, name, hh, bucket.Item{FP: uint64(g)}) == bucket.Rejected {
				full = true
				i++
				continue
			}
		} else {
			if !lend || !s.poolRoom(n) {
				i++
				continue
			}
			snd := s.lendFrom(o, n, now)
			if snd == nil || snd.lent >= maxLentPerMember || s.held(h, g) {
				i++
				continue
			}
			s.lendOne(snd, g)
		}
		p[i] = p[len(p)-1]
		p = p[:len(p)-1]
	}
	s.pend[h] = p
}

// phaseOpen is the worker's check before each request (node/worker.go):
// the phase is open, the host is in it, and the host's expected response
// time fits before the deadline. It returns the request deadline.
func (s *Sim) phaseOpen(n *node, h int, now time.Time) (bool, time.Time) {
	if n.sched == nil {
		return true, time.Time{}
	}
	st := n.sched.At(now)
	if !st.Open || st.Phase < 0 || frontier.PhaseOf(s.web.HostHash[h], st.NPhase) != st.Phase {
		return false, st.RequestDeadline
	}
	need := min(2*s.web.Median(h), s.cfg.PhaseDuration/4)
	return now.Add(need).Before(st.RequestDeadline), st.RequestDeadline
}

// step runs a host trip on: the next request when its pace allows, or the
// trip's end.
func (s *Sim) step(tr *trip) {
	n := tr.n
	if !n.alive {
		return
	}
	now := s.now()
	if tr.last.IsZero() && n.sched != nil {
		tr.last = n.sched.Handover(now) // pace the first request after the previous owner's last
	}
	if tr.next < len(tr.b.Items) {
		open, deadline := s.phaseOpen(n, tr.h, now)
		if open {
			if start := tr.last.Add(s.cfg.Delay); !tr.last.IsZero() && now.Before(start) {
				s.push(event{at: s.at(start), kind: evStep, trip: tr})
				return
			}
			s.startRequest(tr, now, deadline)
			return
		}
	}
	// The trip ends: the rest goes back, the element waits out the delay.
	s.requeue(n, tr.b.Items[tr.next:])
	wait := s.cfg.Delay
	if !tr.last.IsZero() {
		wait = max(s.cfg.Delay-now.Sub(tr.last), 0)
	}
	if err := n.bkt.Finish(tr.b.ID, now, wait); err != nil {
		s.violate("finish: %v", err)
	}
	n.idle++
	s.revisit(n, int32(tr.h), s.t+int64(wait), revFreed) // when its element is free again
	s.wake(n, s.t)
}

// revisit has n's scheduler look at host h again at t. Notices due now
// are deduplicated; a later one is always kept (the host's element frees
// then).
// Kinds of revisit.
const (
	revNotice uint8 = iota // new URLs, or a free row in its column
	revFreed               // the host's element frees
)

func (s *Sim) revisit(n *node, h int32, t int64, kind uint8) {
	if n.inBack[h] {
		return // looked at again when its column has a free row
	}
	if t <= s.t {
		if n.inRev[h] {
			return
		}
		n.inRev[h] = true
	}
	s.seq++
	n.rev.push(event{at: t, seq: s.seq, node: h, kind: kind})
}

func (s *Sim) startRequest(tr *trip, now time.Time, deadline time.Time) {
	h := tr.h
	if s.busy[h] {
		s.violate("host %d requested by node %d while node %d's request runs", h, tr.n.id, s.lastNode[h])
	}
	if gap := s.t - s.lastStart[h]; gap < int64(s.cfg.Delay) {
		s.violate("host %d: two requests %s apart (delay %s)", h, time.Duration(gap), s.cfg.Delay)
	}
	if gap := s.t - s.lastEnd[h]; gap < int64(s.cfg.Delay) {
		if s.lastNode[h] == int32(tr.n.id) {
			s.violate("host %d: node %d asked again %s after the last answer (delay %s)", h, tr.n.id, time.Duration(gap), s.cfg.Delay)
		} else {
			s.res.HandoverShortGaps++
		}
	}
	s.busy[h] = true
	s.lastStart[h] = s.t
	s.lastNode[h] = int32(tr.n.id)
	end := s.t + int64(s.web.Response(h, s.rng))
	tr.cut = !deadline.IsZero() && end > s.at(deadline)
	if tr.cut {
		end = s.at(deadline)
	}
	s.push(event{at: end, kind: evReqEnd, trip: tr})
}

func (s *Sim) reqEnd(tr *trip) {
	h := tr.h
	s.busy[h] = false
	s.lastEnd[h] = s.t
	s.requests[h]++
	it := tr.b.Items[tr.next]
	tr.next++
	g := int64(it.FP)
	n := tr.n
	switch {
	case !n.alive:
		if !it.Guest { // a guest stays lent: its owner has it back when the lend expires
			s.state[g] = s.state[g]&^stKnown | stLost // lost with its member
		}
		return
	case tr.cut:
		s.res.Cut++
		s.requeue(n, []bucket.Item{it})
	default:
		if it.Guest && !s.isLentTo(g, n.id) {
			s.violate("node %d fetched page %d as a guest, not lent to it", n.id, g)
		}
		refetch := false
		if s.state[g]&stFetched != 0 {
			if s.state[g]&stLostOutcome == 0 {
				s.violate("page %d fetched twice", g)
			}
			// Its holder's outcome was lost: the owner could not know.
			s.state[g] &^= stLostOutcome
			s.res.RefetchedLostOutcome++
			refetch = true
		}
		s.state[g] |= stFetched
		if !refetch {
			n.fetched++
			s.res.Fetched++
			s.res.Bins[s.t/int64(time.Second)]++
			s.res.LastFetch = time.Duration(s.t)
			if h == 0 {
				s.res.Host0Fetched++
				s.res.Host0Last = time.Duration(s.t)
			}
		}
		s.links(n, h, int(g-s.web.Off[h]))
		if it.Guest {
			s.res.LentFetched++
			s.outcome(n, g)
		}
	}
	tr.last = s.now()
	s.step(tr)
}

// nodeName is the member name of node i; names sort in index order.
func nodeName(i int) string { return fmt.Sprintf("n%05d", i) }
