package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/harness"
	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

// Members: one node alone against a cluster of members, each a process
// of its own (the test binary run again with MemberEnv set), crawling the
// web served by the benchmark's process. A member runs until it is
// signalled; the benchmark polls the members' API to see the crawl done.

// MemberEnv carries a member's memberSpec (JSON). Set by the parent only.
const MemberEnv = "PHASECRAWL_BENCH_MEMBER"

// ProfileEnv, when set to a directory, makes each crawl write its own CPU
// profile there (NAME-N.prof, N counting the crawls of the process), so two
// crawls of one process can be compared (go tool pprof -diff_base). A
// measurement aid only: off by default.
const ProfileEnv = "PHASECRAWL_BENCH_CPUPROFILE"

// memberSpec is what a member process needs.
type memberSpec struct {
	Web      synthweb.Config // rebuilt in the child (deterministic) for seeds, host names and scope
	Addr     string          // the web's listener
	Dir      string          // the member's data directory's parent
	Name     string
	API      string // HOST:PORT
	Gossip   string // "": a node alone
	Exchange string
	Join     []string
	KeyFile  string
}

// runMember is a member's whole life when MemberEnv is set: it runs a
// node (alone, or a cluster member) on the spec's web until SIGTERM or
// SIGINT, and returns the process's exit code.
func runMember(specJSON string) int {
	var spec memberSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "bench member: spec:", err)
		return 2
	}
	web, err := synthweb.New(spec.Web)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench member: web:", err)
		return 2
	}
	srv := &webnode.Server{Web: web, Addr: spec.Addr}
	cfg := srv.NodeConfig(spec.Name, spec.Dir, 0)
	cfg.UserAgent = UserAgent
	cfg.HTTP = spec.API
	if spec.Gossip != "" {
		cfg.Cluster.Gossip, cfg.Cluster.Exchange, cfg.Cluster.Join, cfg.Cluster.KeyFile = spec.Gossip, spec.Exchange, spec.Join, spec.KeyFile
	}
	// PHASECRAWL_* variables change the members' settings, for experiments.
	if err := config.ApplyEnv(&cfg, os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "bench member:", err)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench member:", err)
		return 2
	}
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench member:", err)
		return 1
	}
	if dir := os.Getenv(ProfileEnv); dir != "" {
		// The member's CPU profile, written when it is signalled to stop
		// (membersCrawl sends SIGTERM then, not SIGKILL).
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("member-%s-%d.prof", spec.Name, os.Getpid())))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench member: profile:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench member: profile:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := n.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench member:", err)
		return 1
	}
	return 0
}

// membersTimeout bounds one crawl by members (start-up included).
const membersTimeout = 10 * time.Minute

// membersResult is one crawl by n members (a node alone when 1).
type membersResult struct {
	members     int
	pages       int64         // page fetches the members report
	total       time.Duration // from the first process's start to the web's last response
	crawling    time.Duration // from the web's first request to its last response
	cpu         time.Duration // the members' user+sys CPU, start-up to exit
	firstAnswer time.Duration // from the start to the web's first request
	tail        []string      // the hosts that ended the crawl, with their idle time
}

// membersCrawl starts n member processes on 127.0.0.1..n at once (each
// but the first joining the first's gossip address) with the web's seeds,
// waits until they have fetched every page the oracle expects and all
// report the crawl done, checks the crawl against the oracle (every page
// exactly once, robots.txt at most once per member, one request at a time
// per host) and stops them.
func membersCrawl(b testing.TB, web *synthweb.Web, n int) membersResult {
	web.Reset()
	srv, err := webnode.Start(web)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	srv.PatternDepth = 0
	exp := web.Expected(srv.Scope(UserAgent))
	dir := b.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	var specs []memberSpec
	var apis []string
	for i := range n {
		ip := fmt.Sprintf("127.0.0.%d", i+1)
		port := func() string { return strconv.Itoa(harness.FreePort(b, ip)) }
		s := memberSpec{Web: web.Config(), Addr: srv.Addr, Dir: dir, Name: fmt.Sprintf("m%d", i), API: net.JoinHostPort(ip, port())}
		if n > 1 {
			s.Gossip, s.Exchange, s.KeyFile = net.JoinHostPort(ip, port()), net.JoinHostPort(ip, port()), keyFile
			if i > 0 {
				s.Join = []string{specs[0].Gossip}
			}
		}
		specs = append(specs, s)
		apis = append(apis, s.API)
	}
	res := membersResult{members: n}
	var cmds []*exec.Cmd
	start := time.Now()
	for _, s := range specs {
		js, err := json.Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), MemberEnv+"="+string(js))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	stopAll := func() {
		sig := syscall.SIGKILL
		if os.Getenv(ProfileEnv) != "" {
			sig = syscall.SIGTERM // the members write their CPU profiles
		}
		for _, c := range cmds {
			_ = c.Process.Signal(sig)
		}
		for _, c := range cmds {
			_ = c.Wait()
			if c.ProcessState != nil {
				res.cpu += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
			}
		}
	}
	deadline := time.Now().Add(membersTimeout)
	seen := 0
	for seen < 2 {
		if time.Now().After(deadline) {
			why := harness.NotDone(apis)
			stopAll()
			b.Fatalf("%d members: crawl not done within %s: %v", n, membersTimeout, why)
		}
		time.Sleep(20 * time.Millisecond)
		if harness.PagesFetched(apis) >= int64(exp.Fetches) && harness.CrawlDone(apis) {
			seen++
		} else {
			seen = 0
		}
	}
	res.pages = harness.PagesFetched(apis)
	stopAll()
	var first, last time.Time
	for _, vs := range web.Visits() {
		for _, v := range vs {
			if first.IsZero() || v.Start.Before(first) {
				first = v.Start
			}
			if v.End.After(last) {
				last = v.End
			}
		}
	}
	res.total, res.crawling, res.firstAnswer = last.Sub(start), last.Sub(first), first.Sub(start)
	// The hosts that ended the crawl, and the time their connection sat
	// idle: the largest host, crawled by one member at a time, should.
	hosts, stats := synthweb.LastHosts(web.Visits(), 3)
	for i, h := range hosts {
		g := stats[i]
		res.tail = append(res.tail, fmt.Sprintf("%s: %d requests from %.2fs to %.2fs, idle %s (%d gaps of 50ms or more: %s), busy %s",
			h, g.Requests, g.First.Sub(start).Seconds(), g.Last.Sub(start).Seconds(), g.Idle.Round(time.Millisecond), g.Long,
			g.LongIdle.Round(time.Millisecond), g.Busy.Round(time.Millisecond)))
	}
	// robots.txt once per member at most (each member reads its own, or
	// gets it from another); every page exactly once.
	rep := web.Report()
	if vs := harness.Violations(rep, exp, 0, n); len(vs) > 0 {
		b.Fatalf("%d members: crawl incorrect, %d violations:\n%v", n, len(vs), vs)
	}
	if d := harness.Duplicated(rep, exp); len(d) > 0 {
		b.Fatalf("%d members: %d pages fetched more than once", n, len(d))
	}
	if res.pages != int64(exp.Fetches) {
		b.Fatalf("%d members fetched %d pages, oracle expects %d", n, res.pages, exp.Fetches)
	}
	return res
}
