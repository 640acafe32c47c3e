// Package cluster_test runs phasecrawl clusters as separate processes and
// checks the cooperative crawl against the synthetic web's
// oracle: every reachable page fetched exactly once across the cluster,
// never two requests at once to a host, shares near the mean; with a
// member joining, one leaving gracefully, one killed and restarted, and
// one with the wrong key. The real phasecrawl binary is built once into a
// temporary directory (without -race: the nodes are separate processes)
// and runs on 127.0.0.x loopback addresses; the synthetic web runs as a
// `phasecrawl synthweb` process whose report (what every host served, and
// when) the tests read over HTTP.
package cluster_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/frontier"
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

// phasecrawlBin returns the phasecrawl binary, built once per test process.
func phasecrawlBin(t testing.TB) string {
	t.Helper()
	return testbin.Path(t)
}

// procCluster is a set of node processes crawling one synthetic web.
type procCluster struct {
	t       testing.TB
	bin     string
	dir     string
	keyFile string
	web     *synthweb.Web // the model (the same web runs in the synthweb process)
	webAddr string        // HOST:PORT of the synthweb process
	phase   time.Duration
	guard   time.Duration
	delay   time.Duration
	workers int
	alone   bool // a single node without the cluster layer (baseline)
	// defaultScope runs the nodes with the shipped scope (no
	// --allow-domain): the seeds' hosts.
	defaultScope bool
	// shipped runs the nodes with the shipped guard, queue wait and retry
	// backoff (with phase and workers 0: the shipped phases and workers).
	shipped bool
	env     []string // more PHASECRAWL_* variables for every node
	extra   []string // more flags for every node
	mu      sync.Mutex
	procs   []*proc
}

// proc is one node; it keeps its name, addresses and data across restarts.
type proc struct {
	c                      *procCluster
	name, ip               string
	api, gossip, exchange  string
	data, logPath, keyFile string
	cmd                    *exec.Cmd
	done                   chan struct{}
	exitErr                error
	starts                 int
	env                    []string // more PHASECRAWL_* variables for this node
}

func newProcCluster(t testing.TB, web *synthweb.Web, webAddr string) *procCluster {
	dir := t.TempDir()
	c := &procCluster{t: t, bin: phasecrawlBin(t), dir: dir, web: web, webAddr: webAddr, phase: 2 * time.Second,
		guard: 300 * time.Millisecond, delay: 5 * time.Millisecond, workers: 64}
	c.keyFile = filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(c.keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.killAll)
	return c
}

