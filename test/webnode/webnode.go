// Package webnode is demo/webnode under the import path of the benchmark
// module (test/bench, a module of its own). New code imports
// github.com/phasecrawl/phasecrawl/demo/webnode.
package webnode

import "github.com/phasecrawl/phasecrawl/demo/webnode"

// Server is the synthetic web served on 127.0.0.1 (webnode.Server).
type Server = webnode.Server

// MaxPagesPerHost is the per-host cap of the crawls (webnode.MaxPagesPerHost).
const MaxPagesPerHost = webnode.MaxPagesPerHost

// Start serves web on a fresh loopback port (webnode.Start).
var Start = webnode.Start
