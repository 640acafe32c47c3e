package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/lend"
	"github.com/phasecrawl/phasecrawl/cluster/phase"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// Lending (cluster.lend, docs/design/lending.md; the state and the wire
// formats are package lend's): every lend.Interval the owner lends the
// IN_LIST URLs of the hosts whose phase another member works on now to
// that member (KindLend, through the ordered, durable outbox), which
// fetches them with its own URLs of those hosts (one connection per host,
// as ever) and reports each outcome back (KindOutcome, through its own
// outbox); the owner settles the record as if it had fetched the page
// (lentoutcome.go). A member that sends the owner new URLs of the hosts of
// its phase gets them lent back in the batch's ack (lendback.go).

// lendSlack is how long after until a mark still holds its URL (lend.Mark.Hold).
func (c *Cluster) lendSlack() time.Duration {
	return max(c.cfg.PhaseDuration, 2*time.Second)
}

// lendGrace is how long after the end of the holder's phase a mark holds:
// the holder's outcome report may still be on its way (batch delay, the
// clocks' uncertainty).
func (c *Cluster) lendGrace(u time.Duration) time.Duration {
	bd := c.cfg.BatchDelay
	if bd <= 0 {
		bd = exchange.DefaultConfig().MaxDelay
	}
	return time.Second + 2*bd + 4*max(u, 0)
}

// lendHolds is the set of holders whose expired marks still hold: members
// away (declared dead less than takeover_after ago; their reports wait in
// their outbox) and members not settled for the current member set (a
// member back from a restart has not delivered what its previous process
// left in its outbox yet).
func (c *Cluster) lendHolds() map[string]bool {
	hold := map[string]bool{}
	if a := c.away.Load(); a != nil {
		now := time.Now()
		for name, until := range a.Until {
			if now.Before(until) {
				hold[name] = true
			}
		}
	}
	ring := c.ring.Load()
	h := ring.ID()
	for _, m := range c.members.Alive() {
		if m.Name != c.cfg.Name && ring.Has(m.Name) && m.Settled != h {
			hold[m.Name] = true
		}
	}
	return hold
}

// holdForAway is called when the join gate opens: the members away now
// may hold URLs of this node's share lent to them by its previous process
// (the marks were in memory), with their outcomes waiting in their
// outboxes. This node fetches and lends none of its URLs until each of
// them came back settled for the member set (its outbox delivered) or its
// takeover_after ran out.
func (c *Cluster) holdForAway() {
	a := c.away.Load()
	if a == nil {
		return
	}
	hold := map[string]bool{}
	now := time.Now()
	for name, until := range a.Until {
		if now.Before(until) {
			hold[name] = true
		}
	}
	if len(hold) == 0 {
		return
	}
	c.awayAtGate.Store(&hold)
	c.lendHeld.Store(true)
	c.log.Info("holding this node's URLs until the members away come back settled (they may hold URLs lent before a restart)",
		"away", len(hold), "takeover_after", c.cfg.TakeoverAfter)
}

// lendHoldUpdate ends lendHeld once every member away at the gate came
// back settled or is no longer away (takeover_after passed); hold is
// lendHolds' answer (members away or not settled).
func (c *Cluster) lendHoldUpdate(hold map[string]bool) {
	p := c.awayAtGate.Load()
	if p == nil || len(*p) == 0 {
		return
	}
	left := map[string]bool{}
	for name := range *p {
		// Still away, or back but not settled (its outbox not delivered).
		if hold[name] {
			left[name] = true
		}
	}
	if len(left) == len(*p) {
		return
	}
	c.awayAtGate.Store(&left)
	if len(left) == 0 {
		c.lendHeld.Store(false)
		c.log.Info("the members away at the join came back settled or were taken over: fetching and lending")
		if c.cfg.Wake != nil {
			c.cfg.Wake()
		}
	}
}

// holderGone reports whether holder is no longer a member: not in the
// ring and not away (declared dead more than takeover_after ago, or gone).
// Its outcomes, if it is ever back, go to the URLs' owners like a
// discovered URL; what it held is this node's to lend or fetch again now.
func (c *Cluster) holderGone(holder string) bool {
	if c.ring.Load().Has(holder) {
		return false
	}
	if a := c.away.Load(); a != nil {
		if until, ok := a.Until[holder]; ok && time.Now().Before(until) {
			return false
		}
	}
	return true
}

// lendLoop lends every lend.Interval until ctx is done.
func (c *Cluster) lendLoop(ctx context.Context) {
	t := time.NewTicker(lend.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.lendKick:
		}
		hold := c.lendHolds()
		c.lendHoldUpdate(hold)
		c.lends.SetPending(hold)
		if c.lends.Expire(time.Now(), c.holderGone) > 0 && c.cfg.Wake != nil {
			c.cfg.Wake() // URLs the scheduler skipped while lent may be fetched here now
		}
		if err := c.lendRound(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("lend URLs", "error", err)
		}
	}
}

