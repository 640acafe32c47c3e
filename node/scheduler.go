package node

import (
	"context"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/frontier"
)

const (
	// scanChunk is how many frontier records one scheduler step reads (one short read transaction).
	scanChunk = 4096
	// maxTick bounds how long the scheduler sleeps when it expects nothing.
	maxTick = 100 * time.Millisecond
	// passGap is how long after the start of a pass over the window the
	// next one may start while every worker is busy, idlePassGap while a
	// worker may be idle (see mayScan).
	passGap     = 10 * time.Millisecond
	idlePassGap = 3 * time.Millisecond
	// maxSlow bounds how many slow hosts the scheduler remembers.
	maxSlow = 1 << 16
	// slowFactor: a trip whose time per request is at least slowFactor
	// times the recent mean makes its host slow (scheduler.slow).
	slowFactor = 2
	// pageAvgWeight is the weight (1/pageAvgWeight) of one trip in the mean.
	pageAvgWeight = 64
	// maxCosts bounds how many hosts' round costs the scheduler remembers
	// (scheduler.costs): a host beyond it waits in dispatch order.
	maxCosts = 1 << 16
)

// scheduler is the state of the scheduling loop (KSpider §3.4): it owns the
// bucket and a cursor sliding over the active phase's queue of IN_LIST URLs.
type scheduler struct {
	n       *Node
	cursor  frontier.Cursor
	scanned int  // records visited since the window last wrapped to the oldest URL
	dirty   bool // something changed since this pass began (URLs added, elements freed): pass again
	idle    bool // the last pass saw the bucket as it is now: don't rescan until something changes
	phase   int
	nphase  int       // the phase count the frontier's queue is keyed by
	passAt  time.Time // when the current (or last) pass over the window started

	// dispatchQueue holds the dispatched elements waiting for a free
	// worker (dispatch.go).
	dispatchQueue
	// hostSpeeds tells the hosts whose elements take the priority lane:
	// new and slow ones (dispatch.go).
	hostSpeeds
	busy int // live-lane workers on a trip (handed an element, not finished)

	// wants are the refills running trips asked for and the scheduler
	// granted (refill), in the order asked: the bucket joins the host's
	// URLs the scan meets to its FETCHING element (bucket.Want), and each
	// is answered once its room is full or a pass has seen the whole
	// window for it.
	wants []want

	// URLs placed in the bucket whose move to IN_PROGRESS is not committed
	// yet: a scan may still return them as IN_LIST and must skip them.
	marking map[uint64]struct{}
	marks   []pendingMark // in submission order

	urgent []string // slow and new hosts placed in the bucket during this pass

	// costs is, in a recurring crawl (nil otherwise), each host's round
	// cost as the plan has it (roundEstimate: its latest measured round,
	// else pages × delay): dispatched elements wait largest cost first
	// within their part of the queue (LPT as a list). Filled from the
	// frontier's host statistics when the scheduler starts and refreshed
	// by each trip's report (the AddRoundTimeAsync write answers with the
	// host's statistics), so it changes when a host's round ends; enqueue
	// never reads the frontier.
	costs map[string]time.Duration
	// started is when each element a worker took was handed out (a
	// recurring crawl only); timing holds the trips' time writes not
	// answered yet, in submission order.
	started map[bucket.ElementID]time.Time
	timing  []*frontier.Pending

	// unitHold keeps one element per politeness unit with the workers
	// (politeness.key domain; unithold.go).
	unitHold
}

// want is a granted refill not answered yet; partial: it was granted
// while a pass was under way, whose end has not seen the whole window for
// it.
type want struct {
	a       *refillAsk
	partial bool
}

// pendingMark is an asynchronous MarkInProgress of the URLs refs.
type pendingMark struct {
	p    *frontier.Pending
	refs []frontier.Ref
}