// add creates node i on 127.0.0.(i+1) (not started).
func (c *procCluster) add(i int) *proc {
	ip := fmt.Sprintf("127.0.0.%d", i+1)
	p := &proc{c: c, name: fmt.Sprintf("node%d", i), ip: ip, keyFile: c.keyFile}
	p.api = net.JoinHostPort(ip, strconv.Itoa(harness.FreePort(c.t, ip)))
	p.gossip = net.JoinHostPort(ip, strconv.Itoa(harness.FreePort(c.t, ip)))
	p.exchange = net.JoinHostPort(ip, strconv.Itoa(harness.FreePort(c.t, ip)))
	p.data = filepath.Join(c.dir, p.name)
	p.logPath = filepath.Join(c.dir, p.name+".log")
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

func (c *procCluster) args(p *proc, join []string) []string {
	args := []string{"run", "--name", p.name, "--data", p.data, "--http", p.api}
	if !c.alone {
		args = append(args, "--gossip", p.gossip, "--exchange", p.exchange, "--cluster-key-file", p.keyFile)
	}
	args = append(args, "--allow-private")
	if !c.defaultScope {
		args = append(args, "--allow-domain", c.web.Config().Domain, "--private-suffix", c.web.Config().Domain)
	}
	args = append(args, "--resolve", c.web.ResolvePattern()+"="+c.webAddr,
		"--delay", c.delay.String(), "--max-pages-per-host", strconv.Itoa(webnode.MaxPagesPerHost),
		"--log-format", "json")
	if c.phase > 0 { // 0: the shipped cluster.phase_duration
		args = append(args, "--phase-duration", c.phase.String())
	}
	if c.workers > 0 { // 0: the shipped workers
		args = append(args, "--workers", strconv.Itoa(c.workers))
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	return append(args, c.extra...)
}

// start starts (or restarts) p, joining the gossip addresses join.
func (p *proc) start(join ...string) {
	c := p.c
	c.t.Helper()
	cmd := exec.Command(c.bin, c.args(p, join)...)
	cmd.Env = harness.NodeEnv(
		"PHASECRAWL_CLUSTER_FAST_GOSSIP=true",
		"PHASECRAWL_SHUTDOWN_TIMEOUT=10s",
	)
	if !c.shipped {
		cmd.Env = append(cmd.Env,
			"PHASECRAWL_CLUSTER_GUARD="+c.guard.String(),
			"PHASECRAWL_BUCKET_MAX_QUEUE_WAIT=100ms",
			"PHASECRAWL_FETCH_RETRY_BACKOFF=1s",
		)
	}
	if v := os.Getenv("PHASECRAWL_TEST_LEND"); v != "" {
		// Runs any test of the package with cluster.lend set (its own env may override).
		cmd.Env = append(cmd.Env, "PHASECRAWL_CLUSTER_LEND="+v)
	}
	cmd.Env = append(append(cmd.Env, c.env...), p.env...)
	header := fmt.Sprintf("---- start %d: %s", p.starts+1, strings.Join(cmd.Args, " "))
	done, err := harness.StartLogged(cmd, p.logPath, header, func(err error) { p.exitErr = err })
	if err != nil {
		c.t.Fatalf("start %s: %v", p.name, err)
	}
	p.cmd, p.done, p.starts = cmd, done, p.starts+1
}

// waitUp waits until the node's API answers (it has joined and opened).
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

// running reports whether the process has not exited.
func (p *proc) running() bool {
	return p.cmd != nil && !harness.Closed(p.done)
}

// stop sends sig and waits (at most within) for the process to exit.
func (p *proc) stop(sig syscall.Signal, within time.Duration) error {
	if !p.running() {
		return p.exitErr
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.exitErr
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s after %v", p.name, within, sig)
	}
}

// kill9 kills p with SIGKILL and fails the test unless it died of it.
func kill9(t testing.TB, p *proc) {
	t.Helper()
	if err := p.stop(syscall.SIGKILL, 10*time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("kill -9 of %s: %v", p.name, err)
	}
}

// waitSeenDead waits until none of others lists dead as alive.
func waitSeenDead(t testing.TB, dead *proc, others []*proc) {
	t.Helper()
	wait.For(t, time.Minute, "the others see "+dead.name+" dead", func() bool {
		for _, p := range others {
			s, err := p.status()
			if err != nil {
				return false
			}
			for _, m := range s.Members {
				if m.Name == dead.name && m.State == "alive" {
					return false
				}
			}
		}
		return true
	})
}

func (c *procCluster) killAll() {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.stop(syscall.SIGKILL, 10*time.Second)
	}
	if c.t.Failed() {
		for _, p := range procs {
			c.t.Logf("---- log of %s: membership and rebalance, last lines ----\n%s\n%s", p.name, p.grep(
				"member joined", "member left", "membership changed", "rebalance done", "rebalance interrupted", "rebalance still waiting", "rebalance: waiting",
				"holding this node's URLs", "the members away at the join", "members away too long", "this process was frozen", "exchange: ",
				"joined: ", "join timeout", "leave hand-off done", "left cluster"), p.tail(10))
		}
	}
}

// grep returns the lines of the node's log whose msg starts with one of msgs.
func (p *proc) grep(msgs ...string) string { return harness.LogGrep(p.logPath, msgs...) }

// tail returns the last n lines of the node's log.
func (p *proc) tail(n int) string { return harness.LogTail(p.logPath, n) }

// logRecords returns the JSON log records of the node whose msg is msg.
func (p *proc) logRecords(msg string) []map[string]any {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(`"msg":"`+msg+`"`)) {
			continue
		}
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// status reads the node's /v1/status.
func (p *proc) status() (node.Status, error) { return harness.Status(p.api) }

// metrics reads the node's /metrics as text.
func (p *proc) metrics() (string, error) { return harness.Metrics(p.api) }

// formed reports whether every running node sees exactly the running nodes
// alive and works on a phase.
func (c *procCluster) formed(ps []*proc) bool { return harness.Formed(apis(ps)) }

// postSeeds posts the web's seeds to p (they reach their owners).
func (p *proc) postSeeds(seeds []string) error { return harness.PostSeeds(p.api, "", seeds) }

// crawlDone reports whether every running node is done with an empty outbox.
func crawlDone(ps []*proc) bool { return harness.CrawlDone(apis(ps)) }

// apis returns the API addresses of ps.
func apis(ps []*proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.api)
	}
	return out
}

