package membership

import (
	"slices"
	"time"
)

// ReconnectTargets returns the gossip addresses to try to join again: those
// of the members declared dead (not those that left) less than timeout ago,
// and, when there is any such member or no other member is alive, the
// configured join addresses (but not the addresses of members alive).
// memberlist never contacts a member again once it declared it dead, so
// after a network partition heals the two sides only find each other
// through these joins (Serf's reconnect).
func ReconnectTargets(all []Member, self, selfAddr string, join []string, now time.Time, timeout time.Duration) []string {
	var out []string
	alive := 0
	aliveAddrs := []string{selfAddr}
	for _, m := range all {
		switch {
		case m.Name == self:
		case m.State == StateAlive || m.State == StateSuspect:
			alive++
			aliveAddrs = append(aliveAddrs, m.Gossip)
		case m.State == StateDead && m.Gossip != "" && (timeout <= 0 || now.Sub(m.Seen) < timeout):
			out = append(out, m.Gossip)
		}
	}
	if len(out) > 0 || alive == 0 {
		out = append(out, join...)
	}
	out = slices.DeleteFunc(out, func(a string) bool { return a == "" || slices.Contains(aliveAddrs, a) })
	slices.Sort(out)
	return slices.Compact(out)
}

// Join contacts the gossip addresses addrs (a push/pull with each) and
// returns how many answered; nothing once the node left.
func (m *Members) Join(addrs []string) (int, error) {
	m.mu.Lock()
	stopped := m.stopped
	m.mu.Unlock()
	if stopped {
		return 0, nil
	}
	return m.ml.Join(addrs)
}
