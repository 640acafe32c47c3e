// Package launch wires one phasecrawl node: it opens the node's frontier,
// starts its cluster layer when the configuration has a cluster section,
// and builds the node on both. The command (phasecrawl run), the demo and
// the tests that start nodes in one process all go through New.
//
// The node and the cluster meet here and nowhere else: neither package
// imports the other. The cluster layer defines what it shows (its status,
// its series, the URLs it lends) in its own types, as a library does; the
// node defines the interfaces it takes (node.Router and its optional
// extensions, node.ClusterReporter); layer and guests adapt one to the
// other.
package launch

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
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
		opts.Cluster = clusterHook(cfg, key, tlsConf, api, opts)
		return node.New(cfg, opts.Options)
	}
	n, err := node.New(cfg, opts.Options)
	if err != nil {
		return nil, err
	}
	if err := n.Metrics().Registry.Register(cluster.StandaloneCollector()); err != nil {
		closeUnrun(n)
		return nil, fmt.Errorf("launch: the standalone cluster series: %w", err)
	}
	return n, nil
}

// closeUnrun closes a node that was built and never run.
func closeUnrun(n *node.Node) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.Run(ctx)
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
		if env.Guests != nil {
			cc.Guests = guests{env.Guests}
		}
		c, err := cluster.Start(cc, env.Frontier, opts.Logger)
		if err != nil {
			return nil, nil, nil, err
		}
		if opts.Started != nil {
			opts.Started(c)
		}
		l := layer{c}
		return l, c.PhaseClock(), l, nil
	}
}

// layer is the cluster layer as the node takes it: its Router, with the
// optional extensions (promoted from *cluster.Cluster), its io.Closer and
// its ClusterReporter. It converts the cluster's types to the node's.
type layer struct{ *cluster.Cluster }

// The node finds these by type assertion: layer must keep every one.
var (
	_ node.Router          = layer{}
	_ node.LocalSplitter   = layer{}
	_ node.Replicator      = layer{}
	_ node.Holder          = layer{}
	_ node.Lender          = layer{}
	_ node.ClusterReporter = layer{}
	_ io.Closer            = layer{}
	_ node.PhaseDeadline   = (*cluster.Schedule)(nil)
)

// ClusterStatus implements node.ClusterReporter.
func (l layer) ClusterStatus(now time.Time) node.ClusterStatus {
	cs := l.Cluster.ClusterStatus(now)
	st := node.ClusterStatus{Outbox: cs.Outbox, Phase: node.PhaseStatus(cs.Phase)}
	for _, m := range cs.Members {
		st.Members = append(st.Members, node.MemberStatus(m))
	}
	return st
}

// ReportLent implements node.Lender.
func (l layer) ReportLent(ctx context.Context, out node.LentOutcome, foreign []frontier.NewURL) error {
	return l.Cluster.ReportLent(ctx, cluster.LentOutcome(out), foreign)
}

// ReturnLent implements node.Lender.
func (l layer) ReturnLent(ctx context.Context, gs []node.Guest) error {
	cg := make([]cluster.Guest, len(gs))
	for i, g := range gs {
		cg[i] = cluster.Guest(g)
	}
	return l.Cluster.ReturnLent(ctx, cg)
}

// guests is the node's guest pool as the cluster's NodeConfig.Guests
// delegate.
type guests struct {
	pool interface {
		AddGuests([]node.Guest) []node.Guest
	}
}

// AddGuests passes the URLs lent to this node to its pool and returns
// those it refused.
func (g guests) AddGuests(gs []cluster.Guest) []cluster.Guest {
	ng := make([]node.Guest, len(gs))
	for i, x := range gs {
		ng[i] = node.Guest(x)
	}
	refused := g.pool.AddGuests(ng)
	if len(refused) == 0 {
		return nil
	}
	out := make([]cluster.Guest, len(refused))
	for i, x := range refused {
		out[i] = cluster.Guest(x)
	}
	return out
}
