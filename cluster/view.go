package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/cluster/phase"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
)

// joinAt returns the switch instant from which this starting node takes
// part in the phases (NodeMeta.FromAt), now that it has joined the gossip:
// at once when it sees no other member (nobody works on any phase with
// it), else the instant AnnounceAt gives for the announce lead its news
// needs to reach the members it sees (announceLeadFor).
func (c *Cluster) joinAt(now time.Time) time.Time {
	others := 0
	for _, m := range c.members.Alive() {
		if m.Name != c.cfg.Name {
			others++
		}
	}
	if others == 0 {
		return c.sched.ClusterNow(now)
	}
	return c.sched.AnnounceAt(now, announceLeadFor(c.cfg.Tune, others))
}

// follow applies membership changes until ctx is done.
func (c *Cluster) follow(ctx context.Context) {
	for {
		var expire <-chan time.Time
		var timer *time.Timer
		if a := c.away.Load(); a != nil {
			timer = time.NewTimer(time.Until(a.Next))
			expire = timer.C
		}
		stop := func() {
			if timer != nil {
				timer.Stop()
			}
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-c.members.Changes():
			stop()
			c.update()
		case <-c.updKick:
			stop()
			c.update()
		case <-expire:
			// A member's wait ended: its share is crawled here from now
			// (update logs it).
			c.update()
		}
	}
}

