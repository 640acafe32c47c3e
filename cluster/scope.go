package cluster

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// The crawl's scope is the same on every member. The configured part
// (scope.*) is checked at start: a node whose settings differ from those
// of the members it joins refuses to start (checkScope). The seeds' hosts,
// the scope when no allow_hosts or allow_domains is set, travel as
// KindScope entries through the members' ordered queues (see KindScope):
// ShareSeedHosts files them under every member before the seeds on those
// hosts are routed, and update files a member's whole set under a member
// it sees come alive, before a rebalance moves records to it.

// ShareSeedHosts implements node.Router: it durably files hosts, the new
// seed hosts of this node, under every other member, so that each member
// adds them to its scope before anything routed after this call reaches
// it. A member that comes alive later gets the whole set (update).
func (c *Cluster) ShareSeedHosts(ctx context.Context, hosts []string) error {
	if len(hosts) == 0 || c.cfg.Scope == nil {
		return nil
	}
	for peer := range *c.addrs.Load() {
		if peer == c.cfg.Name {
			continue
		}
		if err := c.outbox.PutKind(ctx, peer, exchange.KindScope, scopeEntries(hosts)); err != nil {
			return fmt.Errorf("cluster: share seed hosts with %s: %w", peer, err)
		}
	}
	return nil
}

func scopeEntries(hosts []string) []frontier.NewURL {
	es := make([]frontier.NewURL, 0, len(hosts))
	for _, h := range hosts {
		if h != "" && len(h) <= exchange.MaxEntryHost {
			es = append(es, frontier.NewURL{Host: h})
		}
	}
	return es
}

// addSeedHosts stores seed hosts another member shared.
func (c *Cluster) addSeedHosts(urls []frontier.NewURL) (int, error) {
	if c.cfg.Scope == nil {
		return 0, nil // allow_hosts or allow_domains configured: the seeds add nothing
	}
	hosts := make([]string, 0, len(urls))
	for _, u := range urls {
		hosts = append(hosts, u.Host)
	}
	fresh, err := c.cfg.Scope.AddSeedHosts(hosts)
	if err != nil {
		return 0, fmt.Errorf("cluster: store shared seed hosts: %w", err)
	}
	if len(fresh) > 0 {
		c.log.Info("seed hosts from another member added to the scope", "hosts", len(fresh))
	}
	return len(fresh), nil
}

// shareScopeWith files this node's whole seed-host set under each member
// of peers (members seen come alive since the last update).
func (c *Cluster) shareScopeWith(peers []string) {
	if c.cfg.Scope == nil || len(peers) == 0 {
		return
	}
	hosts := c.cfg.Scope.SeedHosts()
	if len(hosts) == 0 {
		return
	}
	es := scopeEntries(hosts)
	for _, peer := range peers {
		// update runs on the follow goroutine; the outbox write is local
		// and bounded by the cluster's lifetime.
		if err := c.outbox.PutKind(context.Background(), peer, exchange.KindScope, es); err != nil {
			c.log.Error("cannot share the seed hosts with a member: links it finds to them count as out of scope", "member", peer, "error", err)
		}
	}
}

// newlyAlive returns the members of alive (other than this node) that were
// not alive at the previous call, and remembers alive.
func (c *Cluster) newlyAlive(alive []membership.Member) []string {
	c.scopeMu.Lock()
	defer c.scopeMu.Unlock()
	now := make(map[string]int64, len(alive))
	var fresh []string
	for _, m := range alive {
		if m.Name == c.cfg.Name {
			continue
		}
		now[m.Name] = m.Started
		if started, ok := c.scopeSent[m.Name]; !ok || started != m.Started {
			fresh = append(fresh, m.Name)
		}
	}
	c.scopeSent = now
	slices.Sort(fresh)
	return fresh
}

// checkScope refuses members whose scope settings differ from this node's.
func checkScope(self string, digest string, members []membership.Member) error {
	for _, m := range members {
		if m.Name == self || m.Scope == "" || digest == "" || m.Scope == digest {
			continue
		}
		return fmt.Errorf("cluster: scope settings differ from member %s's (scope.allow_hosts, scope.allow_domains, scope.include, scope.exclude, scope.max_depth, scope.max_pages_per_host, scope.canonical, scope.max_segment_repeats, scope.max_path_depth, scope.max_query_params, scope.max_pattern_depth, scope.max_query_sets): every member must run with the same scope", m.Name)
	}
	return nil
}

// ShareCap is the part of the cluster's scope.max_pages_per_host (limit;
// 0 = unlimited) that one of n members admits from its own share of a
// host's URLs. URL ownership spreads a host's URLs evenly over the
// members, so each admits limit/n, plus three standard deviations of its
// share so that a host with fewer URLs than the limit is not cut short on
// the member whose share came out larger than the mean. The cluster
// admits at most n*ShareCap URLs of a host: limit + 3*sqrt(n*limit) + n
// (about 1.7% over the default 100,000 with three members).
func ShareCap(limit, n int) int {
	if limit <= 0 || n <= 1 {
		return limit
	}
	mean := float64(limit) / float64(n)
	return min(limit, int(math.Ceil(mean+3*math.Sqrt(mean))))
}
