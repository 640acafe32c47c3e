package bench

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

// crawlTimeout bounds one crawl of the default web (~1 min on 2 cores).
const crawlTimeout = 3 * time.Minute

// crawler runs one whole crawl of the web served by srv.
type crawler func(b testing.TB, srv *webnode.Server) (Result, error)

func phasecrawlCrawler(tb testing.TB, srv *webnode.Server) (Result, error) {
	return RunPhasecrawl(context.Background(), srv, tb.TempDir(), crawlTimeout)
}

func collyCrawler(_ testing.TB, srv *webnode.Server) (Result, error) {
	return RunColly(context.Background(), srv, crawlTimeout)
}

// splitViolations separates politeness-gap violations (the only kind a
// crawl with delay 0 may arguably be forgiven: they can only come from
// robots.txt Crawl-delay hosts) from the others.
func splitViolations(v []string) (gaps, others []string) {
	for _, m := range v {
		if strings.Contains(m, " apart, want >= ") || strings.HasSuffix(m, ": politeness gaps") {
			gaps = append(gaps, m)
		} else {
			others = append(others, m)
		}
	}
	return gaps, others
}

// BenchmarkCrawl crawls the default synthetic web (synthweb.DefaultConfig:
// 600 hosts, 29,048 reachable page fetches) once per iteration with
// phasecrawl and with colly, delay 0, on a fresh loopback server, and checks
// each crawl against the web's oracle. Metrics: pages/s, CPU-s/1000pages
// (getrusage user+sys of the whole process, so the in-process web server's
// CPU is included for both crawlers alike) and pages (fetches per crawl).
func BenchmarkCrawl(b *testing.B) {
	benchCrawl(b, synthweb.DefaultConfig())
}

// BenchmarkCrawlLarge is BenchmarkCrawl on a web four times the default
// (2,400 hosts, 96,000 pages, the same mix of features). On the default web
// both crawlers end with the last slow or Crawl-delay host (a host that
// sleeps 50 ms before each of its up to 100 responses cannot be crawled
// politely in less than 5 s), so pages/s there measures that host; here the
// crawl runs long enough for the crawlers' own cost to show.
func BenchmarkCrawlLarge(b *testing.B) {
	wc := synthweb.DefaultConfig()
	wc.Hosts *= 4
	wc.Pages *= 4
	benchCrawl(b, wc)
}

func benchCrawl(b *testing.B, wc synthweb.Config) {
	web, err := synthweb.New(wc)
	if err != nil {
		b.Fatal(err)
	}
	// Both crawlers are served pages rendered once here, before either
	// crawl: the web server's rendering and gzip are the harness's cost, not
	// a crawler's (requests are still recorded and checked one by one).
	cached, size, err := web.Prerender(synthweb.DefaultPrerenderBytes)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("prerendered %d pages, %d MiB", cached, size>>20)
	for _, bc := range []struct {
		name string
		run  crawler
	}{
		{"phasecrawl", phasecrawlCrawler},
		{"colly", collyCrawler},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var pages int64
			var elapsed, cpu time.Duration
			gapViolations := 0
			b.StopTimer()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				web.Reset()
				srv, err := webnode.Start(web)
				if err != nil {
					b.Fatal(err)
				}
				exp := web.Expected(srv.Scope(UserAgent))
				runtime.GC()
				b.StartTimer()
				res, err := bc.run(b, srv)
				b.StopTimer()
				_ = srv.Close()
				if err != nil {
					b.Fatal(err)
				}
				gaps, others := splitViolations(web.Check(exp, 0))
				if len(others) > 0 {
					b.Fatalf("%s crawl incorrect, %d violations:\n%s", bc.name, len(others), strings.Join(others, "\n"))
				}
				if len(gaps) > 0 {
					b.Logf("%s: %d politeness-gap violations:\n%s", bc.name, len(gaps), strings.Join(gaps, "\n"))
				}
				if res.Pages != int64(exp.Fetches) {
					b.Fatalf("%s fetched %d pages, oracle expects %d", bc.name, res.Pages, exp.Fetches)
				}
				if len(res.Series) > 0 {
					b.Logf("%s timeline (run %d):\n%s", bc.name, i, FormatSeries(res.Series, runtime.GOMAXPROCS(0)))
				}
				gapViolations += len(gaps)
				pages += res.Pages
				elapsed += res.Elapsed
				cpu += res.CPU
			}
			b.ReportMetric(float64(pages)/elapsed.Seconds(), "pages/s")
			b.ReportMetric(cpu.Seconds()/(float64(pages)/1000), "CPU-s/1000pages")
			b.ReportMetric(float64(pages)/float64(b.N), "pages")
			b.ReportMetric(float64(gapViolations)/float64(b.N), "gap-violations")
		})
	}
}
