package cluster_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/test/trapweb"
)

// TestProcTrapWebCluster: three members with the default settings,
// seeded through one member's API, crawl the trap web (test/trapweb: a
// calendar, session ids, a path that grows and shop facets on three hosts
// of a 43-host web). Every real page is fetched once, the crawl ends by
// itself and no trap host gets more than 1,000 requests. A trap split over
// the members costs what it costs a node alone (trapweb.Web.Alone, which
// test/trapweb checks against one node): the calendar exactly, since a
// URL's run travels with it to the member that fetches it, and the path
// rules know no state; the facets exactly too, since a member tells the
// others each facet set it admits and the shop's links are checked on one
// member at a time (its phase's) (docs/design/traps.md). Each member may
// fetch its own copy of robots.txt.
func TestProcTrapWebCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seeds, wc.TrapHosts = 40, 800, 3, 0
	wc.SlowHosts, wc.CrawlDelayHosts = 0, 0
	real, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	w := trapweb.New(real, 3)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
	}()
	addr := ln.Addr().String()

	c := newProcCluster(t, real, addr)
	c.extra = []string{"--allow-domain", trapweb.Domain, "--resolve", "*." + trapweb.Domain + "=" + addr,
		"--max-pages-per-host", "100000"} // the shipped cap: the trap limits alone bound the traps
	start := time.Now()
	ps := startCluster(t, c, 3)
	if err := ps[0].postSeeds(w.Seeds()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ps, 4*time.Minute)
	elapsed := time.Since(start)
	d := config.Default()
	v, summary := w.Check(d.Scope.MaxPagesPerHost, d.Scope.MaxPatternDepth, 1000, d.UserAgent, c.delay)
	for _, line := range strings.Split(summary, "\n") {
		t.Log(line)
	}
	t.Logf("3 members: crawl done in %s (members started, seeded and drained)", elapsed.Round(10*time.Millisecond))
	var bad []string
	for _, s := range v {
		// Members share robots.txt best effort: one may fetch its own copy.
		if !strings.Contains(s, "robots.txt fetched") && !strings.Contains(s, "more: robots.txt fetches") {
			bad = append(bad, s)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d violations:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	alone, ok := w.Alone(d.Scope)
	if !ok {
		t.Fatal("the default limits leave a trap unbounded")
	}
	const members = 3
	most := map[string]int{trapweb.KindOther: members}
	aloneTotal, mostTotal := 0, 0
	for kind, n := range alone {
		aloneTotal += n
		if most[kind] == 0 {
			most[kind] = n // exactly what a node alone fetches
		}
		mostTotal += most[kind]
	}
	for h, k := range w.Requests() {
		total := 0
		for kind, n := range k {
			if kind == trapweb.KindSession {
				continue // counted by Check
			}
			total += n
			exact := kind != trapweb.KindOther
			if (exact && n != alone[kind]) || n < alone[kind] || n > most[kind] {
				t.Errorf("trap host %s: %d %s requests, a node alone sends %d (want %d..%d)", h, n, kind, alone[kind], alone[kind], most[kind])
			}
		}
		if total > mostTotal {
			t.Errorf("trap host %s: %d requests, a node alone sends %d (want at most %d)", h, total, aloneTotal, mostTotal)
		}
		t.Logf("trap host %s: %d requests on %d members, %d from a node alone", h, total, members, aloneTotal)
	}
}
