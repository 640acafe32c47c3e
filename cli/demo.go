package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
)

// demoSummary is what `phasecrawl demo` reports at the end.
type demoSummary struct {
	Pages          int64       `json:"pages"`
	Expected       int         `json:"expected_pages"`
	Hosts          int         `json:"hosts"`
	Duplicates     int         `json:"duplicates"`
	MaxConcurrency int         `json:"max_per_host_concurrency"` // over the whole cluster
	MinGapMS       float64     `json:"min_gap_ms"`               // over the whole cluster
	DelayMS        float64     `json:"delay_ms"`
	Violations     []string    `json:"violations"`
	Seconds        float64     `json:"seconds"`
	PagesPerSecond float64     `json:"pages_per_second"`
	WARC           []string    `json:"warc"`
	CrawlLog       string      `json:"crawl_log"`
	Data           string      `json:"data"`
	Nodes          []demoShare `json:"nodes,omitempty"` // with --nodes > 1
	// LastHosts are the hosts whose last request came latest: what ended
	// the crawl, and how long each sat idle waiting for its next URL.
	LastHosts []demoHost `json:"last_hosts"`
}

// demoHost is one host's requests as the synthetic web saw them
// (synthweb.IdleGaps), times in seconds from the crawl's start.
type demoHost struct {
	Host      string  `json:"host"`
	Requests  int     `json:"requests"`
	FirstS    float64 `json:"first_s"`
	LastS     float64 `json:"last_s"`
	BusyS     float64 `json:"busy_s"`      // the requests' time, summed
	IdleS     float64 `json:"idle_s"`      // between a response and the next request, summed
	LongGaps  int     `json:"long_gaps"`   // idle gaps of 50 ms or more
	LongIdleS float64 `json:"long_idle_s"` // their sum
	IdleP50MS float64 `json:"idle_p50_ms"` // the gaps' median
}

// demoLastHosts is how many hosts demoSummary.LastHosts gives.
const demoLastHosts = 5

// demoShare is one node's part of a cluster demo.
type demoShare struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"` // its loopback address
	Pages int64  `json:"pages"`
}

func cmdDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	delay := fs.Duration("delay", 10*time.Millisecond, "pause between two requests to one host")
	workers := fs.Int("workers", config.Default().Workers, "fetch workers (per node)")
	hosts := fs.Int("hosts", synthweb.DefaultConfig().Hosts, "hosts of the synthetic web")
	pages := fs.Int("pages", synthweb.DefaultConfig().Pages, "pages of the synthetic web")
	data := fs.String("data", "", "data directory (default: a new temporary directory)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	nodes := fs.Int("nodes", 1, "cluster nodes, on 127.0.0.1 ... 127.0.0.N (1..50; loopback aliases, as Linux has)")
	phase := fs.Duration("phase-duration", 2*time.Second, "phase epoch of a cluster (--nodes > 1)")
	lend := fs.Bool("lend", config.Default().Cluster.Lend, "lend waiting URLs to the member working on their host's phase (cluster.lend; --nodes > 1)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the crawl (from the seeds to the end) to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nodes < 1 || *nodes > 50 {
		return fmt.Errorf("--nodes=%d: must be in 1..50", *nodes)
	}
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages = *hosts, *pages
	if *nodes > 1 {
		// max_pages_per_host is a per-node cap: a spider trap would be
		// crawled up to N times the cap, which the oracle counts exactly.
		wc.TrapHosts = 0
	}
	web, err := synthweb.New(wc)
	if err != nil {
		return err
	}
	srv, err := webnode.Start(web)
	if err != nil {
		return err
	}
	defer srv.Close()
	dir := *data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "phasecrawl-demo-"); err != nil {
			return fmt.Errorf("temporary directory: %w", err)
		}
	}
	cfg := srv.NodeConfig("demo", dir, *delay)
	cfg.Workers = *workers
	exp := web.Expected(srv.Scope(cfg.UserAgent))
	fmt.Fprintf(stderr, "synthetic web on %s: %d hosts, %d reachable pages; crawling with delay %s, %d workers",
		srv.Addr, exp.Hosts, exp.Fetches, cfg.Delay, cfg.Workers)
	if *nodes > 1 {
		fmt.Fprintf(stderr, " per node, %d nodes", *nodes)
	}
	fmt.Fprintln(stderr)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var dn []*demoNode
	if *nodes == 1 {
		n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: log}})
		if err != nil {
			return err
		}
		dn = append(dn, &demoNode{name: cfg.Name, data: cfg.Data, n: n})
	} else if dn, err = startDemoCluster(runCtx, srv, dir, *delay, *workers, *nodes, *phase, *lend, log, stderr); err != nil {
		return err
	}
	start := time.Now()
	runErr := make(chan error, len(dn))
	for _, d := range dn {
		go func() { runErr <- d.n.Run(runCtx) }()
	}
	if *nodes > 1 {
		if err := waitDemoCluster(ctx, dn, time.Minute); err != nil {
			cancel()
			for range dn {
				<-runErr
			}
			return err
		}
		start = time.Now()
		res, err := dn[0].n.AddSeeds(ctx, web.Seeds())
		if err != nil || len(res.Bad) > 0 {
			cancel()
			for range dn {
				<-runErr
			}
			return fmt.Errorf("demo: seeds: %+v %v", res.Bad, err)
		}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.After(*timeout)
	var lastPages int64
	doneSeen := 0
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-deadline:
			fmt.Fprintf(stderr, "\ndemo: gave up after %s\n", *timeout)
			break wait
		case <-tick.C:
		}
		s := demoStatus(dn)
		fmt.Fprintf(stderr, "\rpages %6d  %5d/s  frontier in_list %6d in_progress %5d stalled %3d  errors %d   ",
			s.PagesFetched, s.PagesFetched-lastPages, s.Frontier.InList, s.Frontier.InProgress, s.Frontier.Stalled, s.FetchErrors)
		lastPages = s.PagesFetched
		if s.Done {
			if doneSeen++; doneSeen >= 2 {
				break
			}
		} else {
			doneSeen = 0
		}
	}
	fmt.Fprintln(stderr)
	elapsed := time.Since(start)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	var shares []demoShare
	for _, d := range dn {
		shares = append(shares, demoShare{Name: d.name, Addr: d.ip, Pages: d.n.Status().PagesFetched})
	}
	pagesFetched := demoStatus(dn).PagesFetched
	cancel()
	var errs []error
	for range dn {
		errs = append(errs, <-runErr)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	rep := web.Report()
	sum := demoSummary{
		Pages: pagesFetched, Expected: exp.Fetches, Hosts: exp.Hosts, Duplicates: rep.Duplicates,
		DelayMS: float64(cfg.Delay) / float64(time.Millisecond), Seconds: elapsed.Seconds(),
		PagesPerSecond: float64(pagesFetched) / elapsed.Seconds(),
		Violations:     demoViolations(rep.Check(exp, cfg.Delay), rep, exp, len(dn)),
		CrawlLog:       filepath.Join(dn[0].data, "crawl.log"), Data: dir,
	}
	if len(dn) > 1 {
		sum.Nodes = shares
		sum.CrawlLog = filepath.Join(dir, "node*", "crawl.log")
	}
	minGap := time.Duration(-1)
	for _, h := range rep.Hosts {
		sum.MaxConcurrency = max(sum.MaxConcurrency, h.MaxInFlight)
		if h.MinGap >= 0 && (minGap < 0 || h.MinGap < minGap) {
			minGap = h.MinGap
		}
	}
	sum.MinGapMS = float64(minGap) / float64(time.Millisecond)
	for _, d := range dn {
		w, _ := filepath.Glob(filepath.Join(d.data, "warc", "*.warc.gz"))
		sum.WARC = append(sum.WARC, w...)
	}
	sort.Strings(sum.WARC)
	lastHosts, lastStats := synthweb.LastHosts(web.Visits(), demoLastHosts)
	sum.LastHosts = []demoHost{}
	for i, h := range lastHosts {
		g := lastStats[i]
		sum.LastHosts = append(sum.LastHosts, demoHost{Host: h, Requests: g.Requests,
			FirstS: g.First.Sub(start).Seconds(), LastS: g.Last.Sub(start).Seconds(),
			BusyS: g.Busy.Seconds(), IdleS: g.Idle.Seconds(), LongGaps: g.Long, LongIdleS: g.LongIdle.Seconds(),
			IdleP50MS: float64(g.P50) / float64(time.Millisecond)})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "pages fetched        %d of %d expected, %d hosts, in %.1fs (%.0f pages/s)\n", sum.Pages, sum.Expected, sum.Hosts, sum.Seconds, sum.PagesPerSecond)
		for _, sh := range sum.Nodes {
			fmt.Fprintf(stdout, "  %-18s %d pages (%.1f%%) on %s\n", sh.Name, sh.Pages, 100*float64(sh.Pages)/float64(max(sum.Pages, 1)), sh.Addr)
		}
		fmt.Fprintf(stdout, "duplicate fetches    %d\n", sum.Duplicates)
		fmt.Fprintf(stdout, "per-host concurrency max %d (limit 1)\n", sum.MaxConcurrency)
		fmt.Fprintf(stdout, "per-host gap         min %.1f ms (delay %.1f ms)\n", sum.MinGapMS, sum.DelayMS)
		fmt.Fprintf(stdout, "violations           %d\n", len(sum.Violations))
		for _, v := range sum.Violations {
			fmt.Fprintf(stdout, "  %s\n", v)
		}
		fmt.Fprintf(stdout, "last hosts           (requests, first and last request from the start, idle between requests: all, and in gaps of 50 ms or more)\n")
		for _, h := range sum.LastHosts {
			fmt.Fprintf(stdout, "  %-22s %5d  %5.1fs..%5.1fs  idle %5.1fs, %4d gaps of 50ms+ %5.1fs\n", h.Host, h.Requests, h.FirstS, h.LastS, h.IdleS, h.LongGaps, h.LongIdleS)
		}
		fmt.Fprintf(stdout, "WARC                 %v\n", sum.WARC)
		fmt.Fprintf(stdout, "crawl log            %s\n", sum.CrawlLog)
	}
	if len(sum.Violations) > 0 {
		return fmt.Errorf("%d violations", len(sum.Violations))
	}
	return nil
}
