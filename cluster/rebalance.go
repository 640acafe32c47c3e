package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/lend"
	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// rebalanceBatch is how many records one claim (one frontier write) moves.
const rebalanceBatch = 1000

// RingHash identifies a member set (order and duplicates do not matter):
// the value a settled node gossips (NodeMeta.Settled); ring.Hash.
func RingHash(members []string) string { return ring.Hash(members) }

// moved counts what a rebalance pass did.
type moved struct {
	urls int // IN_LIST and STALLED records filed for their owner
	fps  int // COMPLETED records filed for their owner
	kept int // records left for a later pass: being fetched, or fetched meanwhile
}

func (m *moved) add(o moved) { m.urls, m.fps, m.kept = m.urls+o.urls, m.fps+o.fps, m.kept+o.kept }

// moveAway files every record of the frontier that another member of ring
// owns in the outbox under that owner, then deletes it locally (claim,
// file, remove: see frontier/rebalance.go). marks gets, per peer, the
// outbox position of the last record filed for it. It scans in short read
// transactions and moves at most rebalanceBatch records per write, so the
// scheduler's writes interleave with it.
//
// While the node crawls (busy is set), records whose host is in the phase
// it works on now (or next, shortly before a swap) are left for
// a later pass: its scheduler may hold
// them in the bucket, and a URL claimed there would be fetched here and
// crawled again by its new owner.
//
// keepLent leaves the URLs lent and not settled for a later pass too.
func (c *Cluster) moveAway(ctx context.Context, ring *ring.Ring, marks map[string]uint64, busy, keepLent bool) (moved, error) {
	foreign := func(fp uint64) bool { return c.movable(ring.Owner(fp)) }
	var tot moved
	var batch []frontier.Record
	var from frontier.Cursor
	for {
		if err := ctx.Err(); err != nil {
			return tot, err
		}
		recs, next, end, err := c.front.ScanRecords(from, 0, foreign)
		if err != nil {
			return tot, err
		}
		// A COMPLETED record this node ranks second for is the replica it
		// keeps (KindReplica, or a copy of one); one it fetched or received
		// itself is also copied to the owner, who may not have it (the
		// owner was away).
		recs = slices.DeleteFunc(recs, func(r frontier.Record) bool {
			if !r.HeldAsCopy() {
				return false
			}
			_, second := ring.Top2(r.FP)
			return second == c.cfg.Name
		})
		if busy && len(recs) > 0 {
			inPhase := c.sched.BusyHosts(time.Now(), min(time.Second, c.cfg.PhaseDuration/4))
			recs = slices.DeleteFunc(recs, func(r frontier.Record) bool {
				if r.State == frontier.Completed || !inPhase(c.cfg.Unit.Hash(r.Host)) {
					return false
				}
				tot.kept++
				return true
			})
		}
		if keepLent && c.lends.Enabled() && len(recs) > 0 {
			// A URL lent to the member working on its host's phase moves
			// once its outcome came back or the lend ran out: moved now,
			// its new owner could fetch or lend it meanwhile.
			now := time.Now()
			recs = slices.DeleteFunc(recs, func(r frontier.Record) bool {
				if r.State == frontier.Completed || !c.lends.Active(r.FP, now) {
					return false
				}
				tot.kept++
				return true
			})
		}
		batch = append(batch, recs...)
		for len(batch) >= rebalanceBatch || (end && len(batch) > 0) {
			k := min(len(batch), rebalanceBatch)
			m, err := c.moveBatch(ctx, ring, batch[:k], marks)
			tot.add(m)
			if err != nil {
				return tot, err
			}
			batch = batch[k:]
		}
		if end {
			return tot, nil
		}
		from = next
	}
}

