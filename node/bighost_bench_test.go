package node

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/links"
)

// bigHostPages is the size of BenchmarkBigHost's one site.
const bigHostPages = 2000

// bigHostWeb is a web of one host of bigHostPages content pages (with its
// redirects, 404s and files), no slow host, no Crawl-delay, no trap.
func bigHostWeb(tb testing.TB) *synthweb.Web {
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.MaxSitePages, wc.Seeds = 1, bigHostPages, bigHostPages, 1
	wc.UnlinkedHosts, wc.TrapHosts, wc.SlowHosts, wc.CrawlDelayHosts = 0, 0, 0, 0
	web, err := synthweb.New(wc)
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, err := web.Prerender(synthweb.DefaultPrerenderBytes); err != nil {
		tb.Fatal(err)
	}
	return web
}

// BenchmarkBigHost crawls one host of 2,000 pages with one node, delay 0,
// its defaults otherwise (frontier persistence and WARC on), and, on the
// same server, fetches the same pages in a tight loop over one keep-alive
// connection with the node's HTTP client, extracting each HTML page's links
// as the node does (a crawler parses every page; the loop does nothing
// else: no robots.txt, no frontier, no WARC, no log, every URL known up
// front). Metrics: pages/s of each, and ratio, the node's over the loop's.
// The crawl is checked against the web's oracle.
func BenchmarkBigHost(b *testing.B) {
	web := bigHostWeb(b)
	var crawlT, loopT, crawlCPU, loopCPU time.Duration
	var gaps, loopGaps []time.Duration
	pages := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			if (i+k)%2 == 0 {
				d, cpu, n := bigHostCrawl(b, web)
				crawlT, pages, crawlCPU = crawlT+d, pages+n, crawlCPU+cpu
				gaps = append(gaps, requestGaps(web)...)
			} else {
				c0 := processCPU()
				loopT += bigHostLoop(b, web)
				loopCPU += processCPU() - c0
				loopGaps = append(loopGaps, requestGaps(web)...)
			}
		}
	}
	crawlPPS := float64(pages) / crawlT.Seconds()
	loopPPS := float64(pages) / loopT.Seconds()
	b.ReportMetric(crawlPPS, "node-pages/s")
	b.ReportMetric(loopPPS, "loop-pages/s")
	b.ReportMetric(crawlPPS/loopPPS, "ratio")
	b.ReportMetric(float64(crawlCPU.Microseconds())/float64(pages), "node-CPU-µs/page")
	b.ReportMetric(float64(loopCPU.Microseconds())/float64(pages), "loop-CPU-µs/page")
	reportGaps(b, "node-", gaps)
	reportGaps(b, "loop-", loopGaps)
}

// processCPU is the process's user+sys CPU time so far (the web server's
// included: it runs in this process for the node and the loop alike).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// requestGaps is, for the one host of web, the time between the end of
// each request and the start of the next one as the server saw them.
func requestGaps(web *synthweb.Web) []time.Duration {
	var out []time.Duration
	for _, vs := range web.Visits() {
		for i := 1; i < len(vs); i++ {
			out = append(out, vs[i].Start.Sub(vs[i-1].End))
		}
	}
	return out
}

// reportGaps reports the mean time the connection was idle between two
// requests (gap-µs) and the share of that idle time in gaps over 1 ms
// (long-gap-share: trips ending, waits for a refill or a commit).
func reportGaps(b *testing.B, prefix string, gaps []time.Duration) {
	if len(gaps) == 0 {
		return
	}
	var sum, long time.Duration
	for _, g := range gaps {
		sum += g
		if g > time.Millisecond {
			long += g
		}
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(gaps)), prefix+"gap-µs")
	b.ReportMetric(float64(long)/float64(max(sum, 1)), prefix+"long-gap-share")
}

// bigHostScope is the scope of BenchmarkBigHost's crawls: no per-host cap
// below the site's size.
func bigHostScope(srv *webnode.Server) synthweb.Scope {
	sc := srv.Scope(config.Default().UserAgent)
	sc.MaxPagesPerHost = 0
	return sc
}

// bigHostCrawl crawls web with a fresh node and returns the time from the
// node's start to its crawl being done, the process's CPU time over that
// span, and the pages fetched.
func bigHostCrawl(b *testing.B, web *synthweb.Web) (time.Duration, time.Duration, int) {
	b.StopTimer()
	web.Reset()
	srv, err := webnode.Start(web)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	exp := web.Expected(bigHostScope(srv))
	c := srv.NodeConfig("big", b.TempDir(), 0)
	c.Scope.MaxPagesPerHost = 0
	n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	b.StartTimer()
	start, cpu0 := time.Now(), processCPU()
	go func() { errc <- n.Run(ctx) }()
	// Polled every millisecond, not through wait.Steady (every 60 ms at
	// this timeout): the poll's step is the resolution of the measured time.
	for seen := 0; seen < 2; {
		if n.Done() {
			seen++
		} else {
			seen = 0
		}
		if time.Since(start) > time.Minute {
			b.Fatalf("crawl not done after a minute: %+v", n.Status())
		}
		time.Sleep(time.Millisecond)
	}
	d, cpu := time.Since(start), processCPU()-cpu0
	b.StopTimer()
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	if v := web.Check(exp, 0); len(v) > 0 {
		b.Fatalf("%d violations, first: %s", len(v), v[0])
	}
	if got := int(n.Status().PagesFetched); got != exp.Fetches {
		b.Fatalf("fetched %d pages, want %d", got, exp.Fetches)
	}
	b.StartTimer()
	return d, cpu, exp.Fetches
}

// bigHostLoop fetches the pages a crawl of web fetches, one after another
// over one connection, extracting the links of each HTML page, and returns
// the time it took.
func bigHostLoop(b *testing.B, web *synthweb.Web) time.Duration {
	b.StopTimer()
	web.Reset()
	srv, err := webnode.Start(web)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	exp := web.Expected(bigHostScope(srv))
	urls := make([]string, 0, len(exp.Pages))
	for u := range exp.Pages {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	c := srv.NodeConfig("loop", b.TempDir(), 0)
	cc := fetch.DefaultClientConfig()
	cc.UserAgent, cc.AllowPrivate = c.UserAgent, true
	for _, r := range c.Resolve {
		rule, err := fetch.ParseResolve(r)
		if err != nil {
			b.Fatal(err)
		}
		cc.Resolve = append(cc.Resolve, rule)
	}
	client, err := fetch.NewClient(cc)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	found := 0
	b.StartTimer()
	start := time.Now()
	for _, u := range urls {
		resp, err := client.Fetch(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		if isHTML(resp.ContentType, resp.Body) {
			if base, err := url.Parse(resp.URL); err == nil {
				found += len(links.ExtractFast(base, resp.Body).Links)
			}
		}
		resp.Release()
	}
	d := time.Since(start)
	b.StopTimer()
	if found == 0 || srv.Conns() != 1 {
		b.Fatalf("loop: %d links, %d connections (want some links, one connection)", found, srv.Conns())
	}
	b.StartTimer()
	return d
}