// waitDone waits until the crawl is done on every running node, their
// outboxes empty, and still so 400 ms later.
func waitDone(t testing.TB, ps []*proc, timeout time.Duration) {
	t.Helper()
	wait.Steady(t, timeout, 400*time.Millisecond, "crawl done on every node", func() (bool, string) {
		why := harness.NotDone(apis(ps))
		return len(why) == 0, "not done:\n" + strings.Join(why, "\n")
	})
}

// clusterWeb starts the synthetic web of the cluster tests in a process of
// its own (phasecrawl synthweb, so that serving it does not compete with the
// race detector of the test process) and returns its model and address:
// the default web (over 20,000 reachable pages on ~590 hosts) without the
// spider-trap host. max_pages_per_host is a per-node cap (each node admits
// up to it for its own share of a host), so a trap would be crawled up to N
// times the cap; the regular hosts all stay far below it.
func clusterWeb(t testing.TB) (*synthweb.Web, string, synthweb.Expectation) {
	t.Helper()
	return clusterWebScaled(t, 1)
}

// clusterWebScaled is clusterWeb with scale times the hosts and pages.
func clusterWebScaled(t testing.TB, scale int) (*synthweb.Web, string, synthweb.Expectation) {
	t.Helper()
	return clusterWebWith(t, scale, 0)
}

// clusterWebWith is clusterWeb with scale times the hosts and pages and
// traps spider-trap hosts.
func clusterWebWith(t testing.TB, scale, traps int) (*synthweb.Web, string, synthweb.Expectation) {
	t.Helper()
	wc := synthweb.DefaultConfig()
	wc.TrapHosts = traps
	wc.Hosts *= scale
	wc.Pages *= scale
	web, addr, exp := startWeb(t, wc)
	if exp.Fetches < 20000 {
		t.Fatalf("the cluster web has %d reachable pages, want >= 20000", exp.Fetches)
	}
	return web, addr, exp
}

// startWeb starts a synthweb process serving the web of wc.
func startWeb(t testing.TB, wc synthweb.Config) (*synthweb.Web, string, synthweb.Expectation) {
	t.Helper()
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(harness.FreePort(t, "127.0.0.1")))
	exp := harness.StartWeb(t, exec.Command(phasecrawlBin(t), harness.WebArgs(addr, wc)...), addr, web)
	return web, addr, exp
}

// checkCrawl applies the synthweb oracle to the whole cluster: every
// reachable page fetched exactly once (at most maxDup duplicates), nothing
// else, polite gaps and never two requests at once on a host across the
// cluster (Check reports requests in flight at once on a host), and each
// host's robots.txt fetched 1..robotsPerHost times (the cluster shares
// robots.txt: once, unless a node restarted and lost its copies).
func checkCrawl(t testing.TB, webAddr string, exp synthweb.Expectation, delay time.Duration, robotsPerHost, maxDup int, procs []*proc) synthweb.Report {
	t.Helper()
	rep, err := harness.WebReport(webAddr)
	if err != nil {
		t.Fatal(err)
	}
	vs := harness.Violations(rep, exp, delay, robotsPerHost)
	dups := 0
	for u, n := range rep.URLs {
		if n > 1 && exp.Pages[u] {
			dups += n - 1
		}
	}
	if dups > maxDup {
		vs = append(vs, fmt.Sprintf("%d duplicate fetches, want at most %d", dups, maxDup))
		for u, n := range rep.URLs {
			if n > 1 && exp.Pages[u] && len(vs) < 30 {
				vs = append(vs, fmt.Sprintf("  %s fetched %d times: %s", u, n, strings.Join(crawlLogLines(dirsOf(procs), u), "; ")))
			}
		}
	}
	var missing []string
	for _, v := range vs {
		if u, ok := strings.CutPrefix(v, "missing page (never fetched): "); ok && len(missing) < 10 {
			missing = append(missing, u)
		}
	}
	if len(missing) > 0 {
		vs = append(vs, whereMissing(t, procs, missing)...)
	}
	if len(vs) > 0 {
		// Say when each overlap and short gap happened (the nodes log their
		// membership changes and phase swaps with times).
		if visits, err := harness.WebVisits(webAddr); err == nil {
			n := 0
			for _, in := range synthweb.Incidents(visits, harness.HostGap(exp, delay)) {
				if in.Kind != "duplicate" && n < 20 {
					vs = append(vs, "  at "+in.At.UTC().Format("15:04:05.000000")+": "+in.String())
					n++
				}
			}
		}
		if len(vs) > 40 {
			vs = append(vs[:40], fmt.Sprintf("... %d more", len(vs)-40))
		}
		t.Errorf("%d violations:\n%s", len(vs), strings.Join(vs, "\n"))
	}
	t.Logf("oracle: %d fetches of %d expected pages, %d duplicates", len(rep.URLs), exp.Fetches, dups)
	return rep
}

