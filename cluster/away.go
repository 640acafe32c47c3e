package cluster

import (
	"slices"
	"time"
)

// away is the view of the members declared dead (StateDead: a crash, a
// kill -9, a freeze) less than TakeoverAfter ago: ring is the owners' ring
// with them added back, until is when each one's wait ends.
type away struct {
	ring  *Ring
	until map[string]time.Time
	next  time.Time // the earliest until
}

// computeAway builds the away view from the gossip's failed members and
// the owners' ring; nil when no member is away.
func (c *Cluster) computeAway(owners []string, now time.Time) *away {
	return awayView(c.members.All(), owners, c.cfg.Name, c.cfg.TakeoverAfter, now)
}

// awayView is computeAway on a given member list (all members, failed and
// gone ones included) for the node self.
func awayView(all []Member, owners []string, self string, takeover time.Duration, now time.Time) *away {
	if takeover <= 0 {
		return nil
	}
	var a *away
	for _, m := range all {
		if m.State != StateDead || slices.Contains(owners, m.Name) || m.Name == self {
			continue
		}
		until := m.Seen.Add(takeover)
		if !now.Before(until) {
			continue
		}
		if a == nil {
			a = &away{until: map[string]time.Time{}}
		}
		a.until[m.Name] = until
		if a.next.IsZero() || until.Before(a.next) {
			a.next = until
		}
	}
	if a == nil {
		return nil
	}
	names := slices.Clone(owners)
	for n := range a.until {
		names = append(names, n)
	}
	a.ring = NewRing(names)
	return a
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
	now := time.Now()
	if c.lends.marks != nil && c.lends.lent(fp, now) {
		return true // lent to the member that works on its host's phase
	}
	return c.away.Load().held(fp, now)
}

// over returns the members of a whose wait ended by now: away in a, not
// in next (the view that replaces it), and not back among the owners.
func (a *away) over(next *away, owners []string, now time.Time) []string {
	if a == nil {
		return nil
	}
	var out []string
	for name, until := range a.until {
		if now.Before(until) || slices.Contains(owners, name) {
			continue
		}
		if next != nil {
			if _, ok := next.until[name]; ok {
				continue
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func (a *away) held(fp uint64, now time.Time) bool {
	if a == nil {
		return false
	}
	until, ok := a.until[a.ring.Owner(fp)]
	return ok && now.Before(until)
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
	for _, u := range a.until {
		if now.Before(u) {
			n++
		}
	}
	return n
}
