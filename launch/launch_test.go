package launch

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/node"
)

// testConfig is a node named name with its data under dir, its API on a
// free loopback port and no seeds.
func testConfig(t *testing.T, dir, name string) config.Config {
	t.Helper()
	c := config.Default()
	c.Name, c.Data, c.HTTP, c.Seeds = name, filepath.Join(dir, name), "127.0.0.1:0", nil
	c.ShutdownTimeout = 5 * time.Second
	return c
}

// gauge returns the value of the series name without labels in n's
// registry, and whether it is there.
func gauge(t *testing.T, n *node.Node, name string) (float64, bool) {
	t.Helper()
	mfs, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 0 {
				return value(m), true
			}
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

// TestNewAlone: without a cluster section New builds a node alone, which
// exports every cluster series with the standalone values.
func TestNewAlone(t *testing.T) {
	n, err := New(testConfig(t, t.TempDir(), "a"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeUnrun(n)
	want := map[string]float64{
		cluster.MetricClusterMembers: 1,
		cluster.MetricPhaseCurrent:   0,
		cluster.MetricClusterFenced:  0,
		cluster.MetricURLsForwarded:  0,
	}
	for name := range cluster.MetricHelp {
		if name == cluster.MetricOutboxURLs {
			continue // by peer: a node alone has none
		}
		v, ok := gauge(t, n, name)
		if !ok {
			t.Errorf("%s: not exported by a node alone", name)
			continue
		}
		if w, ok := want[name]; ok && v != w {
			t.Errorf("%s = %v, want %v", name, v, w)
		}
	}
	if st := n.Status(); len(st.Members) != 0 || st.Phase.NPhase != 1 {
		t.Errorf("status alone: members %v, phase %+v", st.Members, st.Phase)
	}
}

// TestNewClusterErrors: the cluster settings New reads itself are checked
// before the node's data directory is opened, and the error names them.
func TestNewClusterErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"no key file", func(c *config.Config) { c.Cluster.KeyFile = filepath.Join(dir, "missing.key") }, "--cluster-key-file"},
		{"tls ca missing", func(c *config.Config) {
			c.Cluster.KeyFile = "unused: Key is set"
			c.Cluster.TLSCA, c.Cluster.TLSCert, c.Cluster.TLSKey = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
		}, "cluster.tls_ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, dir, "a")
			cfg.Cluster.Gossip = "127.0.0.1:0"
			tt.set(&cfg)
			var key []byte
			if tt.want != "--cluster-key-file" {
				key = make([]byte, 32)
			}
			n, err := New(cfg, Options{Key: key})
			if err == nil {
				closeUnrun(n)
				t.Fatalf("New: no error, want one naming %s", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want it to name %s", err, tt.want)
			}
		})
	}
}

// TestNewCluster: two nodes built by New with a cluster section, the
// second joining the first by the gossip address Started gave, see each
// other alive; each exports the cluster layer's series (two members), not
// the standalone ones, and gossips its API listener's address. The layer
// gives the node every delegate: none falls back to a node alone's.
func TestNewCluster(t *testing.T) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var nodes []*node.Node
	var apis []string
	runErr := make(chan error, 2)
	defer func() {
		cancel()
		for range nodes {
			if err := <-runErr; err != nil {
				t.Errorf("run: %v", err)
			}
		}
	}()
	var join []string
	for i, name := range []string{"a", "b"} {
		cfg := testConfig(t, dir, name)
		cfg.Cluster.Gossip, cfg.Cluster.Exchange, cfg.Cluster.Join = "127.0.0.1:0", "127.0.0.1:0", join
		cfg.Cluster.KeyFile, cfg.Cluster.FastGossip = "unused: Key is set", true
		cfg.Cluster.PhaseDuration = time.Second
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var gossip string
		var layer *cluster.Cluster
		n, err := New(cfg, Options{Options: node.Options{Listener: ln}, Key: key,
			Started: func(c *cluster.Cluster) { gossip, layer = c.Members().Addr(), c }})
		if err != nil {
			_ = ln.Close()
			t.Fatalf("%s: %v", name, err)
		}
		if gossip == "" {
			t.Fatalf("%s: Started was not called", name)
		}
		d := reflect.ValueOf(delegates(layer))
		for f := 0; f < d.NumField(); f++ {
			if d.Field(f).IsNil() {
				t.Errorf("%s: the cluster layer leaves node.ClusterDelegates.%s nil", name, d.Type().Field(f).Name)
			}
		}
		nodes, apis = append(nodes, n), append(apis, ln.Addr().String())
		go func() { runErr <- n.Run(ctx) }()
		if i == 0 {
			join = []string{gossip}
		}
	}
	wait.For(t, 30*time.Second, "the two nodes see each other alive", func() (bool, string) {
		formed := true
		for _, n := range nodes {
			alive := 0
			for _, m := range n.Status().Members {
				if m.State == string(membership.StateAlive) {
					alive++
				}
			}
			formed = formed && alive == 2
		}
		return formed, fmt.Sprintf("%+v / %+v", nodes[0].Status().Members, nodes[1].Status().Members)
	})
	for i, n := range nodes {
		if v, ok := gauge(t, n, cluster.MetricClusterMembers); !ok || v != 2 {
			t.Errorf("node %d: %s = %v (%v), want 2", i, cluster.MetricClusterMembers, v, ok)
		}
		var api string
		for _, m := range n.Status().Members {
			if m.Name == []string{"a", "b"}[i] {
				api = m.API
			}
		}
		if api != apis[i] {
			t.Errorf("node %d gossips API %q, want its listener's %q", i, api, apis[i])
		}
	}
}

// closeUnrun closes a node that was built and never run.
func closeUnrun(n *node.Node) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.Run(ctx)
}
