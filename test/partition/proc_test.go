// Package partition_test cuts the network between phasecrawl nodes and
// checks that the crawl stays polite and complete: every node runs as a
// real process in a network namespace of its own, on a bridge, with the
// synthetic web (a `phasecrawl synthweb` process) reachable from all of
// them, and links are cut with iptables inside the namespaces. A cut on
// loopback is not possible (memberlist's TCP fallback dials from
// 127.0.0.1), hence the namespaces. The tests need root; they skip
// otherwise (and fail when CI=true).
package partition_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/harness"
	"github.com/phasecrawl/phasecrawl/test/testbin"
)

// TestMain removes the binary built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

const (
	webPort  = 8080
	apiPort  = 8081
	gossPort = 7946
	xchgPort = 7947
)

// settings are the timings of a partition test: short phases and fences,
// so that a cut, its detection, the takeover and the heal fit in a minute.
type settings struct {
	delay, phase, guard time.Duration
	fenceAfter          time.Duration
	takeoverAfter       time.Duration
	reconnect           time.Duration
	workers             int
	hosts, pages        int
}

func defaultSettings() settings {
	return settings{delay: 150 * time.Millisecond, phase: 2 * time.Second, guard: 400 * time.Millisecond,
		fenceAfter: time.Second, takeoverAfter: 10 * time.Second, reconnect: time.Second, workers: 16,
		hosts: 300, pages: 1500}
}

// pcluster is a web and n node processes, one per namespace.
type pcluster struct {
	t         *testing.T
	net       *testNet
	s         settings
	bin, dir  string
	keyFile   string
	tokenFile string
	web       *synthweb.Web
	webAddr   string
	exp       synthweb.Expectation
	procs     []*proc
}

// proc is one node process.
type proc struct {
	c             *pcluster
	i             int
	name, ip      string
	api, gossip   string
	data, logPath string
	cmd           *exec.Cmd
	done          chan struct{}
	exitErr       error
}

