package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/salvage"
)

// keyFileEnv names the environment variable with the cluster key file (the
// node's cluster.key_file key has the same variable).
const keyFileEnv = "PHASECRAWL_CLUSTER_KEY_FILE"

// cmdSalvage sends what a node that is gone for good held (its unfinished
// URLs, the URLs waiting in its outbox, the fingerprints of the pages it
// completed) to a live member's exchange. See docs/operations/salvage.md.
func cmdSalvage(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("salvage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: phasecrawl salvage --data DIR --node ADDR [--cluster-key-file FILE] [flags]

Sends what a cluster member that is gone for good held, read from its data
directory (read-only), to a live member: its unfinished URLs with their
depth, the URLs waiting in its outbox, and the fingerprints of the pages it
completed. ADDR is the live member's exchange address (its --exchange; see
the members' "exchange" in phasecrawl status), not its API address.
Running it twice fetches nothing twice. Flags:
`)
		fs.PrintDefaults()
	}
	data := fs.String("data", "", "data directory of the dead node (its --data). Required")
	addr := fs.String("node", "", "exchange address HOST:PORT of a live member. Required (unless --dry-run)")
	keyFile := fs.String("cluster-key-file", "", "file with the cluster key (default: $"+keyFileEnv+")")
	batch := fs.Int("batch", salvage.DefaultBatchSize, "entries per batch, 1..100000")
	attempts := fs.Int("attempts", salvage.DefaultAttempts, "times a batch is sent before giving up, 1..100")
	dry := fs.Bool("dry-run", false, "read and count, send nothing")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	if *data == "" {
		return errors.New("--data: required: the data directory of the dead node")
	}
	if *batch < 1 || *batch > 100_000 {
		return fmt.Errorf("--batch=%d: must be 1..100000", *batch)
	}
	if *attempts < 1 || *attempts > 100 {
		return fmt.Errorf("--attempts=%d: must be 1..100", *attempts)
	}
	cfg := salvage.Config{BatchSize: *batch, Attempts: *attempts, DryRun: *dry,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if !*dry {
		if err := checkHostPort(*addr); err != nil {
			return fmt.Errorf("--node=%q: %w (the exchange address of a live member)", *addr, err)
		}
		if *keyFile == "" {
			*keyFile = os.Getenv(keyFileEnv)
		}
		if *keyFile == "" {
			return fmt.Errorf("--cluster-key-file: required (or $%s): the cluster's key", keyFileEnv)
		}
		key, err := membership.LoadKey(*keyFile)
		if err != nil {
			return err
		}
		cfg.Node, cfg.Key = *addr, key
	}
	d, err := salvage.OpenDir(*data, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, runErr := salvage.Run(ctx, d, cfg)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else if runErr == nil || sum.Sent > 0 {
		fmt.Fprint(stdout, sum)
	}
	return runErr
}

// checkHostPort validates a HOST:PORT address.
func checkHostPort(addr string) error {
	if addr == "" {
		return errors.New("required")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %w", err)
	}
	if host == "" {
		return errors.New("want HOST:PORT: empty host")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("want HOST:PORT: port %q must be 1..65535", port)
	}
	return nil
}
