package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

// demoSummary is what `phasecrawl demo` reports at the end.
type demoSummary struct {
	Pages          int64    `json:"pages"`
	Expected       int      `json:"expected_pages"`
	Hosts          int      `json:"hosts"`
	Duplicates     int      `json:"duplicates"`
	MaxConcurrency int      `json:"max_per_host_concurrency"`
	MinGapMS       float64  `json:"min_gap_ms"`
	DelayMS        float64  `json:"delay_ms"`
	Violations     []string `json:"violations"`
	Seconds        float64  `json:"seconds"`
	PagesPerSecond float64  `json:"pages_per_second"`
	WARC           []string `json:"warc"`
	CrawlLog       string   `json:"crawl_log"`
	Data           string   `json:"data"`
}

func cmdDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	delay := fs.Duration("delay", 10*time.Millisecond, "pause between two requests to one host")
	workers := fs.Int("workers", 64, "fetch workers")
	hosts := fs.Int("hosts", synthweb.DefaultConfig().Hosts, "hosts of the synthetic web")
	pages := fs.Int("pages", synthweb.DefaultConfig().Pages, "pages of the synthetic web")
	data := fs.String("data", "", "data directory (default: a new temporary directory)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages = *hosts, *pages
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
	fmt.Fprintf(stderr, "synthetic web on %s: %d hosts, %d reachable pages; crawling with delay %s, %d workers\n",
		srv.Addr, exp.Hosts, exp.Fetches, cfg.Delay, cfg.Workers)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := node.New(cfg, node.Options{Logger: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runCtx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	start := time.Now()
	go func() { runErr <- n.Run(runCtx) }()

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
		s := n.Status()
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
	pagesFetched := n.Status().PagesFetched
	cancel()
	if err := <-runErr; err != nil {
		return err
	}
	rep := web.Report()
	sum := demoSummary{
		Pages: pagesFetched, Expected: exp.Fetches, Hosts: exp.Hosts, Duplicates: rep.Duplicates,
		DelayMS: float64(cfg.Delay) / float64(time.Millisecond), Seconds: elapsed.Seconds(),
		PagesPerSecond: float64(pagesFetched) / elapsed.Seconds(),
		Violations:     web.Check(exp, cfg.Delay),
		CrawlLog:       filepath.Join(cfg.Data, "crawl.log"), Data: cfg.Data,
	}
	minGap := time.Duration(-1)
	for _, h := range rep.Hosts {
		sum.MaxConcurrency = max(sum.MaxConcurrency, h.MaxInFlight)
		if h.MinGap >= 0 && (minGap < 0 || h.MinGap < minGap) {
			minGap = h.MinGap
		}
	}
	sum.MinGapMS = float64(minGap) / float64(time.Millisecond)
	sum.WARC, _ = filepath.Glob(filepath.Join(cfg.Data, "warc", "*.warc.gz"))
	sort.Strings(sum.WARC)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "pages fetched        %d of %d expected, %d hosts, in %.1fs (%.0f pages/s)\n", sum.Pages, sum.Expected, sum.Hosts, sum.Seconds, sum.PagesPerSecond)
		fmt.Fprintf(stdout, "duplicate fetches    %d\n", sum.Duplicates)
		fmt.Fprintf(stdout, "per-host concurrency max %d (limit 1)\n", sum.MaxConcurrency)
		fmt.Fprintf(stdout, "per-host gap         min %.1f ms (delay %.1f ms)\n", sum.MinGapMS, sum.DelayMS)
		fmt.Fprintf(stdout, "violations           %d\n", len(sum.Violations))
		for _, v := range sum.Violations {
			fmt.Fprintf(stdout, "  %s\n", v)
		}
		fmt.Fprintf(stdout, "WARC                 %v\n", sum.WARC)
		fmt.Fprintf(stdout, "crawl log            %s\n", sum.CrawlLog)
	}
	if len(sum.Violations) > 0 {
		return fmt.Errorf("%d violations", len(sum.Violations))
	}
	return nil
}

func cmdSynthweb(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("synthweb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "listen address")
	hosts := fs.Int("hosts", synthweb.DefaultConfig().Hosts, "hosts")
	pages := fs.Int("pages", synthweb.DefaultConfig().Pages, "pages")
	seed := fs.Int64("seed", synthweb.DefaultConfig().Seed, "generator seed")
	domain := fs.String("domain", synthweb.DefaultConfig().Domain, "parent domain of every host")
	traps := fs.Int("trap-hosts", synthweb.DefaultConfig().TrapHosts, "spider-trap hosts (infinite calendars)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seed = *hosts, *pages, *seed
	wc.Domain, wc.TrapHosts = *domain, *traps
	web, err := synthweb.New(wc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "synthetic web: %d hosts, %d pages on %s\n", wc.Hosts, wc.Pages, *listen)
	fmt.Fprintf(stdout, "crawl it with:\n  phasecrawl run --allow-private --allow-domain %s --resolve '%s=%s' --max-pages-per-host %d", wc.Domain, web.ResolvePattern(), *listen, webnode.MaxPagesPerHost)
	for _, s := range web.Seeds() {
		fmt.Fprintf(stdout, " --seed %s", s)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "what it served (JSON): http://%s%s\n", *listen, synthweb.ReportPath)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: *listen, Handler: web.WithReport(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	return nil
}
