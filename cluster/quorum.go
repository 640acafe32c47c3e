package cluster

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/membership"
)

// Quorum fencing (docs/design/partitions.md). The agreed view is the member
// list this node scheduled last for its phases (Schedule.Latest). A node
// that does not see a majority of it starts no request: the phase clock
// reports it held (Schedule.SetQuorumLost) until it sees a majority again
// and the members agree on the view once more. A member is seen when it sent
// a heartbeat (a small gossip user message, every FenceAfter/5) within the
// last FenceAfter; one never heard from yet counts from when gossip told of
// it alive (a newcomer's first heartbeat is on its way); the node itself
// always counts. The members that see a majority drop a member declared dead from
// their schedule (and work on its hosts) only excludeAfter after they
// declared it dead, by which time it has fenced itself.

// quorum is this node's view of which members it hears from, and whether
// it is fenced.
type quorum struct {
	*membership.Heard
	after time.Duration // FenceAfter

	fenced    atomic.Bool
	why       atomic.Pointer[string] // why it is fenced; "" when it is not
	rejoining atomic.Bool            // saw a majority again; waits for the members to agree on the view
}

func newQuorum(self string, after time.Duration) *quorum {
	q := &quorum{Heard: membership.NewHeard(self), after: after}
	q.why.Store(new(string))
	return q
}

// seen returns the members of view this node sees now and the majority.
func (c *Cluster) seen(view []string, now time.Time) ([]string, int) {
	heard := c.q.LastHeard()
	alive := map[string]time.Time{}
	larger := 0
	for _, m := range c.members.Alive() {
		alive[m.Name] = m.Seen
		if m.Name != c.cfg.Name {
			larger = max(larger, m.ViewSize)
		}
	}
	return membership.SeenOf(view, c.cfg.Name, func(name string) time.Time {
		if t, ok := heard[name]; ok {
			// Only its heartbeats count: gossip may still bring news of a
			// member that declared this node dead (memberlist gossips to
			// the dead for a while), and that member no longer sends it
			// heartbeats.
			return t
		}
		return alive[name] // never heard from: since gossip told of it alive
	}, now, c.cfg.FenceAfter, larger)
}

// quorate reports whether this node sees a majority of its agreed view now.
func (c *Cluster) quorate(now time.Time) bool {
	seen, need := c.seen(c.sched.Latest(), now)
	return len(seen) >= need
}

// excludeAfter is how long the members keep a member declared dead in the
// phase schedule (its phase idle): cluster.takeover_after, and at least
// membership.MinExclude, so that a member cut off from them has fenced
// itself before any of them works on its hosts.
func (c *Cluster) excludeAfter() time.Duration {
	return max(c.cfg.TakeoverAfter, membership.MinExclude(c.cfg.FenceAfter))
}

// scheduleNames returns the member list to schedule for the alive members
// names: the members of the latest list declared dead stay in it (their
// phase idle) for excludeAfter, and for as long as this node does not see a
// majority of that list or is still fenced (a node cut off from the others
// never drops them; one that sees some of them again drops nobody before
// the members agree on the view: the ones it sees may have dropped others).
// dropped tells that a member declared dead leaves the list.
func (c *Cluster) scheduleNames(names []string, now time.Time) (out []string, dropped bool) {
	latest := c.sched.Latest()
	out = slices.Clone(names)
	if len(latest) == 0 {
		return out, false
	}
	var quorate *bool
	isQuorate := func() bool {
		if quorate == nil {
			q := !c.q.fenced.Load() && c.quorate(now)
			quorate = &q
		}
		return *quorate
	}
	var waiting []string // declared dead here, not yet past excludeAfter
	for _, m := range c.members.All() {
		if m.State != membership.StateDead || m.Name == c.cfg.Name || !slices.Contains(latest, m.Name) || slices.Contains(names, m.Name) {
			continue
		}
		if now.Before(m.Seen.Add(c.excludeAfter())) {
			out = append(out, m.Name)
			waiting = append(waiting, m.Name)
			continue
		}
		if !isQuorate() {
			out = append(out, m.Name)
			continue
		}
		dropped = true
	}
	slices.Sort(out)
	if len(waiting) > 0 && isQuorate() {
		// Each member counts excludeAfter from the moment it declared the
		// dead one dead, and they may learn of a death seconds apart: a
		// member that drops it first gossips its list (NodeMeta.View).
		// The others follow that list at its epoch rather than at their
		// own, later one, so that no two members work on one phase with
		// two different lists (two members on one host at once).
		slices.Sort(waiting)
		if next, ok := c.followDrop(out, waiting); ok {
			return next, true
		}
	}
	return out, dropped
}

// followDrop returns the list list less some of the members declared dead
// in waiting that a member seen alive has already scheduled (its
// NodeMeta.View), preferring the list that drops the most of them; ok is
// false when no member scheduled any such list.
func (c *Cluster) followDrop(list, waiting []string) (out []string, ok bool) {
	views := map[string]bool{}
	for _, m := range c.members.Alive() {
		if m.Name != c.cfg.Name && m.View != "" && !viewAtOf(m, c.sched.PhaseDuration()).IsZero() {
			views[m.View] = true
		}
	}
	if len(views) == 0 || len(waiting) > 16 {
		return nil, false
	}
	best := -1
	// Every subset of waiting, largest first by count of members dropped.
	for mask := 1; mask < 1<<len(waiting); mask++ {
		n := bits.OnesCount(uint(mask))
		if n <= best {
			continue
		}
		cand := slices.DeleteFunc(slices.Clone(list), func(name string) bool {
			i := slices.Index(waiting, name)
			return i >= 0 && mask&(1<<i) != 0
		})
		if views[RingHash(cand)] {
			out, best = cand, n
		}
	}
	return out, best > 0
}

