// Package e2e crawls the synthetic web with real nodes and checks the result
// against the web's own oracle: every reachable in-scope page fetched exactly
// once, robots.txt obeyed, one connection per host, gaps never below the
// delay, the trap bounded, and the outputs complete.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
)

// crawlTimeout bounds one crawl; the default web takes ~25 s without -race.
const crawlTimeout = 8 * time.Minute

func startWeb(t *testing.T, wc synthweb.Config) *webnode.Server {
	t.Helper()
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// runNode starts a node and returns a function that stops it and waits.
func runNode(t *testing.T, cfg config.Config) (*node.Node, func()) {
	t.Helper()
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("node run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("node did not stop within a minute")
		}
	}
	t.Cleanup(stop)
	return n, stop
}

// waitDone waits until the node reports nothing left to do, and still
// nothing 200 ms later.
func waitDone(t *testing.T, n *node.Node, timeout time.Duration) {
	t.Helper()
	wait.Steady(t, timeout, 200*time.Millisecond, "crawl done", func() (bool, string) {
		return n.Done(), fmt.Sprintf("%+v", n.Status())
	})
}

// TestSingleNodeCrawl is the end-to-end test: one node crawls the
// default synthetic web (≥ 20,000 pages over ≥ 500 hosts) to completion.
func TestSingleNodeCrawl(t *testing.T) {
	srv := startWeb(t, synthweb.DefaultConfig())
	const delay = 10 * time.Millisecond
	cfg := srv.NodeConfig("e2e", t.TempDir(), delay)
	exp := srv.Web.Expected(srv.Scope(cfg.UserAgent))
	if exp.Fetches < 20000 || exp.Hosts < 500 {
		t.Fatalf("web too small for the issue's floor: %d pages over %d hosts", exp.Fetches, exp.Hosts)
	}
	n, stop := runNode(t, cfg)
	waitDone(t, n, crawlTimeout)
	status := fetchStatus(t, n)
	metrics := fetchText(t, "http://"+n.Addr().String()+"/metrics")
	stop()

	if v := srv.Web.Check(exp, delay); len(v) > 0 {
		t.Fatalf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	rep := srv.Web.Report()
	for host, h := range rep.Hosts {
		if h.MaxInFlight > 1 {
			t.Errorf("host %s saw %d requests at once", host, h.MaxInFlight)
		}
	}
	if status.PagesFetched != int64(exp.Fetches) {
		t.Errorf("status pages_fetched = %d, want %d", status.PagesFetched, exp.Fetches)
	}
	if status.Frontier.InList != 0 || status.Frontier.InProgress != 0 || status.Frontier.Stalled != 0 {
		t.Errorf("frontier not drained: %+v", status.Frontier)
	}
	for _, want := range []string{
		"phasecrawl_pages_fetched_total{code=\"200\"}", "phasecrawl_robots_denied_total",
		"phasecrawl_frontier_urls{state=\"completed\"}", "phasecrawl_bucket_elements{state=\"free\"}",
		"phasecrawl_fetch_duration_seconds_bucket", "phasecrawl_urls_new_total", "phasecrawl_urls_discovered_total",
		"phasecrawl_bytes_fetched_total", "phasecrawl_stalled_retries_total",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The WARC holds one response or revisit record per page fetch
	// (robots.txt responses aside; a revisit for a payload archived under
	// another URL, warc.dedup), every record passes gowarc's strict
	// validation (syntax, lengths, digests), and each file's CDXJ index
	// points at its responses and revisits.
	files, _ := filepath.Glob(filepath.Join(cfg.Data, "warc", "*.warc.gz"))
	if len(files) == 0 {
		t.Fatal("no WARC file written")
	}
	responses, revisits, requests := 0, 0, 0
	for _, f := range files {
		r, err := gowarc.NewWarcFileReader(f, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		fileResponses := 0
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s: record at %d: %v", f, rec.Offset, err)
			}
			if _, err := rec.WarcRecord.ValidateDigest(); err != nil || len(rec.Validation) > 0 {
				t.Fatalf("%s: record at %d: %v %v", f, rec.Offset, err, rec.Validation)
			}
			typ := rec.WarcRecord.Type()
			if typ == gowarc.Response || typ == gowarc.Revisit {
				fileResponses++
			}
			if !strings.HasSuffix(rec.WarcRecord.WarcHeader().Get(gowarc.WarcTargetURI), "/robots.txt") {
				switch typ {
				case gowarc.Response:
					responses++
				case gowarc.Revisit:
					if ref, err := rec.WarcRecord.RevisitRef(); err != nil || ref.Profile != archive.ProfileIdenticalPayload || ref.TargetUri == "" || ref.TargetDate == "" {
						t.Errorf("%s: revisit record at %d: %+v %v", f, rec.Offset, ref, err)
					}
					revisits++
				case gowarc.Request:
					requests++
				}
			}
			rec.Close()
		}
		r.Close()
		if lines, err := archive.CheckCDXJ(f); err != nil || lines != fileResponses {
			t.Errorf("%s: CDXJ index of %d lines for %d responses: %v", f, lines, fileResponses, err)
		}
	}
	if responses+revisits != exp.Fetches || requests != exp.Fetches {
		t.Errorf("WARC holds %d responses, %d revisits and %d requests, want %d responses and revisits, and as many requests", responses, revisits, requests, exp.Fetches)
	}

	// The crawl log has a line per fetched page and per robots-denied URL.
	lines, robots := 0, 0
	if _, err := archive.ReadCrawlLog(filepath.Join(cfg.Data, "crawl.log"), func(e archive.LogEntry) error {
		lines++
		if e.Reason == "robots" {
			robots++
		}
		return nil
	}); err != nil {
		t.Fatalf("read crawl log: %v", err)
	}
	if lines != exp.Fetches+len(exp.Disallowed) || robots != len(exp.Disallowed) {
		t.Errorf("crawl log: %d lines (%d robots), want %d (%d robots)", lines, robots, exp.Fetches+len(exp.Disallowed), len(exp.Disallowed))
	}
	t.Logf("crawled %d pages over %d hosts; %d robots-denied; %d WARC files; %d pages archived as revisits of identical payloads", exp.Fetches, exp.Hosts, robots, len(files), revisits)
}

// TestStopAndResume stops a node gracefully in the middle of a crawl and
// starts it again on the same data: the crawl completes and no page is
// fetched twice (a graceful stop lets in-flight fetches finish).
func TestStopAndResume(t *testing.T) {
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages = 80, 3000
	srv := startWeb(t, wc)
	const delay = 5 * time.Millisecond
	dir := t.TempDir()
	cfg := srv.NodeConfig("resume", dir, delay)
	exp := srv.Web.Expected(srv.Scope(cfg.UserAgent))

	n, stop := runNode(t, cfg)
	wait.For(t, crawlTimeout, "a third of the pages fetched", func() (bool, string) {
		st := n.Status()
		return st.PagesFetched >= int64(exp.Fetches/3), fmt.Sprintf("%+v", st)
	})
	stop()
	if c := n.Frontier().Counts(); c.InProgress != 0 {
		t.Errorf("graceful stop left %d URLs IN_PROGRESS", c.InProgress)
	}
	first := n.Status().PagesFetched
	if first >= int64(exp.Fetches) {
		t.Fatalf("the crawl finished before the stop (%d pages); make the web bigger", first)
	}

	n2, stop2 := runNode(t, cfg)
	waitDone(t, n2, crawlTimeout)
	stop2()
	// The trap calendar costs what it costs a crawl that never stopped:
	// each URL's run (the steps on its way) is kept in its frontier
	// record, so the restarted node refuses the same months
	// (docs/design/traps.md); Check counts each trap host's fetches.
	if len(exp.TrapHosts) == 0 {
		t.Fatal("the web has no trap host")
	}
	// The robots.txt cache lives in memory, so the restarted process fetches
	// each host's robots.txt once more; everything else must hold exactly.
	var v []string
	for _, s := range srv.Web.Check(exp, delay) {
		if !strings.Contains(s, "robots.txt fetched 2 times") && !strings.Contains(s, "more: robots.txt fetches") {
			v = append(v, s)
		}
	}
	if len(v) > 0 {
		t.Fatalf("%d violations after resume:\n%s", len(v), strings.Join(v, "\n"))
	}
	if got := first + n2.Status().PagesFetched; got != int64(exp.Fetches) {
		t.Errorf("pages fetched %d + %d = %d, want %d", first, n2.Status().PagesFetched, got, exp.Fetches)
	}
}

func fetchStatus(t *testing.T, n *node.Node) node.Status {
	t.Helper()
	var s node.Status
	if err := json.Unmarshal([]byte(fetchText(t, "http://"+n.Addr().String()+"/v1/status")), &s); err != nil {
		t.Fatalf("decode status: %v", err)
	}
	return s
}

func fetchText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}
