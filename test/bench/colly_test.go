package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

// smallWeb is a bounded web for the fairness tests: 60 hosts, 2,000 pages,
// with every feature of the default web (robots groups and Crawl-delay,
// slow and gzip hosts, redirects, nofollow, frames, the trap).
func smallWeb(t *testing.T) *synthweb.Web {
	t.Helper()
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages = 60, 2000
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	return web
}

func checkCrawler(t *testing.T, name string, run crawler) {
	web := smallWeb(t)
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	srv.PatternDepth = 0 // a fair comparison: colly cuts the trap calendar by the per-host cap alone, as phasecrawl then does
	defer srv.Close()
	exp := web.Expected(srv.Scope(UserAgent))
	if len(exp.CrawlDelay) == 0 || len(exp.Disallowed) == 0 || len(exp.TrapHosts) == 0 {
		t.Fatalf("small web lacks a feature: crawl-delay hosts %d, disallowed %d, trap hosts %d",
			len(exp.CrawlDelay), len(exp.Disallowed), len(exp.TrapHosts))
	}
	res, err := run(context.Background(), srv, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if v := web.Check(exp, 0); len(v) > 0 {
		t.Fatalf("%s: %d violations:\n%s", name, len(v), strings.Join(v, "\n"))
	}
	if res.Pages != int64(exp.Fetches) {
		t.Fatalf("%s fetched %d pages, oracle expects %d", name, res.Pages, exp.Fetches)
	}
	t.Logf("%s: %d pages over %d hosts in %s (%.0f pages/s), %d disallowed never fetched, %d crawl-delay hosts",
		name, res.Pages, exp.Hosts, res.Elapsed.Round(time.Millisecond), float64(res.Pages)/res.Elapsed.Seconds(),
		len(exp.Disallowed), len(exp.CrawlDelay))
}

// TestCollyCorrect proves the comparison fair: colly, as set up by RunColly,
// passes the same oracle check as phasecrawl (every reachable page exactly
// once, robots.txt obeyed and fetched once per host, at most one request in
// flight per host, Crawl-delay honoured, the trap bounded, nothing else).
func TestCollyCorrect(t *testing.T) {
	checkCrawler(t, "colly", func(ctx context.Context, srv *webnode.Server, _ string) (Result, error) {
		return RunColly(ctx, srv, 2*time.Minute)
	})
}

// TestPhasecrawlCorrect is the same check for phasecrawl on the same web.
func TestPhasecrawlCorrect(t *testing.T) {
	checkCrawler(t, "phasecrawl", func(ctx context.Context, srv *webnode.Server, dir string) (Result, error) {
		return RunPhasecrawl(ctx, srv, dir, 2*time.Minute)
	})
}

// TestCrawlersInChild runs both crawlers the way the benchmarks do, each in
// a child process (childCrawl), and checks them as above: the child
// rebuilds the same web from its configuration and reports a Result the
// parent accepts.
func TestCrawlersInChild(t *testing.T) {
	for _, c := range crawlers {
		t.Run(c.name, func(t *testing.T) {
			checkCrawler(t, c.name, func(ctx context.Context, srv *webnode.Server, dir string) (Result, error) {
				res, start, err := childCrawl(ctx, srv, c.name, dir, "")
				if err == nil && (start.IsZero() || res.ServerCPU <= 0 || res.CPU < res.ServerCPU || res.Allocs == 0) {
					t.Errorf("child report incomplete: start %v, CPU %v, server CPU %v, allocs %d", start, res.CPU, res.ServerCPU, res.Allocs)
				}
				return res, err
			})
		})
	}
}

// TestCorrectZipf checks both crawlers, as the benchmarks run them (each
// in a child process), on the Zipf-heavy webs BenchmarkPairedZipf crawls
// and on the first of BenchmarkPairedZipfNoCrawlDelay's (every reachable
// page exactly once, robots.txt obeyed, never two requests at once to a
// host, Crawl-delay honoured, the trap bounded). A crawl with delay 0 may
// only be forgiven gaps shorter than a Crawl-delay, which none of these
// crawls has. Under the race detector it checks the first web only (the
// benchmarks check every crawl they make).
func TestCorrectZipf(t *testing.T) {
	type zweb struct {
		name string
		wc   synthweb.Config
	}
	var webs []zweb
	for _, seed := range zipfSeeds {
		webs = append(webs, zweb{fmt.Sprintf("seed=%d", seed), zipfConfig(seed)})
	}
	nocd := zipfConfig(zipfSeeds[0])
	nocd.CrawlDelayHosts = 0
	webs = append(webs, zweb{fmt.Sprintf("seed=%d,no-crawl-delay", zipfSeeds[0]), nocd})
	if raceOn {
		webs = webs[:1]
	}
	for _, zw := range webs {
		web, err := synthweb.New(zw.wc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range crawlers {
			t.Run(zw.name+"/"+c.name, func(t *testing.T) {
				web.Reset()
				srv, err := webnode.Start(web)
				if err != nil {
					t.Fatal(err)
				}
				srv.PatternDepth = 0 // a fair comparison: colly cuts the trap calendar by the per-host cap alone, as phasecrawl then does
				defer srv.Close()
				exp := web.Expected(srv.Scope(UserAgent))
				res, _, err := childCrawl(context.Background(), srv, c.name, t.TempDir(), "")
				if err != nil {
					t.Fatal(err)
				}
				if v := web.Check(exp, 0); len(v) > 0 {
					t.Fatalf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
				}
				if res.Pages != int64(exp.Fetches) {
					t.Fatalf("fetched %d pages, oracle expects %d", res.Pages, exp.Fetches)
				}
				t.Logf("%d pages, largest site %d URLs, %.0f pages/s", res.Pages, exp.MaxHostURLs, float64(res.Pages)/res.Elapsed.Seconds())
			})
		}
	}
}

// TestPhasecrawlDelayZipf: with a delay, the trips of a Zipf-heavy web's
// large sites keep it between every two requests to a host (refilled
// trips included): the oracle checks every gap against it.
func TestPhasecrawlDelayZipf(t *testing.T) {
	wc := zipfConfig(1)
	wc.Hosts, wc.Pages = 60, 2400 // the largest site ~400 pages
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	srv.PatternDepth = 0 // a fair comparison: colly cuts the trap calendar by the per-host cap alone, as phasecrawl then does
	defer srv.Close()
	exp := web.Expected(srv.Scope(UserAgent))
	const delay = 5 * time.Millisecond
	cfg := srv.NodeConfig("bench", t.TempDir(), delay)
	cfg.UserAgent = UserAgent
	res, err := RunPhasecrawlConfig(context.Background(), cfg, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if v := web.Check(exp, delay); len(v) > 0 {
		t.Fatalf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	if res.Pages != int64(exp.Fetches) {
		t.Fatalf("fetched %d pages, oracle expects %d", res.Pages, exp.Fetches)
	}
	t.Logf("%d pages, largest site %d URLs, %s", res.Pages, exp.MaxHostURLs, res.Elapsed.Round(time.Millisecond))
}
