// Package cli holds the phasecrawl commands, one file each, and Run, which
// picks the command named by the first argument. The commands that talk to
// a running node do so through an api.Client.
//
//	phasecrawl run [flags]                     start a node (run.go)
//	phasecrawl crawl [flags] URL...            crawl sites to the end and exit (crawl.go)
//	phasecrawl seed --node ADDR URL... | -f FILE
//	                                           add seed URLs to a running node (seed.go)
//	phasecrawl status --node ADDR [--json]     show a node's status (status.go)
//	phasecrawl plan --node ADDR                show a node's revisit plan (plan.go)
//	phasecrawl health [--node ADDR] [--ready]  exit 0 when /healthz (/readyz) answers 200 (health.go)
//	phasecrawl pause|resume --node ADDR        pause or resume a node (pause.go)
//	phasecrawl report --data DIR | --node ADDR hosts, MIME-type and status-code reports (report.go)
//	phasecrawl export --data DIR --state STATE write the URLs of a stopped node's frontier (export.go)
//	phasecrawl cdxj --data DIR | FILE...       write or check the CDXJ index of WARC files (cdxj.go)
//	phasecrawl salvage --data DIR --node ADDR  send a dead member's URLs to a live one (salvage.go)
//	phasecrawl demo [--json]                   crawl a synthetic web on loopback (demo.go)
//	phasecrawl synthweb --listen ADDR          serve the synthetic web (synthweb.go)
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/config"
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

// Run runs the command args name (args without the program's name) and
// returns the process's exit status: 0 done, 1 failed, 2 bad usage (the
// crawl command has its own, see crawl.go). stdin is what seed -f - and
// crawl - read (nil: nothing).
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(args[1:], stderr)
	case "crawl":
		return cmdCrawl(args[1:], stdin, stdout, stderr)
	case "seed":
		err = cmdSeed(args[1:], stdin, stdout, stderr)
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

// tokenEnv names the environment variable with the API token file (the
// node's api_token_file key has the same variable).
var tokenEnv = config.EnvName("api_token_file")

// tokenHint says what to do when a node refuses a write (401).
var tokenHint = "give its API token with --token-file or $" + tokenEnv

// nodeFlag defines --node, the API address of a running node (default:
// a node's default http, 127.0.0.1:7070).
func nodeFlag(fs *flag.FlagSet) *string {
	return fs.String("node", config.Default().HTTP, "node API address")
}

// tokenFlag defines --token-file, the file with the node's API token.
func tokenFlag(fs *flag.FlagSet) *string {
	return fs.String("token-file", "", "file with the node's API bearer token (default: $"+tokenEnv+")")
}

// writeClient returns the client of the node at addr for writes: with the
// token of tokenFile, else of $PHASECRAWL_API_TOKEN_FILE (none when
// neither is set), and the given timeout.
func writeClient(addr, tokenFile string, timeout time.Duration) (*api.Client, error) {
	if tokenFile == "" {
		tokenFile = os.Getenv(tokenEnv)
	}
	c := &api.Client{Addr: addr, Timeout: timeout}
	if tokenFile != "" {
		tok, err := api.ReadToken(tokenFile)
		if err != nil {
			return nil, err
		}
		c.Token = tok
	}
	return c, nil
}
