package cluster

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/membership"
)

// reconnect tries, every ReconnectInterval, to join one of the members
// declared dead (for at most ReconnectTimeout after their death) or of the
// configured join addresses, picked at random as Serf does (a join to an
// unreachable address waits for memberlist's TCP timeout), until ctx is
// done.
func (c *Cluster) reconnect(ctx context.Context) {
	t := time.NewTicker(c.cfg.ReconnectInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.leaving.Load() {
			return
		}
		targets := membership.ReconnectTargets(c.members.All(), c.cfg.Name, c.members.Addr(), c.cfg.Join, time.Now(), c.cfg.ReconnectTimeout)
		if len(targets) == 0 {
			continue
		}
		target := targets[rand.IntN(len(targets))]
		n, err := c.members.Join([]string{target})
		if n > 0 {
			c.log.Info("reconnect: contacted members", "tried", target, "answered", n)
		} else {
			c.log.Debug("reconnect: no member answered", "tried", target, "error", err)
		}
	}
}
