package cluster

import (
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/membership"
)

// computeAway builds the away view from the gossip's failed members and
// the owners' ring; nil when no member is away.
func (c *Cluster) computeAway(owners []string, now time.Time) *membership.Away {
	return membership.AwayView(c.members.All(), owners, c.cfg.Name, c.cfg.TakeoverAfter, now)
}

// Held implements node.Holder: whether the URL with fingerprint fp, in
// this node's frontier, must not be crawled here now. It must not when
// another member owns it (a rebalance moves it there: the owner may have
// it recorded already, e.g. back from a restart), and while the member that
// owns it with the members away counted is one of them: that member may
// have fetched it just before it failed (its replica not sent yet) and has
// it recorded, so it gets the URL back if it returns in time; after
// cluster.takeover_after the URL is crawled here.
func (c *Cluster) Held(fp uint64) bool {
	if o := c.ring.Load().Owner(fp); o != "" && o != c.cfg.Name {
		return true
	}
	if c.lendHeld.Load() {
		return true // a member away at the join may hold it, lent before a restart
	}
	if c.startHold.Load() {
		return true // starting: the members may still move its fingerprint here (gate)
	}
	now := time.Now()
	if c.lends.Enabled() && c.lends.Lent(fp, now) {
		return true // lent to the member that works on its host's phase
	}
	return c.away.Load().Held(fp, now)
}

// Away returns how many members are away (declared dead less than
// cluster.takeover_after ago): their share of the URLs waits.
func (c *Cluster) Away() int {
	a := c.away.Load()
	if a == nil {
		return 0
	}
	n := 0
	now := time.Now()
	for _, u := range a.Until {
		if now.Before(u) {
			n++
		}
	}
	return n
}
