// Package launch wires one phasecrawl node: it opens the node's frontier,
// starts its cluster layer when the configuration has a cluster section,
// and builds the node on both. The command (phasecrawl run), the demo and
// the tests that start nodes in one process all go through New.
//
// The node and the cluster meet here and nowhere else: package cluster
// does not import package node, and package node imports cluster only for
// the types and metric names the cluster layer shows it.
package launch

import (
	"crypto/tls"
	"io"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/node"
)

// Options are what New takes beside the configuration.
type Options struct {
	// Options are the node's options: logger, API listener and, in tests,
	// a Router or PhaseClock. New sets Cluster when cluster.gossip is set.
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
		opts.Cluster = clusterHook(cfg, key, tlsConf, api, opts)
	}
	return node.New(cfg, opts.Options)
}

// clusterHook returns the hook with which the node starts its cluster
// layer, with key and tlsConf (nil without operator certificates),
// gossiping api as the node's API address.
func clusterHook(cfg config.Config, key []byte, tlsConf *tls.Config, api string, opts Options) node.ClusterHook {
	return func(env node.ClusterEnv) (node.Router, node.PhaseClock, io.Closer, error) {
		cc := cluster.NodeConfigFrom(cfg, key, api, env.Wake)
		cc.TLS = tlsConf
		cc.Scope = env.SeedHosts
		cc.Robots = env.Robots
		cc.Redirects = env.Redirects
		cc.Guests = env.Guests
		c, err := cluster.Start(cc, env.Frontier, opts.Logger)
		if err != nil {
			return nil, nil, nil, err
		}
		if opts.Started != nil {
			opts.Started(c)
		}
		return c, c.PhaseClock(), c, nil
	}
}