// lendRound lends, to each other member of the member view in effect that
// works on a phase now, this node's IN_LIST URLs of that phase's hosts.
// Nothing is lent while this node is held off its phase (joining, fenced,
// frozen, leaving): it then does not know that the view is agreed.
func (c *Cluster) lendRound(ctx context.Context) error {
	st, until, ok := c.lendWindow(time.Now())
	if !ok {
		return nil
	}
	c.lends.DropAgain(st.Phase, st.NPhase, c.cfg.Unit)
	for _, p := range st.Members {
		q, ok := c.lendPhase(st, p)
		if !ok {
			continue
		}
		if err := c.lendTo(ctx, p, q, st.Slot, until); err != nil {
			return err
		}
	}
	return nil
}

// lendWindow reports whether this node may lend now, and if so the phase
// state and until, the end of a lend made now. Nothing is lent while this
// node is held off its phase (joining, fenced, frozen, leaving): it then
// does not know that the view is agreed; nor shortly before the guard.
func (c *Cluster) lendWindow(now time.Time) (st phase.State, until time.Time, ok bool) {
	if !c.lends.Enabled() || c.joining.Load() || c.leaving.Load() || c.lendHeld.Load() {
		return st, until, false
	}
	st = c.sched.At(now)
	if st.Phase < 0 || st.Held || !st.Open || st.NPhase <= 1 || c.front.Phases() != st.NPhase {
		return st, until, false
	}
	// Local time of the guard's start (early by up to 2× the uncertainty).
	guardAt := st.RequestDeadline.Add(-st.NextSwap.Sub(st.GuardStart))
	if guardAt.Sub(now) < lend.MinLeft {
		return st, until, false
	}
	u := time.Duration(0)
	if c.clock != nil {
		u = c.clock.Uncertainty()
	}
	return st, st.RequestDeadline.Add(2*u + c.lendGrace(u)), true
}

// lendPhase returns the phase member p works on in st, when this node may
// lend to it: another member of the ring, not leaving, not away, with no
// expired lends held for it, working on another phase than this node.
func (c *Cluster) lendPhase(st phase.State, p string) (int, bool) {
	if p == c.cfg.Name || !c.ring.Load().Has(p) || (*c.peersLeaving.Load())[p] || c.lends.PendingHolder(p) {
		return -1, false
	}
	if away := c.away.Load(); away != nil {
		if _, ok := away.Until[p]; ok {
			return -1, false
		}
	}
	q := phase.Of(p, st.Members, st.Epoch, st.NPhase)
	if q < 0 || q == st.Phase {
		return -1, false
	}
	return q, true
}

// lendTo lends peer, working on phase q in slot, the IN_LIST URLs of
// that phase not lent already, up to lend.MaxLentPerMember outstanding.
func (c *Cluster) lendTo(ctx context.Context, peer string, q int, slot int64, until time.Time) error {
	hold := until.Add(c.lendSlack())
	room := c.lends.Room(peer)
	if room <= 0 {
		return nil
	}
	cur := c.lends.CursorOf(peer)
	if cur.Slot != slot || cur.Phase != q {
		cur = lend.Cursor{Slot: slot, Phase: q}
		// The first lend of the slot reads the frontier only once every
		// write submitted before it is committed: the scheduler marks the
		// URLs it places IN_PROGRESS asynchronously, and a URL of this
		// node's phase of the slot that ended, fetched here at its end,
		// would be read IN_LIST while its mark waits in a loaded writer,
		// lent to the member that works on that phase now, and fetched
		// again. The scheduler fetches no URL of that phase after its
		// request deadline, so every such mark was submitted before.
		if err := c.front.Barrier(ctx); err != nil {
			return fmt.Errorf("lend to %s: %w", peer, err)
		}
	}
	var recs []frontier.Record
	seen := map[uint64]bool{}
	for _, r := range c.lends.TakeAgain(q, c.front.Phases(), c.cfg.Unit, min(room, lend.Scan)) {
		// Given back: the cursor may have passed it.
		rec, ok, err := c.front.Get(r)
		if err != nil {
			return err
		}
		if ok && rec.State == frontier.InList {
			recs = append(recs, rec)
			seen[rec.FP] = true
		}
	}
	more, next, err := c.front.ScanSince(q, cur.At, max(min(room, lend.Scan)-len(recs), 0))
	if err != nil {
		return err
	}
	for _, r := range more {
		if !seen[r.FP] {
			recs = append(recs, r)
		}
	}
	cur.At = next
	c.lends.SetCursor(peer, cur)
	redirects := c.cfg.Redirects
	var lent []frontier.NewURL
	var fps []uint64
	for _, r := range recs {
		if c.Held(r.FP) {
			continue // lent already, another member's, or its owner is away
		}
		u := frontier.NewURL{URL: r.URL, Host: lend.EntryHost(r.Host, slot, r.Tries, c.cfg.Name), Depth: r.Depth, Run: r.Run}
		if redirects != nil {
			u.Redirects = redirects.RedirectsOf(r.FP)
		}
		lent = append(lent, u)
		fps = append(fps, r.FP)
	}
	if len(lent) == 0 {
		return nil
	}
	// Marked before they are filed: the scheduler must not pick them
	// between the two.
	c.lends.Lend(peer, fps, lend.Mark{Holder: peer, Slot: slot, Until: until, Hold: hold})
	if err := c.outbox.PutKind(ctx, peer, exchange.KindLend, lent); err != nil {
		c.lends.Settle(fps) // not lent after all
		return fmt.Errorf("lend %d URLs to %s: %w", len(lent), peer, err)
	}
	c.x.Flush(peer)
	return nil
}