// moveBatch moves one batch of records. Its frontier writes are not
// cancelled halfway: a claim is always followed by its removal or undone,
// and a removal or an undo that fails (a full disk) is written again
// until it goes through or stop is done (the process stops: Open puts
// the claimed records back in the queue). A claimed record left as it is
// would stay IN_PROGRESS, in no queue, and a next pass would not claim it
// again. An IN_LIST or STALLED record goes to its owner (KindMoved). A
// COMPLETED one goes to its owner (KindDone) and to the member ranked
// second for it (KindReplica); when that is this node, it stays here as
// the replica. A COMPLETED record this node kept only as a replica (or a
// copy of one) goes to both as KindCopied: its due time may be behind the
// owner's (which moves its own record), so the receivers file it only
// where they have none.
func (c *Cluster) moveBatch(stop context.Context, ring *ring.Ring, recs []frontier.Record, marks map[string]uint64) (moved, error) {
	ctx := context.Background()
	refs := make([]frontier.Ref, len(recs))
	for i, r := range recs {
		refs[i] = r.Ref()
	}
	claimed, err := c.front.Claim(ctx, refs)
	if err != nil {
		return moved{}, fmt.Errorf("cluster: rebalance: %w", err)
	}
	m := moved{kept: len(recs) - len(claimed)}
	type group struct {
		peer string
		kind exchange.Kind
	}
	groups := map[group][]int{} // indexes into claimed
	keep := make([]bool, len(claimed))
	for i, r := range claimed {
		if r.State != frontier.Completed {
			g := group{ring.Owner(r.FP), exchange.KindMoved}
			groups[g] = append(groups[g], i)
			continue
		}
		first, second := ring.Top2(r.FP)
		done, replica := exchange.KindDone, exchange.KindReplica
		if r.HeldAsCopy() {
			done, replica = exchange.KindCopied, exchange.KindCopied
		}
		groups[group{first, done}] = append(groups[group{first, done}], i)
		switch second {
		case c.cfg.Name:
			keep[i] = true
		case "":
		default:
			groups[group{second, replica}] = append(groups[group{second, replica}], i)
		}
	}
	failed := make([]bool, len(claimed))
	var errs []error
	for g, is := range groups {
		us := make([]frontier.NewURL, len(is))
		for k, i := range is {
			r := claimed[i]
			us[k] = frontier.NewURL{URL: r.URL, Host: r.Host, Depth: r.Depth, Run: r.Run, Due: r.Due}
			if g.kind == exchange.KindMoved && c.lends.Enabled() {
				if lm, ok := c.lends.MarkOf(r.FP); ok {
					us[k].Host = lend.MovedHost(r.Host, lm) // the new owner waits for the lend
				}
			}
		}
		if err := c.outbox.PutKind(ctx, g.peer, g.kind, us); err != nil {
			errs = append(errs, err)
			for _, i := range is {
				failed[i] = true
			}
			continue
		}
		if g.kind == exchange.KindReplica {
			continue // the owner's copy decides when the move is done
		}
		mark, err := c.outbox.Mark(g.peer)
		if err != nil {
			errs = append(errs, err)
		} else if mark > marks[g.peer] {
			marks[g.peer] = mark
		}
	}
	var filed []frontier.Record
	var undo, replicas []frontier.Ref
	for i, r := range claimed {
		switch {
		case failed[i] && r.State != frontier.Completed:
			undo = append(undo, r.Ref())
		case failed[i]:
			// stays as it is; the next pass tries again
		case keep[i]:
			replicas = append(replicas, r.Ref())
			m.fps++
		default:
			filed = append(filed, r)
		}
	}
	if len(undo) > 0 {
		errs = append(errs, c.untilWritten(stop, "requeue", func() error { return c.front.Requeue(ctx, undo) }))
	}
	if _, err := c.front.MarkReplicas(ctx, replicas); err != nil {
		errs = append(errs, err)
	}
	var removed int
	errs = append(errs, c.untilWritten(stop, "remove", func() (err error) {
		removed, err = c.front.Remove(ctx, filed)
		return err
	}))
	for _, r := range filed {
		if r.State == frontier.Completed {
			m.fps++
		} else {
			m.urls++
		}
	}
	m.kept += len(filed) - removed
	c.movedURLs.Add(uint64(m.urls))
	c.movedFPs.Add(uint64(m.fps))
	if err := errors.Join(errs...); err != nil {
		return m, fmt.Errorf("cluster: rebalance: %w", err)
	}
	return m, nil
}

// Retries of a rebalance's frontier write that failed (untilWritten): the
// first after claimRetryFirst, each next one twice as long up to
// claimRetryMax.
const (
	claimRetryFirst = 100 * time.Millisecond
	claimRetryMax   = 5 * time.Second
)

