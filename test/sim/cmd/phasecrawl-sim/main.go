// Command phasecrawl-sim runs the cluster simulator (package test/sim) for
// several cluster sizes over one synthetic web and prints the tables of
// docs/design/simulator.md.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/test/sim"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "phasecrawl-sim:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("phasecrawl-sim", flag.ContinueOnError)
	hosts := fs.Int("hosts", 1_000_000, "hosts in the synthetic web")
	mean := fs.Float64("mean-pages", 20, "mean pages per host")
	zipf := fs.Float64("zipf", 0.8, "Zipf exponent of the pages per host")
	sizes := fs.String("nodes", "3,10,100,1000", "cluster sizes, comma-separated")
	dur := fs.Duration("duration", 5*time.Minute, "virtual time per run")
	seed := fs.Uint64("seed", 1, "random seed")
	scen := fs.Bool("scenarios", true, "also run a node loss and a partition per size")
	guard := fs.Duration("guard", 0, "cluster.guard (0: min(5s, phase_duration/4); the node's auto guard is min(250ms, phase_duration/4))")
	batchDelay := fs.Duration("batch-delay", 0, "cluster.batch_delay (0: the default, exchange.DefaultConfig)")
	bigHost := fs.Int("big-host", 0, "pages of one more host, host 0, answering in about --big-latency (0: none): a web dominated by one large site")
	bigLatency := fs.Duration("big-latency", time.Millisecond, "median response time of the --big-host host")
	delay := fs.Duration("delay", time.Second, "politeness delay per host (0: none)")
	known := fs.Float64("known", 0.5, "fraction of each host's pages known at the start (0: only its first page)")
	lend := fs.Bool("lend", true, "cluster.lend: owners lend the URLs waiting for their host's phase to the member working on it (--lend=false: each node fetches only the URLs it owns)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *batchDelay < 0 {
		return fmt.Errorf("--batch-delay=%s: must be >= 0", *batchDelay)
	}
	exch := exchange.Config{MaxDelay: *batchDelay}
	kn := *known
	if kn == 0 {
		kn = -1 // WebConfig: negative, only page 0 of every host
	}
	web, err := sim.NewWeb(sim.WebConfig{Hosts: *hosts, MeanPage: *mean, Zipf: *zipf, BigHost: *bigHost, BigLatency: *bigLatency, Known: kn}, *seed)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	log.Info("web", "hosts", web.Hosts(), "pages", web.Pages(), "biggest", web.PagesOf(int(web.Biggest(1)[0])))
	d := *delay
	if d == 0 {
		d = -1 // Config: negative, no delay
	}
	runOne := func(cfg sim.Config) (*sim.Result, error) {
		start := time.Now()
		s, err := sim.New(cfg, web)
		if err != nil {
			return nil, err
		}
		r, err := s.Run()
		if err != nil {
			return nil, err
		}
		s = nil
		debug.FreeOSMemory() // the next run allocates its own buckets and tables
		log.Info("run", "nodes", cfg.Nodes, "solo", cfg.Solo, "lend", !cfg.NoLend && !cfg.Solo, "loss", cfg.Loss != nil, "partition", cfg.Partition != nil,
			"fetched", r.Fetched, "lent", r.Lent, "events", r.Events, "cpu_wall", time.Since(start).Round(time.Millisecond))
		return r, nil
	}
	solo, err := runOne(sim.Config{Nodes: 1, Solo: true, Seed: *seed, Duration: *dur, Guard: *guard, Exchange: exch, Delay: d})
	if err != nil {
		return err
	}
	var reps []sim.SizeReport
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("--nodes: %q: %w", f, err)
		}
		rep := sim.SizeReport{Nodes: n, Solo: solo.PerNodeRate()}
		if rep.Base, err = runOne(sim.Config{Nodes: n, Seed: *seed, Duration: *dur, Guard: *guard, Exchange: exch, NoLend: !*lend, Delay: d}); err != nil {
			return err
		}
		stride := max(web.Pages()/1_000_000, 1)
		rep.Own = sim.RingStats(web, n, stride)
		if *scen {
			if rep.Loss, err = runOne(sim.Config{Nodes: n, Seed: *seed, Duration: *dur, Guard: *guard, Exchange: exch, NoLend: !*lend, Delay: d, Loss: &sim.Loss{At: 30 * time.Second, Node: 0}}); err != nil {
				return err
			}
			rep.PartitionOf = max(1, n/10)
			p := &sim.Partition{At: 30 * time.Second, For: 130 * time.Second, Minority: rep.PartitionOf}
			if rep.Partition, err = runOne(sim.Config{Nodes: n, Seed: *seed, Duration: *dur, Guard: *guard, Exchange: exch, NoLend: !*lend, Delay: d, Partition: p}); err != nil {
				return err
			}
		}
		reps = append(reps, rep)
	}
	lending := "on"
	if !*lend {
		lending = "off"
	}
	bd := *batchDelay
	if bd == 0 {
		bd = exchange.DefaultConfig().MaxDelay
	}
	fmt.Printf("web: %d hosts, %d pages (mean %.0f, Zipf %.1f), %s of virtual time per run, seed %d, lending %s, batch delay %s\n\n", web.Hosts(), web.Pages(), *mean, *zipf, *dur, *seed, lending, bd)
	if *bigHost > 0 {
		sim.WriteBigHost(os.Stdout, web, solo, reps)
		return nil
	}
	sim.Write(os.Stdout, reps)
	return nil
}