// newScheduler returns n's scheduler state, knowing no host yet.
func newScheduler(n *Node) *scheduler {
	return &scheduler{n: n, marking: make(map[uint64]struct{}), hostSpeeds: newHostSpeeds()}
}

// schedule runs the scheduler until ctx is done, then hands back to the
// frontier every URL it holds that no worker has started. It never waits
// for the disk: frontier writes it makes are asynchronous (see marking).
func (n *Node) schedule(ctx context.Context) {
	s := newScheduler(n)
	if n.revisits() {
		s.loadCosts()
	}
	s.phase, _, _ = n.phases.Active(n.clock.Now())
	s.nphase = n.front.Phases()
	timer := n.clock.NewTimer(0)
	defer timer.Stop()
	for {
		now := n.clock.Now()
		phase, nphase, open := n.phases.Active(now)
		if phase != s.phase || nphase != s.nphase {
			s.swap(phase, nphase)
		}
		s.reapMarks()
		s.reapTiming()
		if !open {
			s.answerWants() // the phase is closing: no trip goes on
		}
		if freed := n.bkt.Release(now); freed > 0 {
			s.idle, s.dirty = false, true
		}
		if open && !s.idle && s.mayScan(now) {
			s.fill(now, phase)
		}
		if open && len(s.pending) < n.cfg.Workers {
			s.enqueue(n.bkt.Dispatch(now))
		}
		// Hand out every job a worker takes now and collect every finished
		// element, without blocking: one loop turn serves many events.
	handout:
		for open && len(s.pending) > 0 {
			select {
			case n.jobs <- s.pending[0]:
				s.handedOut()
			default:
				break handout
			}
		}
	deadout:
		for open && len(s.dead) > 0 {
			select {
			case n.deadJobs <- s.dead[0]:
				s.deadHandedOut()
			default:
				break deadout
			}
		}
	collect:
		for {
			select {
			case f := <-n.done:
				s.finish(f)
			case a := <-n.refills:
				s.refill(a, phase, open)
			default:
				break collect
			}
		}
		n.backlogged.Store(open && len(s.pending) > 0)
		n.snap.Store(&schedSnapshot{bucket: n.bkt.Counts(), phase: phase, nphase: nphase, pending: s.waiting()})

		var jobs, deadJobs chan bucket.Batch
		var next, deadNext bucket.Batch
		if len(s.pending) > 0 && open {
			jobs, next = n.jobs, s.pending[0]
		}
		if len(s.dead) > 0 && open {
			deadJobs, deadNext = n.deadJobs, s.dead[0]
		}
		wait := maxTick
		if !s.idle && open && s.mayScan(now) {
			wait = 0 // more of the window to scan
		} else if !s.idle && open {
			wait = max(n.clock.Until(s.nextPass()), time.Millisecond) // the next pass, unless a worker frees first
		}
		if wait > 0 {
			if t, ok := n.bkt.NextEvent(); ok {
				if d := n.clock.Until(t); d < wait {
					wait = max(d, time.Millisecond)
				}
			}
		}
		if len(s.marks) > 0 {
			wait = min(wait, time.Millisecond) // poll the marks in flight soon
		}
		if wait == 0 {
			select {
			case <-ctx.Done():
				s.stop()
				return
			default:
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			s.stop()
			return
		case jobs <- next:
			s.handedOut()
		case deadJobs <- deadNext:
			s.deadHandedOut()
		case f := <-n.done:
			s.finish(f)
		case a := <-n.refills:
			s.refill(a, phase, open)
		case <-n.wake:
			s.idle, s.dirty = false, true
		case <-timer.C():
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
	}
}

// enqueue appends dispatched elements to the pending ones, slow and new
// hosts' (priority) behind the priority ones already waiting but ahead of
// the others. With sites: priorities, a host's element also waits ahead of
// those of lower-priority sites in its part of the queue (and one of a
// site of priority > 0 takes the priority lane): when the due work exceeds
// the workers, higher-priority sites are served first. In a recurring
// crawl, among elements of the same priority the host of the larger round
// cost (scheduler.costs) waits ahead: the free workers take the largest
// hosts' rounds first (LPT as a list, docs/design/planning.md).
func (s *scheduler) enqueue(bs []bucket.Batch) {
	ranked := s.n.sitePriorities()
	var rankOf func(host string) rank // nil: arrival order
	if ranked || s.costs != nil {
		rankOf = func(host string) rank { return s.rank(host, ranked) }
	}
	for _, b := range bs {
		if s.holdForUnit(b) {
			continue // another element of its unit is with the workers
		}
		if s.n.deadJobs != nil && s.n.inactive.has(b.Host) {
			s.pushDead(b) // the dead-link lane (deadlane.go)
			continue
		}
		r := s.rank(b.Host, ranked)
		s.push(b, s.priority(b.Host) || r.site > 0, r, rankOf)
	}
}

// rank is host's site priority (with ranked: some sites: entry sets one)
// and round cost (0 without costs).
func (s *scheduler) rank(host string, ranked bool) rank {
	r := rank{cost: s.costs[host]}
	if ranked {
		r.site = s.n.sitePriority(host)
	}
	return r
}

// handedOut drops s.pending[0], which a worker took.
func (s *scheduler) handedOut() {
	s.busy++
	s.startTrip(s.pending[0].ID)
	s.took()
}

// deadHandedOut drops s.dead[0], which a dead-link lane worker took.
func (s *scheduler) deadHandedOut() {
	s.startTrip(s.dead[0].ID)
	s.deadTook()
}

// startTrip remembers when a worker took element id (a recurring crawl only).
func (s *scheduler) startTrip(id bucket.ElementID) {
	if s.costs != nil {
		s.started[id] = s.n.clock.Now()
	}
}

// endTrip adds the time the trip of f held its worker to its host's round
// (frontier.HostStats.RoundTime), asynchronously; the write's answer
// refreshes the host's cost (reapTiming).
func (s *scheduler) endTrip(f finished) {
	at, ok := s.started[f.id]
	if !ok {
		return
	}
	delete(s.started, f.id)
	s.timing = append(s.timing, s.n.front.AddRoundTimeAsync(s.n.persistCtx, f.host, s.n.clock.Since(at)))
}

// reapTiming takes the answers of the trip time writes that are done: each
// host's new cost.
func (s *scheduler) reapTiming() {
	k := 0
	for ; k < len(s.timing); k++ {
		done, _, err := s.timing[k].Poll()
		if !done {
			break // writes commit in order
		}
		if err != nil {
			if s.n.persistCtx.Err() == nil {
				s.n.log.Error("scheduler: record trip time", "error", err)
			}
			continue
		}
		if hs, ok := s.timing[k].Host(); ok {
			s.setCost(hs)
		}
	}
	s.timing = s.timing[k:]
}

// setCost caches the round cost of the host hs (a host beyond maxCosts is
// left out).
func (s *scheduler) setCost(hs frontier.HostStats) {
	if _, ok := s.costs[hs.Host]; !ok && len(s.costs) >= maxCosts {
		return
	}
	c, _ := s.n.roundEstimate(hs)
	s.costs[hs.Host] = c
}

// loadCosts turns the round costs on and fills them from the frontier's
// host statistics (at most maxCosts hosts).
func (s *scheduler) loadCosts() {
	s.costs, s.started = make(map[string]time.Duration), make(map[bucket.ElementID]time.Time)
	for after := ""; len(s.costs) < maxCosts; {
		hs, next, err := s.n.front.Hosts(after, 1000)
		if err != nil {
			s.n.log.Error("scheduler: read host round costs", "error", err)
			return
		}
		for _, h := range hs {
			s.setCost(h)
		}
		if next == "" {
			return
		}
		after = next
	}
}

// reapMarks forgets the URLs whose move to IN_PROGRESS is committed: from
// now on a scan no longer returns them.
func (s *scheduler) reapMarks() {
	k := 0
	for ; k < len(s.marks); k++ {
		m := s.marks[k]
		done, _, err := m.p.Poll()
		if !done {
			break // writes commit in order: the later ones are not done either
		}
		if err != nil {
			s.n.log.Error("scheduler: mark in progress", "error", err, "urls", len(m.refs))
		}
		for _, r := range m.refs {
			delete(s.marking, r.FP)
		}
	}
	s.marks = s.marks[k:]
}

// mayScan reports whether fill may run now. A pass under way goes on; a new
// one waits for nextPass.
func (s *scheduler) mayScan(now time.Time) bool {
	if s.cursor != nil || s.scanned > 0 {
		return true
	}
	return !now.Before(s.nextPass())
}

// nextPass is when the next pass over the window may start: idlePassGap
// after the start of the last one when a worker may be idle (no dispatched
// element waits for one), passGap after it while every worker is busy.
// Most of a pass's records are of hosts the bucket refuses (being fetched,
// or full), so a pass soon after another places little. A pass started
// after every freed element (every trip's end) read the queue ~2,300
// times in a large crawl, 19M records of which 0.7% were placed, ~10% of
// the crawl's CPU; with at least 3 ms between two passes it reads it ~600
// times (4.5M records), and the crawl took 8% less CPU and time (5 A/B
// pairs, test/bench CrawlLarge).
func (s *scheduler) nextPass() time.Time {
	for _, w := range s.wants {
		if w.a.dry.Load() {
			return s.passAt // a trip's connection waits for this pass
		}
	}
	if len(s.pending) == 0 {
		return s.passAt.Add(idlePassGap)
	}
	return s.passAt.Add(passGap)
}

// fill reads the next chunk of the window and places what fits in the bucket.
func (s *scheduler) fill(now time.Time, phase int) {
	n := s.n
	var placed []frontier.Ref
	visited := 0
	if s.cursor == nil && s.scanned == 0 {
		s.dirty = false // a new pass sees every change made so far
		s.passAt = now
		s.placeGuests(now, phase, s.nphase)
	}
	limit := min(scanChunk, n.cfg.Frontier.Window-s.scanned)
	accept := func(host string) bool { return n.bkt.Accepts(host, frontier.HostHash(host)) }
	ranked := n.sitePriorities()
	next, err := n.front.ScanFiltered(phase, s.cursor, limit, accept, func(r frontier.Record) bool {
		visited++
		if _, ok := s.marking[r.FP]; ok {
			return true // placed already; its mark is not committed yet
		}
		if n.holder != nil && n.holder.Held(r.FP) {
			return true // its owner is away for now (cluster.takeover_after)
		}
		it := bucket.Item{FP: r.FP, URL: r.URL, Depth: r.Depth, Run: r.Run, Tries: r.Tries, Due: r.Due}
		switch n.bkt.Add(now, r.Host, frontier.HostHash(r.Host), it) {
		case bucket.Placed:
			if s.priority(r.Host) || ranked && n.sitePriority(r.Host) > 0 {
				s.urgent = append(s.urgent, r.Host)
			}
			placed = append(placed, r.Ref())
		case bucket.Joined:
			placed = append(placed, r.Ref())
		}
		return true
	})
	if err != nil {
		n.log.Error("scheduler: scan frontier", "error", err)
		s.idle = true
		return
	}
	if len(placed) > 0 {
		// persistCtx, not ctx: a shutdown must not drop this write; the
		// writer applies it before any Settle or Requeue of these URLs.
		s.marks = append(s.marks, pendingMark{p: n.front.MarkInProgressAsync(n.persistCtx, placed), refs: placed})
		for _, r := range placed {
			s.marking[r.FP] = struct{}{}
		}
	}
	s.scanned += visited
	s.cursor = next
	end := next == nil || s.scanned >= n.cfg.Frontier.Window
	s.deliver(end)
	if end {
		// End of the window: slide back to the oldest unfinished URL.
		s.cursor, s.scanned = nil, 0
		for _, h := range s.urgent {
			if b, ok := n.bkt.DispatchHost(h, frontier.HostHash(h)); ok {
				s.enqueue([]bucket.Batch{b})
			}
		}
		s.urgent = s.urgent[:0]
		if len(s.pending) < n.cfg.Workers {
			// The window holds nothing more for the QUEUING hosts right
			// now: waiting out max_queue_wait would only leave workers idle.
			s.enqueue(n.bkt.Flush(now))
		}
		// Only an event (new URLs, a freed element, a phase swap) can let a
		// URL the pass refused in now: without one, wait instead of rescanning.
		s.idle = !s.dirty
	}
}

// refill decides on a running trip's request for more URLs of its host:
// granted (the bucket's FETCHING element takes the host's URLs the scan
// meets, and a pass is due) while the phase is open and no dispatched
// element waits for a worker: every pending element has an idle worker
// to take it. Refused, it is answered at once with none, and the trip
// ends with its list. Dispatch (enqueue) decides which host a free worker
// takes next; this decides whether a busy one goes on with its host.
func (s *scheduler) refill(a *refillAsk, phase int, open bool) {
	n := s.n
	if !open || frontier.PhaseOf(n.unit.Hash(a.host), s.nphase) != phase || len(s.pending) > n.cfg.Workers-s.busy {
		a.reply <- nil
		return
	}
	if err := n.bkt.Want(a.id, a.room); err != nil {
		a.reply <- nil
		return
	}
	s.wants = append(s.wants, want{a: a, partial: s.cursor != nil || s.scanned > 0})
	s.idle, s.dirty = false, true
}

// deliver answers the refills whose room is full and, at the end of a
// pass (end), every one the pass saw the whole window for; one granted
// during the pass that found nothing waits for the next pass.
func (s *scheduler) deliver(end bool) {
	k := 0
	for _, w := range s.wants {
		v, ok := s.n.bkt.Lookup(w.a.host, frontier.HostHash(w.a.host))
		got := 0
		if ok && v.ID == w.a.id {
			got = v.Len
		}
		if got < w.a.room && !(end && (!w.partial || got > 0)) {
			if end {
				w.partial = false // the next pass sees the whole window
			}
			s.wants[k] = w
			k++
			continue
		}
		items, _ := s.n.bkt.Refill(w.a.id) // a stale id (cannot happen) answers none
		w.a.reply <- items
	}
	clear(s.wants[k:])
	s.wants = s.wants[:k]
}

// answerWants answers every refill not answered yet with none; URLs the
// bucket joined for them go back to the queue (after their marks: the
// frontier applies writes in order).
func (s *scheduler) answerWants() {
	for _, w := range s.wants {
		items, _ := s.n.bkt.Refill(w.a.id)
		s.handBack(w.a.host, items)
		w.a.reply <- nil
	}
	clear(s.wants)
	s.wants = s.wants[:0]
}

// handBack puts URLs of host the scheduler holds back in the queue,
// asynchronously (handBackLoop writes it again should it fail).
func (s *scheduler) handBack(host string, items []bucket.Item) {
	refs := s.batchRefs([]bucket.Batch{{Host: host, Items: items}})
	if len(refs) > 0 {
		s.n.handBacks.watch(s.n.front.Settle(s.n.persistCtx, frontier.SettleRequest{Requeue: refs}), refs)
	}
}

// finish moves a fetched element to TIMEWAIT for its host's delay and
// remembers that the host is known now, and whether it is slow.
func (s *scheduler) finish(f finished) {
	if !f.inactive {
		s.busy--
	}
	// A trip waits for the answer to its refill before it ends: nothing
	// is joined to its element any more (handed back if it were).
	if items, err := s.n.bkt.Refill(f.id); err == nil && len(items) > 0 {
		s.handBack(f.host, items)
	}
	s.report(f.host, f.perPage)
	s.endTrip(f)
	if err := s.n.bkt.Finish(f.id, s.n.clock.Now(), f.wait); err != nil {
		s.n.log.Error("scheduler: finish element", "error", err)
	}
	s.unitDone(f.host)
}

// swap returns the QUEUING URLs of the old phase to IN_LIST (KSpider §3.3).
// When the phase count changed (cluster membership), it re-keys the
// frontier's queue for the new count.
func (s *scheduler) swap(phase, nphase int) {
	n := s.n
	refs := s.unstarted()
	s.answerWants()
	for _, b := range s.pending {
		_ = n.bkt.Finish(b.ID, n.clock.Now(), 0)
	}
	for _, b := range s.dead {
		_ = n.bkt.Finish(b.ID, n.clock.Now(), 0)
	}
	s.dropUnits(s.pending)
	s.dropUnits(s.dead)
	s.dropHeld(s.n.clock.Now())
	s.pending, s.nprio, s.urgent, s.dead = nil, 0, s.urgent[:0], nil
	n.giveBack(n.guests.clear()) // lent for the phase that ended
	if err := n.front.Requeue(n.persistCtx, refs); err != nil {
		// Written again until it goes through (handBackLoop): these
		// URLs are in no bucket any more.
		n.requeueFailed(err, len(refs), 0)
		n.handBacks.retry(refs)
	}
	if nphase != n.front.Phases() {
		if err := n.front.SetPhases(nphase); err != nil {
			n.log.Error("scheduler: re-key frontier for a new phase count", "nphase", nphase, "error", err)
		} else {
			n.log.Info("frontier re-keyed", "from", s.nphase, "to", nphase)
		}
	}
	n.log.Debug("scheduler: phase swap", "from", s.phase, "to", phase, "nphase", nphase, "requeued", len(refs)) // the cluster logs the swap at info
	s.nphase = n.front.Phases()
	s.phase, s.cursor, s.scanned, s.idle = phase, nil, 0, false
}

// stop hands back every URL the scheduler holds that no worker has taken.
func (s *scheduler) stop() {
	n := s.n
	refs := s.unstarted()
	s.answerWants()
	s.dropUnits(s.pending)
	s.dropUnits(s.dead)
	clear(s.held)
	s.pending, s.nprio, s.dead = nil, 0, nil
	n.giveBack(n.guests.clear())
	if err := n.front.Requeue(n.persistCtx, refs); err != nil {
		n.log.Error("scheduler: requeue at shutdown", "error", err)
	}
	n.log.Info("scheduler stopped", "requeued", len(refs))
}

// unstarted frees the QUEUING elements and returns the Refs of the URLs no
// worker has started: theirs, the refills the FETCHING elements hold, and
// the pending elements'.
func (s *scheduler) unstarted() []frontier.Ref {
	refs := s.batchRefs(s.n.bkt.Drain())
	refs = append(refs, s.batchRefs(s.dead)...)
	refs = append(refs, s.batchRefs(s.heldBatches())...)
	return append(refs, s.batchRefs(s.pending)...)
}

// batchRefs is the Refs of the URLs of bs; guests (another member's
// records) are left out and forgotten by the guest pool.
func (s *scheduler) batchRefs(bs []bucket.Batch) []frontier.Ref {
	var refs []frontier.Ref
	var guests []uint64
	for _, b := range bs {
		for _, it := range b.Items {
			if it.Guest {
				guests = append(guests, it.FP)
				continue
			}
			refs = append(refs, frontier.Ref{FP: it.FP, Host: b.Host})
		}
	}
	s.n.giveBack(s.n.guests.release(guests))
	return refs
}