// update applies the current membership: the ownership ring and exchange
// addresses now, the schedule's member list from the next epoch boundary; a
// change of the ring starts a rebalance.
func (c *Cluster) update() {
	c.updMu.Lock()
	defer c.updMu.Unlock()
	alive := c.members.Alive()
	names := make([]string, 0, len(alive))
	addrs := make(map[string]string, len(alive))
	for _, m := range alive {
		names = append(names, m.Name)
		if m.Exchange != "" {
			addrs[m.Name] = m.Exchange
		}
	}
	c.addrs.Store(&addrs)
	c.alive.Store(int64(len(names)))
	// Before anything else is filed for them (a rebalance's records):
	// members come alive get this node's seed hosts first.
	c.shareScopeWith(c.newlyAlive(alive))
	// A member handing its records off before it leaves keeps its share
	// until it is gone (URLs discovered for it wait in the outboxes, and
	// what it hands off stays where it arrives); the leaving node itself
	// hands off to the members that stay.
	leaving := c.leaving.Load()
	owners := make([]string, 0, len(alive))
	procs := make([]string, 0, len(alive)) // name/started of each owner: the ring's ID
	peersLeaving := map[string]bool{}
	for _, m := range alive {
		if m.Leaving && m.Name != c.cfg.Name {
			peersLeaving[m.Name] = true
		}
		if !leaving || (m.Name != c.cfg.Name && !m.Leaving) {
			owners = append(owners, m.Name)
			procs = append(procs, fmt.Sprintf("%s/%d", m.Name, m.Started))
		}
	}
	c.peersLeaving.Store(&peersLeaving)
	if len(peersLeaving) > 0 {
		stay := make([]string, 0, len(owners))
		for _, o := range owners {
			if !peersLeaving[o] {
				stay = append(stay, o)
			}
		}
		c.stayRing.Store(ring.New(stay))
	} else {
		c.stayRing.Store(nil)
	}
	var from time.Time
	if !leaving {
		// A member declared dead stays in the schedule for a while, and
		// while this node does not see a majority (quorum.go); a member
		// still joining the gossip enters it at the instant it announces.
		names, dropped := c.scheduleNames(c.withoutUnannounced(names), time.Now())
		announced, agreed := c.announced(names), c.agreed(names)
		notBefore := laterOf(announced, agreed)
		latest := c.sched.Latest()
		switch {
		case latest == nil && equalStrings(names, []string{c.cfg.Name}) && len(alive) == 1 && !announced.IsZero():
			// Alone at its start, and nobody else in sight: its first list
			// is in effect from the instant it announced, at once (joinAt).
			from = c.sched.SetMembersFromInstant(announced, names)
		case (announced.IsZero() || dropped) && agreed.IsZero() && latest != nil && !equalStrings(latest, ring.New(names).Members()):
			// A failure: nobody announced the epoch, and no member
			// scheduled this list yet. Choose one far enough ahead for
			// the members' choices (gossiped as NodeMeta.ViewAt) to
			// meet before its guard starts; a member that comes to the
			// same list later takes the instant gossiped.
			notBefore = laterOf(notBefore, phase.EpochStart(c.sched.AnnounceEpoch(time.Now(), c.lead), c.sched.PhaseDuration()))
			fallthrough
		default:
			// A switch a member announced is taken even when heard in its
			// guard (late): the members then all switch there.
			from = c.sched.SetMembersAt(names, notBefore, !announced.IsZero() && notBefore.Equal(announced))
		}
		if old := c.view.Load(); old == nil || old.View != RingHash(names) || old.ViewAt != from.UnixNano() {
			c.log.Info("phase schedule", "schedule", names, "from", from, "from_epoch", phase.Epoch(from, c.sched.PhaseDuration()))
		}
		if dropped {
			c.log.Info("phase schedule without the members declared dead", "schedule", names, "from", from,
				"from_epoch", phase.Epoch(from, c.sched.PhaseDuration()), "after", c.excludeAfter())
		}
		v := &membership.NodeMeta{View: RingHash(names), ViewFrom: phase.Epoch(from, c.sched.PhaseDuration()), ViewAt: from.UnixNano(), ViewSize: len(names)}
		if old := c.view.Swap(v); old == nil || *old != *v {
			signal(c.viewKick)
		}
	}
	known := map[string]bool{}
	for _, m := range c.members.All() {
		known[m.Name] = true
		if m.State == membership.StateDead {
			c.x.Reset(m.Name) // an ack it owes may never come (a cut)
		}
	}
	c.known.Store(&known)
	now := time.Now()
	prevAway := c.away.Load()
	c.away.Store(c.computeAway(owners, now))
	if over := prevAway.Over(c.away.Load(), owners, now); len(over) > 0 {
		// Whichever event brought this update (the takeover timer, or
		// another that came at the same moment), the wait of these
		// members ended: their URLs are crawled here now.
		c.log.Info("members away too long: crawling their share", "members", over, "away", c.Away(), "takeover_after", c.cfg.TakeoverAfter)
		if c.cfg.Wake != nil {
			c.cfg.Wake()
		}
	}
	ring := ring.NewWithID(owners, RingHash(procs))
	if old := c.ring.Load(); !equalStrings(old.Members(), ring.Members()) || old.ID() != ring.ID() {
		if !equalStrings(old.Members(), ring.Members()) {
			// Owners changed: a swap counts from now. (A new ID alone, a
			// member's restart, leaves every record's owner as it was.)
			c.ringPhases.Store(int64(c.front.Phases()))
		}
		c.ring.Store(ring)
		c.sent.reset(ring) // owners may have changed
		if c.cfg.MaxPagesPerHost > 0 {
			c.front.SetMaxPerHost(ShareCap(c.cfg.MaxPagesPerHost, ring.Len()))
		}
		if !leaving {
			c.log.Info("membership changed", "members", names, "schedule_from", from, "schedule_from_epoch", phase.Epoch(from, c.sched.PhaseDuration()))
			signal(c.rebKick)
		}
	}
	c.x.Kick()
}

// announceLeadGossips is how far ahead, in gossip intervals, a joining or
// leaving node announces the epoch its change applies from (NodeMeta.From):
// time for the news to reach every member by gossip. memberlist's LAN
// timings gossip every 200ms (a lead of 2s); FastTimings every 50ms (0.5s).
const announceLeadGossips = 10

// announceLeadOf is the announce lead of a member whose memberlist
// configuration tune changes (nil: the LAN timings).
func announceLeadOf(tune func(*memberlist.Config)) time.Duration {
	mc := memberlist.DefaultLANConfig()
	if tune != nil {
		tune(mc)
	}
	return announceLeadGossips * mc.GossipInterval
}

