// Package webnode runs the synthetic web on a loopback listener and builds
// the configuration of a node that crawls it. The demo, the end-to-end tests
// and the benchmarks share it, so they all crawl the same web the same way.
package webnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
)

// MaxPagesPerHost is the per-host cap the crawls use: above every regular
// site's size, so it only bounds the spider trap. A web with a larger site
// gets a cap of that site's size (Server.PerHostCap).
const MaxPagesPerHost = 1000

// Server is the synthetic web served on 127.0.0.1.
type Server struct {
	Web   *synthweb.Web
	Addr  string // HOST:PORT of the listener
	srv   *http.Server
	done  chan struct{}
	conns atomic.Int64

	capOnce sync.Once
	perHost int

	// PatternDepth is scope.max_pattern_depth of the crawls (NodeConfig)
	// and of their oracle (Scope): Start sets the default; 0 turns the rule
	// off, so that the per-host cap alone bounds the trap calendar.
	PatternDepth int
}

// PerHostCap is the per-host cap of crawls of the web: MaxPagesPerHost, or
// the most URLs one of its regular sites has when that is more (a web of
// Zipf-heavy site sizes), so that it still bounds only the trap.
func (s *Server) PerHostCap() int {
	s.capOnce.Do(func() {
		// Reachability depends on robots.txt groups: the crawls' agent.
		exp := s.Web.Expected(synthweb.Scope{Domains: []string{s.Web.Config().Domain}, UserAgent: config.Default().UserAgent})
		s.perHost = max(MaxPagesPerHost, exp.MaxHostURLs)
	})
	return s.perHost
}

// Start serves web on a fresh loopback port.
func Start(web *synthweb.Web) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webnode: listen: %w", err)
	}
	s := &Server{Web: web, Addr: ln.Addr().String(), done: make(chan struct{}), PatternDepth: config.Default().Scope.MaxPatternDepth}
	s.srv = &http.Server{Handler: web, ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener was closed under us; Close reports nothing more useful
		}
	}()
	return s, nil
}

// Conns is how many connections the server has accepted.
func (s *Server) Conns() int64 { return s.conns.Load() }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

// Scope is the synthetic-web scope every crawl here uses (PerHostCap).
func (s *Server) Scope(userAgent string) synthweb.Scope {
	return synthweb.Scope{Domains: []string{s.Web.Config().Domain}, MaxPagesPerHost: s.PerHostCap(), UserAgent: userAgent,
		PatternDepth: s.PatternDepth}
}

// NodeConfig returns the configuration of a node named name that crawls the
// web with the given per-host delay, keeping its data under dir.
func (s *Server) NodeConfig(name, dir string, delay time.Duration) config.Config {
	c := config.Default()
	c.Name = name
	c.Data = filepath.Join(dir, name)
	c.HTTP = "127.0.0.1:0"
	c.Seeds = s.Web.Seeds()
	c.Resolve = []string{s.Web.ResolvePattern() + "=" + s.Addr}
	c.AllowPrivate = true
	c.Delay = delay
	c.Workers = config.Default().Workers
	c.Scope.AllowDomains = []string{s.Web.Config().Domain}
	// Each host of the web is a registered domain of its own (.test is not
	// on the Public Suffix List): scope.max_hosts_per_domain does not bound
	// a web of more hosts than that.
	c.Scope.PrivateSuffixes = []string{s.Web.Config().Domain}
	c.Scope.MaxPagesPerHost = s.PerHostCap()
	c.Scope.MaxPatternDepth = s.PatternDepth
	c.Bucket.MaxQueueWait = 100 * time.Millisecond
	c.Fetch.RetryBackoff = time.Second
	c.ShutdownTimeout = 10 * time.Second
	return c
}