// exclusionDue reports whether a member declared dead is still in the latest
// list past excludeAfter (update then drops it, if this node is quorate).
func (c *Cluster) exclusionDue(now time.Time) bool {
	latest := c.sched.Latest()
	for _, m := range c.members.All() {
		if m.State == membership.StateDead && slices.Contains(latest, m.Name) && !now.Before(m.Seen.Add(c.excludeAfter())) {
			return true
		}
	}
	return false
}

// viewsAgree reports whether every member of the latest list that this node
// sees alive has the same list scheduled (NodeMeta.View) and in effect
// (NodeMeta.ViewAt at or before the start of this node's slot), and the latest list
// is in effect here too: the members' phases do not overlap again.
func (c *Cluster) viewsAgree(now time.Time) (bool, []string) {
	latest := c.sched.Latest()
	st := c.sched.At(now)
	if !equalStrings(st.Members, latest) {
		return false, []string{c.cfg.Name}
	}
	h := RingHash(latest)
	var waiting []string
	for _, m := range c.members.Alive() {
		if m.Name == c.cfg.Name || !slices.Contains(latest, m.Name) {
			continue
		}
		if m.View != h || viewAtOf(m, c.sched.PhaseDuration()).UnixNano() > st.Slot {
			waiting = append(waiting, m.Name)
		}
	}
	return len(waiting) == 0, waiting
}

// sendHeartbeats sends this node's heartbeat to every other member it sees
// alive (not to those it declared dead: they fence themselves).
func (c *Cluster) sendHeartbeats(msg []byte) {
	for _, m := range c.members.Alive() {
		if m.Name == c.cfg.Name || m.Gossip == "" {
			continue
		}
		if err := c.members.Send(m.Name, m.Gossip, msg); err != nil {
			c.log.Debug("heartbeat not sent", "member", m.Name, "error", err)
		}
	}
}

// watchQuorum sends the heartbeats and fences this node while it does not
// see a majority of its agreed view, until ctx is done. When it sees a
// majority again after a fence, it stays fenced until the members agree on
// the view and, as after a freeze, for two epochs and until every member is
// settled again (gate): meanwhile the others may have worked on its hosts
// and fetched URLs of its share.
func (c *Cluster) watchQuorum(ctx context.Context) {
	tick := membership.HeartbeatInterval(c.cfg.FenceAfter)
	t := time.NewTicker(tick)
	defer t.Stop()
	msg := membership.Heartbeat(c.cfg.Name)
	for {
		now := time.Now()
		// Also while handing off before a leave: until it is gone, this
		// node is in the others' views.
		c.sendHeartbeats(msg)
		view := c.sched.Latest()
		seen, need := c.seen(view, now)
		quorate := len(seen) >= need
		was := c.q.fenced.Load()
		switch {
		case !quorate:
			c.q.rejoining.Store(false) // lost again while rejoining: start over
			why := membership.FenceReason(len(seen), len(view), need)
			if !was || *c.q.why.Load() != why {
				c.q.why.Store(&why)
			}
			if !was {
				c.q.fenced.Store(true)
				c.sched.SetQuorumLost(true)
				c.log.Warn("fenced: no request until a majority of the agreed view is seen", "reason", why,
					"view", view, "seen", seen, "fence_after", c.cfg.FenceAfter)
				c.kickUpdate()
			}
		case was && !c.q.rejoining.Load():
			// A majority again: the members may have worked on this node's
			// hosts and crawled its share meanwhile. Wait, as after a freeze,
			// for two epochs and for every member to be settled again.
			c.q.rejoining.Store(true)
			why := "sees a majority of the agreed view again; waiting for the members to agree on it"
			c.q.why.Store(&why)
			c.log.Info("quorum: a majority of the agreed view is seen again", "view", view, "seen", seen)
			c.kickUpdate()
			until := c.sched.Fence(now, 2)
			if !c.leaving.Load() && c.joining.CompareAndSwap(false, true) {
				c.gateSince.Store(now.UnixNano())
				c.sched.SetHold(true)
				c.log.Info("rejoining: no request until the members are settled again", "until_epoch", until)
				c.wg.Go(func() { c.gate(ctx) })
			}
		case was:
			if ok, waiting := c.viewsAgree(now); ok {
				c.q.rejoining.Store(false)
				c.q.fenced.Store(false)
				c.q.why.Store(new(string))
				c.sched.SetQuorumLost(false)
				c.log.Info("unfenced: the members agree on the view", "view", view)
			} else {
				why := fmt.Sprintf("sees a majority of the agreed view again; waiting for %v to agree on it", waiting)
				if *c.q.why.Load() != why {
					c.q.why.Store(&why)
				}
			}
		default:
			if !c.leaving.Load() && c.exclusionDue(now) {
				c.kickUpdate()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// kickUpdate makes follow apply the membership again (a member's exclusion
// may have become due, or been refused for want of a majority).
func (c *Cluster) kickUpdate() { signal(c.updKick) }

// Fenced returns why this node is fenced; "" when it is not.
func (c *Cluster) Fenced() string { return *c.q.why.Load() }