// announceLeadFor is the announce lead of a joining node that sees others
// other members: the time its news needs to reach them all by gossip.
// memberlist sends each broadcast to GossipNodes (3) random members every
// gossip interval, so ceil(log3(others+1)) rounds reach them all when no
// packet is lost; the lead allows twice that plus two intervals, at least
// minAnnounceLead (a loaded machine handles the news late) and never more
// than announceLeadGossips intervals: on the LAN timings 0.8 s for up to
// 2 others, 1.2 s up to 8, 1.6 s up to 26; with FastTimings always 0.5 s.
func announceLeadFor(tune func(*memberlist.Config), others int) time.Duration {
	mc := memberlist.DefaultLANConfig()
	if tune != nil {
		tune(mc)
	}
	rounds, reach := 0, 1
	for reach < others+1 {
		reach *= max(mc.GossipNodes, 2)
		rounds++
	}
	full := announceLeadGossips * mc.GossipInterval
	return min(max(time.Duration(2+2*rounds)*mc.GossipInterval, minAnnounceLead), full)
}

// minAnnounceLead is the shortest announce lead of a join.
const minAnnounceLead = 500 * time.Millisecond

// withoutUnannounced returns names without the members that have not
// announced their join yet (NodeMeta.FromAt and From unset: a node that
// is still joining the gossip) and are not in the schedule's latest list
// (a member restarted under its name stays where it is); names itself is
// left as it is.
func (c *Cluster) withoutUnannounced(names []string) []string {
	var skip map[string]bool
	latest := c.sched.Latest()
	for _, m := range c.members.Alive() {
		if m.Name != c.cfg.Name && m.Started != 0 && m.FromAt == 0 && m.From == 0 && !slices.Contains(latest, m.Name) {
			if skip == nil {
				skip = map[string]bool{}
			}
			skip[m.Name] = true
		}
	}
	if skip == nil {
		return names
	}
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return skip[n] })
}

// laterOf returns the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// fromOf returns the switch instant a member announced: FromAt, or the
// start of the epoch From (a leave); zero when it announced none.
func fromOf(m membership.Member, d time.Duration) time.Time {
	return instantOrEpoch(m.FromAt, m.From, d)
}

// viewAtOf returns the instant from which a member's gossiped list is in
// effect: ViewAt, or the start of the epoch ViewFrom; zero for none.
func viewAtOf(m membership.Member, d time.Duration) time.Time {
	return instantOrEpoch(m.ViewAt, m.ViewFrom, d)
}

// instantOrEpoch returns the instant at (unix ns), or else the start of
// epoch (of phase duration d); zero when both are unset.
func instantOrEpoch(at, epoch int64, d time.Duration) time.Time {
	switch {
	case at != 0:
		return time.Unix(0, at).UTC()
	case epoch != 0:
		return phase.EpochStart(epoch, d)
	}
	return time.Time{}
}

// announced returns the latest switch instant announced (NodeMeta.FromAt,
// or From) by the members that join or leave in the change from the
// schedule's latest list to names; zero when none announced one (a
// failure).
func (c *Cluster) announced(names []string) time.Time {
	latest := c.sched.Latest()
	var from time.Time
	for _, m := range c.members.All() {
		if slices.Contains(names, m.Name) != slices.Contains(latest, m.Name) {
			from = laterOf(from, fromOf(m, c.sched.PhaseDuration()))
		}
	}
	return from
}

// agreed returns the latest instant any member gossiped (NodeMeta.ViewAt,
// or ViewFrom) for the member list names; zero when none did.
func (c *Cluster) agreed(names []string) time.Time {
	h := RingHash(names)
	var from time.Time
	for _, m := range c.members.All() {
		if m.View == h {
			from = laterOf(from, viewAtOf(m, c.sched.PhaseDuration()))
		}
	}
	return from
}

// announceView gossips the member list this node scheduled last and its
// epoch (NodeMeta.View, ViewFrom) whenever update changes them, until ctx
// is done. It runs apart from update because gossiping metadata waits for
// the broadcast.
func (c *Cluster) announceView(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.viewKick:
			if v := c.view.Load(); v != nil {
				c.setMeta(func(m *membership.NodeMeta) {
					m.View, m.ViewFrom, m.ViewAt, m.ViewSize = v.View, v.ViewFrom, v.ViewAt, v.ViewSize
				})
			}
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