// whereMissing says what each node knows of the pages never fetched: its
// crawl log lines and its frontier record. It kills the nodes still running
// first (their frontier files are locked while they run): call it only when
// the test fails anyway.
func whereMissing(t testing.TB, procs []*proc, urls []string) []string {
	for _, p := range procs {
		_ = p.stop(syscall.SIGKILL, 10*time.Second)
	}
	want := map[string]bool{}
	for _, u := range urls {
		want[u] = true
	}
	var out []string
	for _, u := range urls {
		out = append(out, "  "+u+" in the crawl logs: "+strings.Join(crawlLogLines(dirsOf(procs), u), "; "))
	}
	for _, p := range procs {
		ro, err := frontier.OpenReadOnly(filepath.Join(p.data, "frontier.db"), 5*time.Second)
		if err != nil {
			out = append(out, fmt.Sprintf("  %s: %v", p.name, err))
			continue
		}
		err = ro.Records(nil, func(r frontier.Record) error {
			if want[r.URL] {
				out = append(out, fmt.Sprintf("  %s has %s: %s reason=%q status=%d depth=%d discovered=%s fetched=%s due=%s",
					p.name, r.URL, r.State, r.Reason, r.Status, r.Depth, r.Discovered.Format("15:04:05.000"),
					r.Fetched.Format("15:04:05.000"), r.Due.Format("15:04:05.000")))
			}
			return nil
		})
		if err != nil {
			out = append(out, fmt.Sprintf("  %s: %v", p.name, err))
		}
		_ = ro.Close()
		f, err := frontier.Open(frontier.DefaultOptions(filepath.Join(p.data, "frontier.db")))
		if err != nil {
			out = append(out, fmt.Sprintf("  %s: %v", p.name, err))
			continue
		}
		line := fmt.Sprintf("  %s: %d URLs refused by the per-host cap;", p.name, f.Skipped())
		seen := map[string]bool{}
		for _, u := range urls {
			h := u[len("http://"):]
			h = h[:strings.IndexByte(h, '/')]
			if seen[h] {
				continue
			}
			seen[h] = true
			if hs, ok, err := f.Host(h); err == nil && ok {
				line += fmt.Sprintf(" %s admitted %d fetched %d;", h, hs.Admitted, hs.Fetched)
			}
		}
		out = append(out, line)
		_ = f.Close()
	}
	return out
}

// pagesFetched sums pages_fetched over ps (statuses that fail count 0).
func pagesFetched(ps []*proc) int64 { return harness.PagesFetched(apis(ps)) }

func dirsOf(ps []*proc) map[string]string {
	m := map[string]string{}
	for _, p := range ps {
		m[p.name] = p.data
	}
	return m
}

// logEntry is a crawl log line (the fields the tests read).
type logEntry struct {
	Time   time.Time `json:"time"`
	URL    string    `json:"url"`
	Status int       `json:"status"`
	Reason string    `json:"reason"`
	Error  string    `json:"error"`
}

// eachLogEntry calls fn with every crawl log entry of every node whose line
// mentions one of urls (as the log writes it: & is \u0026).
func eachLogEntry(dirs map[string]string, urls []string, fn func(node string, e logEntry)) {
	var needles [][]byte
	for _, u := range urls {
		q, _ := json.Marshal(u)
		needles = append(needles, append([]byte(`"url":`), q...))
	}
	for name, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, "crawl.log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e logEntry
			if slices.ContainsFunc(needles, func(n []byte) bool { return bytes.Contains(sc.Bytes(), n) }) &&
				json.Unmarshal(sc.Bytes(), &e) == nil {
				fn(name, e)
			}
		}
		f.Close()
	}
}

// crawlLogLines returns what each node's crawl log says about url: node,
// time, status, reason (to tell where a duplicate fetch came from).
func crawlLogLines(dirs map[string]string, url string) []string {
	var out []string
	eachLogEntry(dirs, []string{url}, func(node string, e logEntry) {
		if e.URL == url {
			out = append(out, fmt.Sprintf("%s %s %d %s %s", node, e.Time.Format("15:04:05.000"), e.Status, e.Reason, e.Error))
		}
	})
	return out
}
