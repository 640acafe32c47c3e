package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/config"
)

// healthAddr is the default --node of `phasecrawl health`: the address in
// PHASECRAWL_HTTP (the API address a containerized or systemd node is
// configured with) with an unspecified host (0.0.0.0, ::) replaced by
// loopback, else 127.0.0.1:7070.
func healthAddr(lookupEnv func(string) (string, bool)) string {
	v, ok := lookupEnv(config.EnvName("http"))
	if !ok {
		return config.Default().HTTP
	}
	host, port, err := net.SplitHostPort(strings.TrimSpace(v))
	if err != nil {
		return config.Default().HTTP
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// cmdHealth asks a node's /healthz (or /readyz with --ready) and fails unless
// it answers 200. It is the probe of images without a shell or curl (the
// Dockerfile's HEALTHCHECK).
func cmdHealth(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("node", healthAddr(os.LookupEnv), "node API address (default: PHASECRAWL_HTTP with 0.0.0.0 as 127.0.0.1, else 127.0.0.1:7070)")
	ready := fs.Bool("ready", false, "ask /readyz (scheduling and fetching) instead of /healthz (process up)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	c := api.Client{Addr: *addr, Timeout: *timeout, MaxAnswer: 4096}
	body, err := c.Get(context.Background(), path)
	if err != nil {
		return fmt.Errorf("%s of %s: %w", path, *addr, err)
	}
	fmt.Fprintf(stdout, "%s %s\n", *addr, strings.TrimSpace(string(body)))
	return nil
}
