package membership

import (
	"slices"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/ring"
)

// Away is the view of the members declared dead (StateDead: a crash, a
// kill -9, a freeze) less than TakeoverAfter ago: Ring is the owners' ring
// with them added back, Until is when each one's wait ends.
type Away struct {
	Ring  *ring.Ring
	Until map[string]time.Time
	Next  time.Time // the earliest Until
}

// AwayView is the away view of a given member list (all members, failed and
// gone ones included) for the node self.
func AwayView(all []Member, owners []string, self string, takeover time.Duration, now time.Time) *Away {
	if takeover <= 0 {
		return nil
	}
	var a *Away
	for _, m := range all {
		if m.State != StateDead || slices.Contains(owners, m.Name) || m.Name == self {
			continue
		}
		until := m.Seen.Add(takeover)
		if !now.Before(until) {
			continue
		}
		if a == nil {
			a = &Away{Until: map[string]time.Time{}}
		}
		a.Until[m.Name] = until
		if a.Next.IsZero() || until.Before(a.Next) {
			a.Next = until
		}
	}
	if a == nil {
		return nil
	}
	names := slices.Clone(owners)
	for n := range a.Until {
		names = append(names, n)
	}
	a.Ring = ring.New(names)
	return a
}

// Over returns the members of a whose wait ended by now: away in a, not
// in next (the view that replaces it), and not back among the owners.
func (a *Away) Over(next *Away, owners []string, now time.Time) []string {
	if a == nil {
		return nil
	}
	var out []string
	for name, until := range a.Until {
		if now.Before(until) || slices.Contains(owners, name) {
			continue
		}
		if next != nil {
			if _, ok := next.Until[name]; ok {
				continue
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func (a *Away) Held(fp uint64, now time.Time) bool {
	if a == nil {
		return false
	}
	until, ok := a.Until[a.Ring.Owner(fp)]
	return ok && now.Before(until)
}