// untilWritten calls write (the frontier write named what) until it
// succeeds, the frontier is closed or stop is done, and returns its last
// error.
func (c *Cluster) untilWritten(stop context.Context, what string, write func() error) error {
	wait := claimRetryFirst
	for {
		err := write()
		if err == nil || errors.Is(err, frontier.ErrClosed) {
			return err
		}
		c.log.Warn("rebalance: frontier write failed, will write again", "write", what, "error", err, "in", wait)
		if !sleepCtx(stop, wait) {
			return err
		}
		wait = min(2*wait, claimRetryMax)
	}
}

// rebalanceRetry is how soon a rebalance that kept no record for the
// phase being crawled, only records being fetched or lent, looks again.
const rebalanceRetry = time.Second

// rebalanceStallLog is how long a rebalance runs before it logs what it
// still waits for.
const rebalanceStallLog = 30 * time.Second

// rebalanceLoop runs a rebalance after each change of the ring.
func (c *Cluster) rebalanceLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.rebKick:
		}
		c.rebalance(ctx)
	}
}

// sleepCtx sleeps d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// rebalance moves the records other members own under the current ring to
// them, in passes until none is left (records being fetched wait for the
// next pass), waits until the outbox delivered them, logs the figures once
// and gossips that this node is settled for the member set. A change of
// the ring ends it early: the next rebalance starts at once.
func (c *Cluster) rebalance(ctx context.Context) {
	ring := c.ring.Load()
	if c.leaving.Load() {
		return
	}
	c.rebalancing.Store(true)
	defer c.rebalancing.Store(false)
	start := time.Now()
	var tot moved
	marks := map[string]uint64{}
	superseded := func() bool { return ctx.Err() != nil || c.ring.Load() != ring || c.leaving.Load() }
	logDone := func(msg string, kv ...any) {
		c.log.Info(msg, append([]any{"members", ring.Members(), "urls_moved", tot.urls, "fingerprints_moved", tot.fps,
			"duration", time.Since(start).Round(time.Millisecond)}, kv...)...)
	}
	// A rebalance that takes long says once what it waits for.
	warned := false
	stalled := func(what string, kv ...any) {
		if warned || time.Since(start) < rebalanceStallLog {
			return
		}
		warned = true
		c.log.Warn("rebalance still waiting", append([]any{"for", what, "members", ring.Members(),
			"duration", time.Since(start).Round(time.Millisecond), "outbox", c.outbox.Pending()}, kv...)...)
	}
	// The scheduler re-keys the frontier for a new phase count at its
	// phase swap, once it has put every URL it held and no worker started
	// back in the queue (after their marks: the frontier applies writes in
	// order); from then on it places only URLs Held lets through, under
	// this ring its own. So once the count changed since this rebalance's
	// ring was stored (a swap may come before the rebalance starts), its
	// bucket holds no record another member owns: a joiner's switch (a
	// first member that crawled alone for a moment goes from one phase to
	// three) need not wait for the end of the slot it starts, up to a
	// whole epoch, with every joiner's own URLs held meanwhile (gate).
	n0 := c.ringPhases.Load()
	swapped := func() bool { return int64(c.front.Phases()) != n0 }
	for pass := 1; ; pass++ {
		// A starting node that has not fetched a URL of its own yet
		// (startHold) holds none in its bucket, nor does one whose
		// scheduler swapped to a new phase count since: nothing need wait
		// for its phase to end.
		// The pass's view of the three: a change after it, even one made
		// while the pass ran, ends the wait below.
		st0, held, sw0 := c.sched.At(time.Now()), c.startHold.Load(), swapped()
		busy := !held && !sw0
		m, err := c.moveAway(ctx, ring, marks, busy, true)
		tot.add(m)
		if superseded() {
			logDone("rebalance interrupted by a membership change")
			return
		}
		if err != nil {
			c.log.Warn("rebalance pass failed, will retry", "pass", pass, "error", err)
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		if m.kept == 0 {
			break
		}
		stalled("records being fetched or in the phase being crawled", "kept", m.kept, "pass", pass)
		// What is left is being fetched, or in the phase being crawled:
		// try again once the phase slot changed (its end may come sooner
		// than known now: a join's switch), the node stopped holding
		// its own URLs, or its scheduler swapped to a new phase count.
		// When nothing was kept for the phase (busy unset), what is left
		// is being fetched or lent, which ends within the slot: try again
		// after a second (a first member's seed in a worker's hands at the
		// switch kept every joiner's gate closed until the epoch's end).
		waited := time.Now()
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return
		}
		for st0.Phase >= 0 && held == c.startHold.Load() && sw0 == swapped() && !superseded() {
			if !busy && time.Since(waited) >= rebalanceRetry {
				break
			}
			st := c.sched.At(time.Now())
			if st.Slot != st0.Slot || st.Phase != st0.Phase || time.Now().After(st0.RequestDeadline.Add(50*time.Millisecond)) {
				break
			}
			if !sleepCtx(ctx, 100*time.Millisecond) {
				return
			}
		}
	}
	if c.cfg.Lend {
		// The outcomes of URLs lent by a member that restarted wait in
		// this node's outbox: it is settled for the new member set only
		// once they are delivered, so that member, which lends and fetches
		// only once every member is settled (gate), settles them first.
		for _, peer := range ring.Members() {
			if _, ok := marks[peer]; ok || peer == c.cfg.Name {
				continue
			}
			if mark, err := c.outbox.Mark(peer); err == nil && mark > 0 {
				marks[peer] = mark
			}
		}
	}
	for peer, mark := range marks {
		for {
			ok, err := c.outbox.Passed(peer, mark)
			if err != nil {
				c.log.Warn("rebalance: read outbox", "error", err)
			}
			if ok {
				break
			}
			stalled("the outbox to deliver the moved records", "peer", peer, "mark", mark)
			if !sleepCtx(ctx, 50*time.Millisecond) || superseded() {
				logDone("rebalance interrupted by a membership change")
				return
			}
		}
	}
	if c.cfg.Lend && c.Away() > 0 {
		// A member away may hold URLs lent by a member that restarted
		// (its marks were lost), their outcomes in its outbox: the
		// restarted member opens its gate only once this node is settled,
		// so not before the members away came back or were taken over.
		c.log.Info("rebalance: waiting for the members away before settling", "away", c.Away(), "takeover_after", c.cfg.TakeoverAfter)
		for c.Away() > 0 {
			stalled("the members away", "away", c.Away())
			if !sleepCtx(ctx, 50*time.Millisecond) || superseded() {
				logDone("rebalance interrupted by a membership change")
				return
			}
		}
	}
	logDone("rebalance done")
	c.setMeta(func(m *membership.NodeMeta) { m.Settled = ring.ID() })
}

