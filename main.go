// Command phasecrawl is a peer-to-peer web crawler node in the style of
// KSpider: a bbolt frontier, a prime-column bucket that gives each host one
// connection and a polite pause, WARC output and Prometheus metrics.
//
//	phasecrawl crawl [flags] URL...  crawl sites to the end and exit
//	phasecrawl run [flags]        start a node
//	phasecrawl seed --node ADDR URL... | -f FILE
//	phasecrawl status --node ADDR [--json]
//	phasecrawl health [--node ADDR] [--ready]   exit 0 when /healthz (/readyz) answers 200
//	phasecrawl demo [--json]      crawl a synthetic web on loopback
//	phasecrawl synthweb --listen ADDR
//	phasecrawl salvage --data DIR --node ADDR [--cluster-key-file FILE]
//	phasecrawl pause|resume --node ADDR
//	phasecrawl export --data DIR --state completed|in_list|stalled [--format jsonl|text]
//	phasecrawl report --data DIR | --node ADDR [--sort queued|requests|bytes|errors] [--json]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
)

const usage = `phasecrawl — a peer-to-peer polite web crawler (KSpider design)

Usage:
  phasecrawl crawl [flags] URL...        crawl these sites to the end, print a summary and exit (-f FILE, - for stdin)
  phasecrawl run [flags]                 start a node (phasecrawl run -h lists the flags)
  phasecrawl seed --node ADDR URL...     add seed URLs to a running node (-f FILE: one URL a line, - for stdin)
  phasecrawl status --node ADDR [--json] show a node's status
  phasecrawl plan --node ADDR            show a node's revisit plan (per host) and its spare time
  phasecrawl health [--node ADDR] [--ready]  exit 0 when the node's /healthz (/readyz) answers 200
  phasecrawl demo [--json]               crawl a synthetic web on loopback and print a summary
  phasecrawl synthweb --listen ADDR      serve the synthetic web (for trying phasecrawl by hand)
  phasecrawl salvage --data DIR --node ADDR [--cluster-key-file FILE]
                                         send the URLs of a member gone for good (its data directory) to a live member's exchange
  phasecrawl pause --node ADDR           start no new request (requests in flight finish); resume: go on
  phasecrawl resume --node ADDR
  phasecrawl export --data DIR --state completed|in_list|stalled [--format jsonl|text]
                                         write the URLs of a stopped node's frontier in those states
  phasecrawl cdxj --data DIR [--all|--check] | FILE...
                                         write (or check) the CDXJ index of WARC files
  phasecrawl report --data DIR | --node ADDR [--sort queued|requests|bytes|errors] [--n N] [--json]
                                         hosts, MIME-type and status-code reports of a stopped node or of a cluster
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(args[1:], stderr)
	case "crawl":
		return cmdCrawl(args[1:], os.Stdin, stdout, stderr)
	case "seed":
		err = cmdSeed(args[1:], stdout, stderr)
	case "status":
		err = cmdStatus(args[1:], stdout, stderr)
	case "plan":
		err = cmdPlan(args[1:], stdout, stderr)
	case "health":
		err = cmdHealth(args[1:], stdout, stderr)
	case "demo":
		err = cmdDemo(args[1:], stdout, stderr)
	case "synthweb":
		err = cmdSynthweb(args[1:], stdout, stderr)
	case "salvage":
		err = cmdSalvage(args[1:], stdout, stderr)
	case "pause", "resume":
		err = cmdPause(args[0], args[1:], stdout, stderr)
	case "export":
		err = cmdExport(args[1:], stdout, stderr)
	case "cdxj":
		err = cmdCDXJ(args[1:], stdout, stderr)
	case "report":
		err = cmdReport(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "phasecrawl: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "phasecrawl %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// newLogger builds the slog logger the configuration asks for.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func cmdRun(args []string, stderr io.Writer) error {
	cfg, err := config.Load(args, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	log.Info("config loaded", "name", cfg.Name, "data", cfg.Data, "http", cfg.HTTP, "workers", cfg.Workers, "delay", cfg.Delay, "seeds", len(cfg.Seeds))
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: log}})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.ExitWhenDone {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go watchDone(ctx, n, cfg.DoneGrace, log, cancel)
	}
	return n.Run(ctx)
}
