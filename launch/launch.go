// Package launch wires one phasecrawl node: it opens the node's frontier,
// starts its cluster layer when the configuration has a cluster section,
// and builds the node on both. The command (phasecrawl run), the demo and
// the tests that start nodes in one process all go through New.
//
// The node and the cluster meet here and nowhere else: neither package
// imports the other. The node takes its cluster layer as one node.Cluster
// of named delegates; *cluster.Cluster (and its Schedule) is each of them
// as it is, since the values they pass (frontier.NewURL, frontier.Guest,
// frontier.LentOutcome) live in frontier, which both import. Only the
// status is converted (status): the node defines its API's types, the
// cluster its own.
package launch

import (
	"crypto/tls"
	"slices"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/node"
)

// Options are what New takes beside the configuration.
type Options struct {
	// Options are the node's options: logger, API listener and, in tests,
	// some of its cluster delegates (node.Cluster). New sets StartCluster
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
			if key, err = cluster.LoadKey(cfg.Cluster.KeyFile); err != nil {
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
		opts.StartCluster = clusterHook(cfg, key, tlsConf, api, opts)
		return node.New(cfg, opts.Options)
	}
	opts.Cluster.Collectors = append(slices.Clip(opts.Cluster.Collectors), cluster.StandaloneCollector())
	return node.New(cfg, opts.Options)
}

// clusterHook returns the hook with which the node starts its cluster
// layer, with key and tlsConf (nil without operator certificates),
// gossiping api as the node's API address, and the layer's delegates.
func clusterHook(cfg config.Config, key []byte, tlsConf *tls.Config, api string, opts Options) node.ClusterHook {
	return func(env node.ClusterEnv) (node.Cluster, error) {
		cc := cluster.NodeConfigFrom(cfg, key, api, env.Wake)
		cc.TLS = tlsConf
		cc.Scope = env.SeedHosts
		cc.Robots = env.Robots
		cc.Redirects = env.Redirects
		cc.Guests = env.Guests
		c, err := cluster.Start(cc, env.Frontier, opts.Logger)
		if err != nil {
			return node.Cluster{}, err
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
func delegates(c *cluster.Cluster) node.Cluster {
	sched := c.PhaseClock()
	return node.Cluster{
		Router:     c,
		Split:      c,
		Phases:     sched,
		Deadlines:  sched,
		Replicas:   c,
		Holds:      c,
		Lending:    c,
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