// setMeta changes this node's gossiped metadata.
func (c *Cluster) setMeta(change func(*membership.NodeMeta)) {
	c.metaMu.Lock()
	defer c.metaMu.Unlock()
	change(&c.meta)
	if err := c.members.SetMeta(c.meta, 5*time.Second); err != nil {
		c.log.Warn("cannot gossip metadata", "error", err)
	}
}

// settled reports whether every member of the ring has gossiped that it is
// settled for it, and which members are not.
func (c *Cluster) settled() (bool, []string) {
	ring := c.ring.Load()
	h := ring.ID()
	var waiting []string
	since := c.gateSince.Load()
	if since != 0 && time.Since(time.Unix(0, since)) > 3*c.members.DeadAfter() {
		// No news from some member since the freeze: it most likely never
		// declared this node dead (a freeze just over the limit), so its
		// settled mark still holds.
		since = 0
	}
	for _, m := range c.members.Alive() {
		stale := since != 0 && m.Name != c.cfg.Name && m.Seen.UnixNano() <= since
		if ring.Has(m.Name) && (m.Settled != h || stale) {
			waiting = append(waiting, m.Name)
		}
	}
	return len(waiting) == 0, waiting
}

// gate holds a starting node's own URLs (startHold), or a node back from a
// freeze or a fence off the phase rotation (SetHold), until every member
// is settled for the member set it sees (so the fingerprints of what the
// others fetched for its share, e.g. while it was down, are here before it
// fetches any URL of its frontier), or JoinTimeout passed. A starting node
// works on its phase meanwhile, on the URLs the others lend it: their
// owners keep those records.
func (c *Cluster) gate(ctx context.Context) {
	start := time.Now()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		ok, waiting := c.settled()
		if ok || time.Since(start) > c.cfg.JoinTimeout {
			if ok {
				c.log.Info("joined: the members moved this node's records to it; fetching", "members", c.ring.Load().Members(),
					"waited", time.Since(start).Round(time.Millisecond))
			} else {
				c.log.Warn("join timeout: members not settled; fetching anyway (URLs they fetched for this node's share may be fetched again)",
					"waiting_for", waiting, "join_timeout", c.cfg.JoinTimeout)
			}
			c.gateSince.Store(0)
			if c.cfg.Lend {
				c.holdForAway()
			}
			c.joining.Store(false)
			if !c.leaving.Load() {
				c.sched.SetHold(false)
			}
			if c.startHold.Swap(false) && c.cfg.Wake != nil {
				c.cfg.Wake() // its own URLs may be fetched now
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// handoff is the first half of a graceful leave: stop receiving, take this
// node out of its own ring, move every record to its owner among the
// others and wait until the outbox has delivered everything (at most
// HandoffTimeout). The node has stopped fetching before.
func (c *Cluster) handoff() error {
	start := time.Now()
	c.leaving.Store(true)
	c.sched.SetHold(true)
	if c.rebCancel != nil {
		c.rebCancel()
	}
	c.rebWG.Wait()
	c.rebalancing.Store(true)
	defer c.rebalancing.Store(false)
	// Say so first: the members then keep what it hands off where it
	// arrives, and move nothing to it any more.
	c.setMeta(func(m *membership.NodeMeta) { m.Leaving = true })
	time.Sleep(c.members.PropagateWait())
	c.update()
	ring := c.ring.Load()
	if ring.Len() == 0 {
		c.log.Info("leaving: no other member, the records stay here")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.HandoffTimeout)
	defer cancel()
	var tot moved
	var err error
	for pass := 1; ; pass++ {
		var m moved
		m, err = c.moveAway(ctx, ring, map[string]uint64{}, false, false)
		tot.add(m)
		if err != nil || m.kept == 0 || pass == 10 || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	if err == nil {
		err = c.outbox.WaitEmpty(ctx)
	}
	c.log.Info("leave hand-off done", "members", ring.Members(), "urls_moved", tot.urls, "fingerprints_moved", tot.fps,
		"urls_waiting", c.outbox.Len(), "duration", time.Since(start).Round(time.Millisecond))
	if err != nil {
		return fmt.Errorf("cluster: leave hand-off (the outbox keeps what was not delivered): %w", err)
	}
	return nil
}

// watchPhases counts and logs this node's phase swaps, and fences the node
// after the process was frozen: when two of its ticks are further apart
// than the others need to declare a silent member dead, they may have done
// so and given its phase to someone else, so it stays off its phase for two
// epochs (Schedule.Fence) and until the members are settled again (gate).
func (c *Cluster) watchPhases(ctx context.Context) {
	const tick = 50 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	last, lastN := -1, 0
	// A shorter freeze cannot have changed the membership (the others need
	// a suspicion timeout to declare a silent member dead), and a request it
	// held past its phase's deadline is cancelled by that deadline.
	limit := max(c.members.DeadAfter(), 4*tick)
	prev := time.Now()
	for {
		now := time.Now()
		if frozen := now.Sub(prev); frozen > limit {
			c.pauses.Add(1)
			until := c.sched.Fence(now, 2)
			c.log.Warn("this process was frozen", "frozen", frozen.Round(time.Millisecond), "limit", limit,
				"action", "no request until the members agree again", "until_epoch", until)
			// As after a restart, the others may have fetched URLs of this
			// node's share meanwhile. Wait until every member has told its
			// state anew (a settled mark from before the freeze does not
			// count, for at most 3 suspicion timeouts) and is settled for
			// the member set with this node in it, that is, has moved
			// those fingerprints here.
			if !c.leaving.Load() && c.joining.CompareAndSwap(false, true) {
				c.gateSince.Store(now.UnixNano())
				c.sched.SetHold(true)
				c.wg.Go(func() { c.gate(ctx) })
			}
		}
		prev = now
		st := c.sched.At(now)
		if cur := st.Current(); cur != last || (cur >= 0 && st.NPhase != lastN) {
			if cur >= 0 {
				c.swaps.Add(1)
				c.log.Info("phase swap", "epoch", st.Epoch, "phase", cur, "nphase", st.NPhase, "members", st.Members)
			}
			last, lastN = cur, st.NPhase
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
