// Package synthweb is demo/synthweb under the import path of the benchmark
// module (test/bench, a module of its own): the same types, functions and
// constants, so that its crawls and the product's are of the same web. New
// code imports github.com/phasecrawl/phasecrawl/demo/synthweb.
package synthweb

import "github.com/phasecrawl/phasecrawl/demo/synthweb"

type (
	Config      = synthweb.Config
	Expectation = synthweb.Expectation
	GapStats    = synthweb.GapStats
	HostReport  = synthweb.HostReport
	Incident    = synthweb.Incident
	Report      = synthweb.Report
	Response    = synthweb.Response
	Scope       = synthweb.Scope
	Visit       = synthweb.Visit
	Web         = synthweb.Web
)

const (
	ReportPath            = synthweb.ReportPath
	VisitsPath            = synthweb.VisitsPath
	DefaultPrerenderBytes = synthweb.DefaultPrerenderBytes
	LongGap               = synthweb.LongGap
)

var (
	New           = synthweb.New
	DefaultConfig = synthweb.DefaultConfig
	IdleGaps      = synthweb.IdleGaps
	LastHosts     = synthweb.LastHosts
	Incidents     = synthweb.Incidents
	SampleDefault = synthweb.SampleDefault
)
