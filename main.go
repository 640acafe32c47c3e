// Command phasecrawl is a peer-to-peer web crawler node in the style of
// KSpider: a bbolt frontier, a prime-column bucket that gives each host one
// connection and a polite pause, WARC output and Prometheus metrics.
//
// Its commands (run, crawl, seed, status, plan, health, pause, resume,
// report, export, cdxj, salvage, demo, synthweb) are in package cli;
// `phasecrawl help` lists them. ARCHITECTURE.md maps the packages.
package main

import (
	"os"

	"github.com/phasecrawl/phasecrawl/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
