// Package cluster_test runs several phasecrawl nodes in one process, joined
// by gossip on 127.0.0.x loopback addresses, against the synthetic web, and
// checks the cooperative crawl (issue 3): every reachable page fetched
// exactly once across the cluster, never two requests at once to a host,
// and each node's share of pages near the mean.
package cluster_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

const (
	nodes         = 3
	delay         = 5 * time.Millisecond
	phaseDuration = 2 * time.Second
	guard         = 200 * time.Millisecond
	crawlTimeout  = 2 * time.Minute
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// member is one node of the test cluster.
type member struct {
	name string
	n    *node.Node
	c    *cluster.Cluster
	stop func()
}

func logger(t *testing.T) *slog.Logger {
	if os.Getenv("PHASECRAWL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startMember starts node i on 127.0.0.(i+1), joining join (if any).
func startMember(t *testing.T, srv *webnode.Server, dir string, i int, join []string) *member {
	t.Helper()
	ip := fmt.Sprintf("127.0.0.%d", i+1)
	m := &member{name: fmt.Sprintf("node%d", i)}
	cfg := srv.NodeConfig(m.name, dir, delay)
	cfg.Seeds = nil // posted once the cluster formed, so that they reach their owners
	cfg.Cluster.Gossip = ip + ":0"
	cfg.Cluster.Join = join
	cfg.Cluster.Exchange = ip + ":0"
	cfg.Cluster.PhaseDuration = phaseDuration
	cfg.Cluster.Guard = guard
	cfg.Cluster.KeyFile = "unused" // the key is passed directly
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s (loopback alias): %v", ip, err)
	}
	log := logger(t).With("node", m.name)
	hook := func(f *frontier.Frontier, wake func()) (node.Router, node.PhaseClock, io.Closer, error) {
		nc := cluster.NodeConfigFrom(cfg, testKey, ln.Addr().String(), wake)
		nc.Tune, nc.NoSync, nc.LeaveTimeout = cluster.FastTimings, true, time.Second
		c, err := cluster.Start(nc, f, log)
		if err != nil {
			return nil, nil, nil, err
		}
		m.c = c
		return c, c.PhaseClock(), c, nil
	}
	m.n, err = node.New(cfg, node.Options{Logger: log, Listener: ln, Cluster: hook})
	if err != nil {
		t.Fatalf("%s: %v", m.name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.n.Run(ctx) }()
	stopped := false
	m.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("%s run: %v", m.name, err)
			}
		case <-time.After(time.Minute):
			t.Errorf("%s did not stop within a minute", m.name)
		}
	}
	t.Cleanup(m.stop)
	return m
}

// waitFormed waits until every member's phase schedule has all members in
// effect (membership changes apply at epoch boundaries).
func waitFormed(t *testing.T, ms []*member) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, m := range ms {
			st := m.c.PhaseClock().At(time.Now())
			if len(st.Members) != len(ms) || st.Phase < 0 || m.c.Ring().Len() != len(ms) {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range ms {
		t.Logf("%s: alive %v, schedule %+v", m.name, m.c.Members().AliveNames(), m.c.PhaseClock().At(time.Now()))
	}
	t.Fatalf("cluster of %d did not form within 30s", len(ms))
}

// allDone reports whether no node has work left and no URL waits in an outbox.
func allDone(ms []*member) bool {
	for _, m := range ms {
		if !m.n.Done() || m.c.Outbox().Len() > 0 {
			return false
		}
	}
	return true
}

func TestThreeNodesCrawl(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster crawl in -short mode")
	}
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.TrapHosts = 100, 4000, 0 // trap: MaxPagesPerHost is per node so far (see README)
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	dir := t.TempDir()

	ms := []*member{startMember(t, srv, dir, 0, nil)}
	seedAddr := ms[0].c.Members().Addr()
	for i := 1; i < nodes; i++ {
		ms = append(ms, startMember(t, srv, dir, i, []string{seedAddr}))
	}
	waitFormed(t, ms)

	cfg := srv.NodeConfig("x", dir, delay)
	exp := web.Expected(srv.Scope(cfg.UserAgent))
	res, err := ms[0].n.AddSeeds(context.Background(), web.Seeds())
	if err != nil || len(res.Bad) > 0 {
		t.Fatalf("seeds: %+v, %v", res, err)
	}
	start := time.Now()
	deadline := start.Add(crawlTimeout)
	for seen := 0; seen < 2; {
		if time.Now().After(deadline) {
			for _, m := range ms {
				t.Logf("%s: %+v outbox=%v", m.name, m.n.Status(), m.c.Outbox().Pending())
			}
			t.Fatalf("crawl not done after %s", crawlTimeout)
		}
		if allDone(ms) {
			seen++
		} else {
			seen = 0
		}
		time.Sleep(300 * time.Millisecond)
	}
	elapsed := time.Since(start)

	var pages []int64
	var total int64
	for _, m := range ms {
		st := m.n.Status()
		x := m.c.Exchange().Stats()
		t.Logf("%s: pages=%d completed=%d forwarded=%d received=%d batches=%d", m.name, st.PagesFetched,
			st.Frontier.Completed, x.URLsForwarded, x.URLsReceived, x.BatchesSent)
		pages = append(pages, st.PagesFetched)
		total += st.PagesFetched
	}
	for _, m := range ms {
		m.stop()
	}
	t.Logf("%d pages in %s by %d nodes (expected %d)", total, elapsed.Round(time.Millisecond), nodes, exp.Fetches)

	// Each node fetches a host's robots.txt once for itself (per-node robots
	// cache): allow up to one per node instead of one per cluster.
	var vs []string
	for _, v := range web.Check(exp, delay) {
		if strings.Contains(v, "robots.txt fetched") || strings.HasSuffix(v, ": robots.txt fetches") {
			continue
		}
		vs = append(vs, v)
	}
	rep := web.Report()
	for h := range exp.Contacted {
		if r := rep.Hosts[h].RobotsFetches; r < 1 || r > nodes {
			vs = append(vs, fmt.Sprintf("host %s: robots.txt fetched %d times, want 1..%d", h, r, nodes))
		}
	}
	for h, hr := range rep.Hosts {
		if hr.MaxInFlight > 1 {
			vs = append(vs, fmt.Sprintf("host %s: %d requests at once across the cluster", h, hr.MaxInFlight))
		}
	}
	if len(vs) > 0 {
		t.Errorf("%d violations:\n%s", len(vs), strings.Join(vs, "\n"))
	}
	if total != int64(exp.Fetches) {
		t.Errorf("cluster fetched %d pages, want %d", total, exp.Fetches)
	}
	mean := float64(total) / nodes
	for i, p := range pages {
		if dev := math.Abs(float64(p)-mean) / mean; dev > 0.15 {
			t.Errorf("%s fetched %d pages, %.1f%% from the mean %.0f (want within 15%%)", ms[i].name, p, 100*dev, mean)
		}
	}
}
