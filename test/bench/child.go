package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

// The benchmarks run each crawler in a process of its own (a child: the
// test binary run again with ChildEnv set), against the synthetic web
// served by the benchmark's process. In one process the crawler would share
// its Go heap with the prerendered web (~1.1 GiB live), which sets the
// garbage collector's pace for both and is nothing a crawler meets in
// production; and the second crawler of a pair would inherit the heap the
// first one grew. The web, its records and the oracle check stay in the
// parent; the child reports its Result as one JSON line on stdout.

// ChildEnv carries a child's crawlSpec (JSON). Set by the parent only.
const ChildEnv = "PHASECRAWL_BENCH_CHILD"

// InProcessEnv, when set to 1, runs the crawlers in the benchmark's own
// process instead.
const InProcessEnv = "PHASECRAWL_BENCH_INPROCESS"

// crawlSpec is what a child needs to crawl the parent's web.
type crawlSpec struct {
	Crawler string          // "phasecrawl" or "colly"
	Web     synthweb.Config // rebuilt in the child (deterministic) for seeds, host names and scope
	Addr    string          // the web's listener
	Dir     string          // phasecrawl's data directory
	Profile string          // a CPU profile's path, or ""
}

// childResult is a child's report.
type childResult struct {
	Result
	Start time.Time // the crawl's start, for the parent's tail report
	Err   string
}

// runChild is the child's whole life when ChildEnv is set: it crawls and
// prints a childResult, and returns the process's exit code.
func runChild(specJSON string) int {
	var out childResult
	res, start, err := crawlSpecRun(specJSON)
	out.Result, out.Start = res, start
	if err != nil {
		out.Err = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		return 1
	}
	return 0
}

// crawlSpecRun decodes a child's spec, rebuilds the web's description and
// runs the crawl; it returns the crawl's Result and start.
func crawlSpecRun(specJSON string) (Result, time.Time, error) {
	var spec crawlSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return Result{}, time.Time{}, fmt.Errorf("bench child: spec: %w", err)
	}
	run := crawlerNamed(spec.Crawler)
	if run == nil {
		return Result{}, time.Time{}, fmt.Errorf("bench child: no crawler %q", spec.Crawler)
	}
	web, err := synthweb.New(spec.Web)
	if err != nil {
		return Result{}, time.Time{}, fmt.Errorf("bench child: web: %w", err)
	}
	srv := &webnode.Server{Web: web, Addr: spec.Addr}
	if spec.Profile != "" {
		f, err := os.Create(spec.Profile)
		if err != nil {
			return Result{}, time.Time{}, fmt.Errorf("bench child: profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return Result{}, time.Time{}, fmt.Errorf("bench child: profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	rss0 := resetPeakRSS()
	alloc0, start := heapAllocs(), time.Now()
	res, err := run(context.Background(), srv, spec.Dir)
	res.Allocs = heapAllocs() - alloc0
	if hwm := procStatus("VmHWM"); hwm > rss0 {
		res.RSSGrowth = hwm - rss0
	}
	return res, start, err
}

// resetPeakRSS gives the system back what the setup freed, resets the
// process's peak resident set to its current one (Linux: "5" to
// /proc/self/clear_refs) and returns the current one (0 where there is
// none).
func resetPeakRSS() int64 {
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return 0
	}
	return procStatus("VmRSS")
}

// procStatus is the size field name of /proc/self/status (in kB there)
// in bytes, or 0.
func procStatus(name string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// heapAllocs is the bytes the process has allocated on its Go heap so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// crawlTimeout bounds one crawl of the default web (~1 min on 2 cores).
const crawlTimeout = 3 * time.Minute

// crawler runs one whole crawl of the web served by srv, keeping its data
// (if any) under dir.
type crawler func(ctx context.Context, srv *webnode.Server, dir string) (Result, error)

// crawlers are the two crawlers compared, phasecrawl first.
var crawlers = [2]struct {
	name string
	run  crawler
}{
	{"phasecrawl", func(ctx context.Context, srv *webnode.Server, dir string) (Result, error) {
		return RunPhasecrawl(ctx, srv, dir, crawlTimeout)
	}},
	{"colly", func(ctx context.Context, srv *webnode.Server, _ string) (Result, error) {
		return RunColly(ctx, srv, crawlTimeout)
	}},
}

// crawlerNamed is the crawler of crawlers named name, or nil.
func crawlerNamed(name string) crawler {
	for _, c := range crawlers {
		if c.name == name {
			return c.run
		}
	}
	return nil
}

// childCrawl runs the crawler named name in a child process against srv and
// returns its Result (CPU: the child's during its crawl plus this
// process's, the web server's, over the child's whole run) and the crawl's
// start.
func childCrawl(ctx context.Context, srv *webnode.Server, name, dir, profile string) (Result, time.Time, error) {
	spec, err := json.Marshal(crawlSpec{Crawler: name, Web: srv.Web.Config(), Addr: srv.Addr, Dir: dir, Profile: profile})
	if err != nil {
		return Result{}, time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, crawlTimeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(spec))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	cpu0 := cpuTime()
	err = cmd.Run()
	server := cpuTime() - cpu0
	if err != nil {
		return Result{}, time.Time{}, fmt.Errorf("bench: %s child: %w", name, err)
	}
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	var out childResult
	if err := json.Unmarshal(lines[len(lines)-1], &out); err != nil {
		return Result{}, time.Time{}, fmt.Errorf("bench: %s child's report %q: %w", name, lines[len(lines)-1], err)
	}
	if out.Err != "" {
		return Result{}, time.Time{}, fmt.Errorf("bench: %s child: %s", name, out.Err)
	}
	out.Result.ServerCPU = server
	out.Result.CPU += server
	return out.Result, out.Start, nil
}

// inProcess reports whether InProcessEnv asks for in-process crawls.
func inProcess() bool { return os.Getenv(InProcessEnv) == "1" }