// newPCluster creates the namespaces, starts the web in the hub and n
// nodes, each joining the first, and waits until they all work on a phase.
func newPCluster(t *testing.T, n int, s settings) *pcluster {
	t.Helper()
	nt := newTestNet(t, n)
	c := &pcluster{t: t, net: nt, s: s, bin: testbin.Path(t), dir: t.TempDir()}
	c.keyFile = filepath.Join(c.dir, "cluster.key")
	c.tokenFile = filepath.Join(c.dir, "api.token")
	if err := os.WriteFile(c.keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.tokenFile, []byte("partition-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.killAll)
	c.startWeb()
	for i := 0; i < n; i++ {
		p := &proc{c: c, i: i, name: fmt.Sprintf("node%d", i), ip: nt.nodeIP(i)}
		p.api = net.JoinHostPort(p.ip, strconv.Itoa(apiPort))
		p.gossip = net.JoinHostPort(p.ip, strconv.Itoa(gossPort))
		p.data = filepath.Join(c.dir, p.name)
		p.logPath = filepath.Join(c.dir, p.name+".log")
		c.procs = append(c.procs, p)
		if i == 0 {
			p.start()
		} else {
			p.start(c.procs[0].gossip)
		}
		p.waitUp()
	}
	wait.For(t, 60*time.Second, "cluster formed", func() bool { return c.formed(c.procs) })
	return c
}

// startWeb runs the synthetic web in the hub namespace.
func (c *pcluster) startWeb() {
	t := c.t
	wc := synthweb.DefaultConfig()
	wc.TrapHosts, wc.Hosts, wc.Pages = 0, c.s.hosts, c.s.pages
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	c.web = web
	c.webAddr = net.JoinHostPort(c.net.webIP(), strconv.Itoa(webPort))
	c.exp = harness.StartWeb(t, c.net.cmd(c.net.hub, c.bin, harness.WebArgs(c.webAddr, wc)...), c.webAddr, web)
}

func (c *pcluster) args(p *proc, join []string) []string {
	args := []string{"run", "--name", p.name, "--data", p.data, "--http", p.api, "--api-token-file", c.tokenFile,
		"--gossip", p.gossip, "--exchange", net.JoinHostPort(p.ip, strconv.Itoa(xchgPort)), "--cluster-key-file", c.keyFile,
		"--allow-private", "--allow-domain", c.web.Config().Domain,
		"--resolve", c.web.ResolvePattern() + "=" + c.webAddr,
		"--delay", c.s.delay.String(), "--max-pages-per-host", strconv.Itoa(webnode.MaxPagesPerHost),
		"--phase-duration", c.s.phase.String(), "--log-format", "json", "--workers", strconv.Itoa(c.s.workers)}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	return args
}

// start starts p in its namespace, joining the gossip addresses join.
func (p *proc) start(join ...string) {
	c := p.c
	c.t.Helper()
	cmd := c.net.cmd(c.net.nodeNS[p.i], c.bin, c.args(p, join)...)
	cmd.Env = harness.NodeEnv(
		"PHASECRAWL_CLUSTER_GUARD="+c.s.guard.String(),
		"PHASECRAWL_CLUSTER_FAST_GOSSIP=true",
		"PHASECRAWL_CLUSTER_FENCE_AFTER="+c.s.fenceAfter.String(),
		"PHASECRAWL_CLUSTER_TAKEOVER_AFTER="+c.s.takeoverAfter.String(),
		"PHASECRAWL_CLUSTER_RECONNECT_INTERVAL="+c.s.reconnect.String(),
		"PHASECRAWL_BUCKET_MAX_QUEUE_WAIT=100ms",
		"PHASECRAWL_FETCH_RETRY_BACKOFF=1s",
		"PHASECRAWL_SHUTDOWN_TIMEOUT=10s",
	)
	done, err := harness.StartLogged(cmd, p.logPath, "", func(err error) { p.exitErr = err })
	if err != nil {
		c.t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd, p.done = cmd, done
}

func (p *proc) running() bool {
	return p.cmd != nil && !harness.Closed(p.done)
}

// waitUp waits until the node's API answers.
func (p *proc) waitUp() {
	p.c.t.Helper()
	wait.For(p.c.t, 30*time.Second, p.name+" API up", func() bool {
		if !p.running() {
			p.c.t.Fatalf("%s exited: %v\n%s", p.name, p.exitErr, p.tail(20))
		}
		_, err := p.status()
		return err == nil
	})
}

// killAll kills every node (ip netns exec execs the binary: the signal
// reaches phasecrawl) and, when the test failed, logs what they said.
func (c *pcluster) killAll() {
	for _, p := range c.procs {
		if p.running() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
			}
		}
	}
	if dir := os.Getenv("PHASECRAWL_TEST_LOGS"); dir != "" {
		// Keep the nodes' logs (a directory per test).
		keep := filepath.Join(dir, c.t.Name())
		if err := os.MkdirAll(keep, 0o755); err == nil {
			for _, p := range c.procs {
				if b, err := os.ReadFile(p.logPath); err == nil {
					_ = os.WriteFile(filepath.Join(keep, p.name+".log"), b, 0o644)
				}
			}
		}
	}
	if c.t.Failed() {
		for _, p := range c.procs {
			c.t.Logf("---- log of %s: membership, fencing, last lines ----\n%s\n%s", p.name, p.grep(
				"member joined", "member left", "membership changed", "fenced", "unfenced", "quorum", "rejoin", "reconnect: contacted",
				"joined: ", "join timeout", "members away"), p.tail(8))
		}
	}
}

// grep returns the lines of the node's log whose msg starts with one of msgs.
func (p *proc) grep(msgs ...string) string { return harness.LogGrep(p.logPath, msgs...) }

// tail returns the last n lines of the node's log.
func (p *proc) tail(n int) string { return harness.LogTail(p.logPath, n) }

// timeline returns the node's log records about membership, fencing and
// reconnection, each as seconds after t0 and its message and members.
func (p *proc) timeline(t0 time.Time) []string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			Time    time.Time `json:"time"`
			Msg     string    `json:"msg"`
			Members []string  `json:"members"`
			View    []string  `json:"view"`
			Reason  string    `json:"reason"`
			Moved   *int      `json:"urls_moved"`
			FPs     *int      `json:"fingerprints_moved"`
			Dur     any       `json:"duration"`
			Sched   []string  `json:"schedule"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Time.Before(t0) {
			continue
		}
		for _, m := range []string{"fenced", "unfenced", "quorum", "rejoining", "joined: ", "membership changed", "members away", "reconnect: contacted", "member joined", "member left", "rebalance", "phase schedule"} {
			if strings.HasPrefix(r.Msg, m) {
				l := fmt.Sprintf("%+7.2fs %s %s %v%v%v %s", r.Time.Sub(t0).Seconds(), p.name, r.Msg, r.Members, r.View, r.Sched, r.Reason)
				if r.Moved != nil {
					l += fmt.Sprintf(" moved %d urls %d fingerprints in %v", *r.Moved, *r.FPs, r.Dur)
				}
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// logTimes returns the times of the node's JSON log records whose msg is msg.
func (p *proc) logTimes(msg string) []time.Time {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []time.Time
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(`"msg":"`+msg)) {
			continue
		}
		var r struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r.Time)
		}
	}
	return out
}

func (p *proc) status() (node.Status, error) { return harness.Status(p.api) }

func (p *proc) metrics() (string, error) { return harness.Metrics(p.api) }

// metric returns the value of an unlabelled series in the node's /metrics.
func (p *proc) metric(name string) (float64, error) {
	text, err := p.metrics()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no series %s", p.name, name)
}

// postSeeds posts the web's seeds to p (with the API token).
func (p *proc) postSeeds(seeds []string) error {
	return harness.PostSeeds(p.api, "partition-test-token-0123456789", seeds)
}

// formed reports whether every node in ps sees exactly len(ps) members
// alive and works on a phase of a schedule counting them all.
func (c *pcluster) formed(ps []*proc) bool { return harness.Formed(apis(ps)) }

// crawlDone reports whether every node is done with an empty outbox.
func crawlDone(ps []*proc) bool { return harness.CrawlDone(apis(ps)) }

// pagesFetched sums pages_fetched over ps.
func pagesFetched(ps []*proc) int64 { return harness.PagesFetched(apis(ps)) }

// apis returns the API addresses of ps.
func apis(ps []*proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.api)
	}
	return out
}

// dirs returns the data directories of the nodes, by name.
func (c *pcluster) dirs() map[string]string {
	m := map[string]string{}
	for _, p := range c.procs {
		m[p.name] = p.data
	}
	return m
}
