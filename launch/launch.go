// Package launch assembles a node from its configuration: it opens the
// node's frontier, starts its cluster layer when the configuration has a
// cluster section, and builds the node on both. The command (phasecrawl run), the demo and
// the tests that start nodes in one process all go through New.
//
// The node and the cluster meet here and nowhere else: neither package
// imports the other, and each interface is declared once, by the package
// that calls it. The node takes its cluster layer as one
// node.ClusterDelegates of named delegates; *cluster.Cluster (and its
// Schedule) is each of them as it is, since the values they pass
// (frontier.NewURL, frontier.Guest, frontier.LentOutcome) live in
// frontier, which both import. The cluster takes the node's concrete
// values (node.ClusterEnv: the frontier, the node, its robots.txt cache,
// facet tracker and seed hosts) as its own interfaces (cluster.Records,
// RedirectMemory, GuestPool, RobotsCache, FacetMerger, ScopeDelegate).
// Only the status is converted (status): the node defines its API's
// types, the cluster its own.
package launch

import (
	"crypto/tls"
	"slices"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/node"
)

// Options are what New takes beside the configuration.
type Options struct {
	// Options are the node's options: logger, API listener and, in tests,
	// some of its cluster delegates (node.Delegates). New sets Cluster
	// when the configuration has a cluster section, and adds the
	// standalone cluster series otherwise.
	node.Options
	// Key is the cluster key. nil: read from cluster.key_file
	// (--cluster-key-file).
	Key []byte
	// Started, if set, gets the cluster layer once it runs (before New
	// returns), e.g. to learn its gossip address.
	Started func(*cluster.Cluster)
}

// New builds one node from cfg. Without a cluster section it is the node
// alone (node.New). With one, it loads the cluster key (unless opts.Key is
// set) and the exchange's TLS settings (cluster.tls_*), and the node, once
// its frontier is open, starts the cluster layer on it: gossip membership,
// URL ownership and exchange, and the phase schedule. The API address
// gossiped to the other members is that of opts.Listener, or cfg.HTTP.
// A node alone exports the cluster series with the standalone values
// (cluster.StandaloneCollector), so that one dashboard serves both modes.
// Run starts the node; the node closes the cluster layer when Run returns.
func New(cfg config.Config, opts Options) (*node.Node, error) {
	if cfg.Cluster.Enabled() {
		key := opts.Key
		if key == nil {
			var err error
			if key, err = membership.LoadKey(cfg.Cluster.KeyFile); err != nil {
				return nil, err
			}
		}
		tlsConf, err := cfg.Cluster.ClusterTLS(cfg.Name)
		if err != nil {
			return nil, err
		}
		api := cfg.HTTP
		if opts.Listener != nil {
			api = opts.Listener.Addr().String()
		}
		opts.Cluster = clusterHook(cfg, key, tlsConf, api, opts)
		return node.New(cfg, opts.Options)
	}
	opts.Cluster = standalone(opts.Cluster)
	return node.New(cfg, opts.Options)
}

// standalone is the cluster layer of a node alone: hook's delegates (none
// when hook is nil) with the cluster series at their standalone values.
func standalone(hook node.ClusterHook) node.ClusterHook {
	return func(env node.ClusterEnv) (node.ClusterDelegates, error) {
		var d node.ClusterDelegates
		if hook != nil {
			var err error
			if d, err = hook(env); err != nil {
				return d, err
			}
		}
		d.Collectors = append(slices.Clip(d.Collectors), cluster.StandaloneCollector())
		return d, nil
	}
}

// clusterHook returns the hook with which the node starts its cluster
// layer, with key and tlsConf (nil without operator certificates),
// gossiping api as the node's API address, and the layer's delegates.
func clusterHook(cfg config.Config, key []byte, tlsConf *tls.Config, api string, opts Options) node.ClusterHook {
	return func(env node.ClusterEnv) (node.ClusterDelegates, error) {
		cc := cluster.NodeConfigFrom(cfg, key, api, env.Wake)
		cc.TLS = tlsConf
		// The node's values as the cluster's interfaces; a nil pointer
		// stays a nil interface (the cluster's default for it).
		if env.SeedHosts != nil {
			cc.Scope = env.SeedHosts
		}
		if env.Facets != nil {
			cc.Facets = env.Facets
		}
		cc.Robots, cc.Redirects, cc.Guests = env.Robots, env.Node, env.Node
		c, err := cluster.Start(cc, env.Frontier, opts.Logger)
		if err != nil {
			return node.ClusterDelegates{}, err
		}
		if opts.Started != nil {
			opts.Started(c)
		}
		return delegates(c), nil
	}
}

// delegates is the cluster layer c as the node takes it: every delegate
// is c itself, or its schedule, but the status, whose types the node
// defines for its API (status).
func delegates(c *cluster.Cluster) node.ClusterDelegates {
	sched := c.PhaseClock()
	return node.ClusterDelegates{
		Router:     c,
		Split:      c,
		Phases:     sched,
		Deadlines:  sched,
		Replicas:   c,
		Holds:      c,
		Lending:    c,
		Facets:     c,
		Status:     status{c},
		Collectors: c.Collectors(),
		Closer:     c,
	}
}

// status is the cluster's status in the node's API types.
type status struct{ c *cluster.Cluster }

// ClusterStatus implements node.StatusReporter.
func (s status) ClusterStatus(now time.Time) node.ClusterStatus {
	cs := s.c.ClusterStatus(now)
	st := node.ClusterStatus{Outbox: cs.Outbox, Phase: node.PhaseStatus(cs.Phase)}
	for _, m := range cs.Members {
		st.Members = append(st.Members, node.MemberStatus(m))
	}
	return st
}
