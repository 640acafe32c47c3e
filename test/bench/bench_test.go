package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

// TestMain runs a crawl and nothing else in a benchmark's child process
// (see child.go).
func TestMain(m *testing.M) {
	if spec := os.Getenv(ChildEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	if spec := os.Getenv(MemberEnv); spec != "" {
		os.Exit(runMember(spec))
	}
	os.Exit(m.Run())
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
// CPU is included for both crawlers alike), pages (fetches per crawl) and
// bound-pages/s: the most any polite crawler can reach on the web, its
// slowest host's requests one after another (synthweb's MinCrawlTime; on
// the default web 29,048 pages / 3.68 s, a Crawl-delay host's 46 pages).
func BenchmarkCrawl(b *testing.B) {
	benchCrawl(b, synthweb.DefaultConfig())
}

// BenchmarkCrawlLarge is BenchmarkCrawl on a web four times the default
// (largeConfig). On the default web both crawlers end with the last slow or
// Crawl-delay host (its bound-pages/s is close to what they reach), so
// pages/s there largely measures that host; here the crawl runs long enough
// for the crawlers' own cost to show.
func BenchmarkCrawlLarge(b *testing.B) {
	benchCrawl(b, largeConfig())
}

// largeConfig is a web four times the default (2,400 hosts, 96,000 pages,
// 113,244 fetches, the same mix of features).
func largeConfig() synthweb.Config {
	wc := synthweb.DefaultConfig()
	wc.Hosts *= 4
	wc.Pages *= 4
	return wc
}

// zipfSeeds are the seeds of the Zipf-heavy webs (zipfConfig).
var zipfSeeds = []int64{1, 2, 3}

// zipfConfig is a web of Zipf-heavy site sizes: 500 hosts, 20,000
// content pages (a mean of 40), sizes ∝ 1/rank^0.8, so the largest site
// has ~1,550 pages (plus its redirects, 404s and files) and a few sites
// hold a third of the web; five hosts (1%) answer in 50 ms (sites of at
// most 20 pages). The rest as the default web: robots groups and
// Crawl-delay, gzip hosts, redirects, nofollow, frames, the trap.
func zipfConfig(seed int64) synthweb.Config {
	wc := synthweb.DefaultConfig()
	wc.Seed = seed
	wc.Hosts, wc.Pages, wc.ZipfS, wc.MaxSitePages = 500, 20000, 0.8, 20000
	wc.SlowHosts, wc.SlowMin, wc.SlowMax, wc.SlowMaxPages = 0.01, 50*time.Millisecond, 50*time.Millisecond, 20
	return wc
}

// prerenderedWeb builds the web of wc with its pages rendered once, before
// any crawl: the web server's rendering and gzip are the harness's cost, not
// a crawler's (requests are still recorded and checked one by one).
func prerenderedWeb(b *testing.B, wc synthweb.Config) *synthweb.Web {
	web, err := synthweb.New(wc)
	if err != nil {
		b.Fatal(err)
	}
	cached, size, err := web.Prerender(synthweb.DefaultPrerenderBytes)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("prerendered %d pages, %d MiB", cached, size>>20)
	warmHeap()
	return web
}

// warmHeap grows the Go heap to its next GC goal once, touching every page,
// and gives it back to the runtime (not to the OS). The prerendered web
// makes the process's live heap ~1.1 GiB on the large web, so its GC goal
// is ~2.2 GiB: without this, the first crawl after a prerender faults in
// the ~1.1 GiB between them page by page (the kernel zeroes each page; on
// this machine kind ~2 core-s, and the crawl's first seconds run at half
// speed), and the later crawls reuse it, so whichever crawler went first
// paid the harness's cost. That was measured with the crawlers in this
// process (PHASECRAWL_BENCH_INPROCESS=1); in a child, only the web server
// allocates here.
func warmHeap() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	free := int64(ms.NextGC) - int64(ms.HeapAlloc)
	old := debug.SetGCPercent(-1) // no GC while the blocks are live
	const chunk = 64 << 20
	var blocks [][]byte
	for n := int64(0); n < free; n += chunk {
		blk := make([]byte, chunk)
		for i := 0; i < len(blk); i += 4096 {
			blk[i] = 1
		}
		blocks = append(blocks, blk)
	}
	runtime.KeepAlive(blocks)
	blocks = nil
	debug.SetGCPercent(old)
	runtime.GC()
}

// checkedCrawl crawls web once with run on a fresh loopback server (the
// benchmark timer runs during the crawl only), checks the crawl against the
// web's oracle (b fails on any violation other than a politeness gap) and
// returns its result, its politeness-gap violations and the web's
// MinCrawlTime.
func checkedCrawl(b *testing.B, web *synthweb.Web, name string, run crawler, i int) (Result, int, time.Duration) {
	web.Reset()
	srv, err := webnode.Start(web)
	if err != nil {
		b.Fatal(err)
	}
	srv.PatternDepth = 0 // a fair comparison: colly cuts the trap calendar by the per-host cap alone, as phasecrawl then does
	exp := web.Expected(srv.Scope(UserAgent))
	runtime.GC()
	var res Result
	start := time.Now()
	b.StartTimer()
	if inProcess() {
		stopProfile := startCrawlProfile(b, name)
		res, err = run(context.Background(), srv, b.TempDir())
		stopProfile()
	} else {
		res, start, err = childCrawl(context.Background(), srv, name, b.TempDir(), crawlProfilePath(name))
	}
	b.StopTimer()
	res.Conns = srv.Conns()
	_ = srv.Close()
	if err != nil {
		b.Fatal(err)
	}
	gaps, others := splitViolations(web.Check(exp, 0))
	if len(others) > 0 {
		b.Fatalf("%s crawl incorrect, %d violations:\n%s", name, len(others), strings.Join(others, "\n"))
	}
	if len(gaps) > 0 {
		b.Logf("%s: %d politeness-gap violations:\n%s", name, len(gaps), strings.Join(gaps, "\n"))
	}
	if res.Pages != int64(exp.Fetches) {
		b.Fatalf("%s fetched %d pages, oracle expects %d", name, res.Pages, exp.Fetches)
	}
	res.Tail5 = lastPagesTime(web, 0.05)
	if len(res.Series) > 0 {
		b.Logf("%s timeline (run %d):\n%s", name, i, FormatSeries(res.Series, runtime.GOMAXPROCS(0)))
	}
	if tailOn() {
		b.Logf("%s tail (run %d):\n%s", name, i, TailReport(web, start, 4))
	}
	return res, len(gaps), exp.MinCrawlTime
}

// lastPagesTime is how long the last share of the crawl's page requests
// took: from the end of the one at (1-share) of them, in the order they
// ended, to the end of the last one (robots.txt excluded), as the web
// recorded them. A crawl that ends with a few large sites fetched one
// request at a time spends long on its last pages.
func lastPagesTime(web *synthweb.Web, share float64) time.Duration {
	var ends []time.Time
	for _, vs := range web.Visits() {
		for _, v := range vs {
			if v.URI != "/robots.txt" {
				ends = append(ends, v.End)
			}
		}
	}
	if len(ends) == 0 {
		return 0
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	k := int(float64(len(ends)) * (1 - share))
	return ends[len(ends)-1].Sub(ends[min(k, len(ends)-1)])
}

var profiledCrawls int

// crawlProfilePath is the CPU profile path of the next crawl named name
// when ProfileEnv is set (NAME-N.prof, N counting the crawls of the
// process), else "".
func crawlProfilePath(name string) string {
	dir := os.Getenv(ProfileEnv)
	if dir == "" {
		return ""
	}
	profiledCrawls++
	return filepath.Join(dir, fmt.Sprintf("%s-%d.prof", name, profiledCrawls))
}

// startCrawlProfile starts a CPU profile of one crawl when ProfileEnv is
// set and returns the function that ends it.
func startCrawlProfile(b *testing.B, name string) func() {
	path := crawlProfilePath(name)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// tally sums the Results of one crawler's crawls in a benchmark.
type tally struct {
	pages                       int64
	elapsed, cpu, server, tail5 time.Duration
	allocs                      uint64
	conns, rss                  int64 // rss: the largest RSSGrowth
}

func (t *tally) add(res Result) {
	t.pages += res.Pages
	t.elapsed += res.Elapsed
	t.cpu += res.CPU
	t.tail5 += res.Tail5
	t.server += res.ServerCPU
	t.allocs += res.Allocs
	t.conns += res.Conns
	t.rss = max(t.rss, res.RSSGrowth)
}

// pps is the crawls' pages per second.
func (t *tally) pps() float64 { return float64(t.pages) / t.elapsed.Seconds() }

// report reports the tally's metrics over n crawls, each name prefixed by
// prefix: pages/s, CPU-s/1000pages, conns and last5%-s (the time the last
// 5% of the page requests took, lastPagesTime), and when the crawler ran in
// a child process own-CPU-s/1000pages, alloc-KiB/page and rss-growth-MiB.
func (t *tally) report(b *testing.B, prefix string, n int) {
	kpages := float64(t.pages) / 1000
	b.ReportMetric(t.pps(), prefix+"pages/s")
	b.ReportMetric(t.cpu.Seconds()/kpages, prefix+"CPU-s/1000pages")
	b.ReportMetric(float64(t.conns)/float64(n), prefix+"conns")
	b.ReportMetric(t.tail5.Seconds()/float64(n), prefix+"last5%-s")
	if t.server > 0 {
		b.ReportMetric((t.cpu-t.server).Seconds()/kpages, prefix+"own-CPU-s/1000pages")
		b.ReportMetric(float64(t.allocs)/1024/float64(t.pages), prefix+"alloc-KiB/page")
		b.ReportMetric(float64(t.rss)/(1<<20), prefix+"rss-growth-MiB")
	}
}

func benchCrawl(b *testing.B, wc synthweb.Config) {
	web := prerenderedWeb(b, wc)
	for _, bc := range crawlers {
		b.Run(bc.name, func(b *testing.B) {
			var t tally
			var bound time.Duration
			gapViolations := 0
			b.StopTimer()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, gaps, least := checkedCrawl(b, web, bc.name, bc.run, i)
				gapViolations += gaps
				bound += least
				t.add(res)
			}
			t.report(b, "", b.N)
			b.ReportMetric(float64(t.pages)/float64(b.N), "pages")
			b.ReportMetric(float64(gapViolations)/float64(b.N), "gap-violations")
			// The most pages/s any polite crawler can reach on this web: its
			// slowest host's chain of requests (synthweb.Expectation.MinCrawlTime).
			b.ReportMetric(float64(t.pages)/bound.Seconds(), "bound-pages/s")
		})
	}
}

// BenchmarkPaired is BenchmarkCrawl with the two crawlers run back to back
// in each iteration (phasecrawl first in even iterations, colly first in
// odd ones, counting the iterations of every call in the process), so the machine's drift (15-20% within an hour on the machines
// this was measured on) and the first crawl of a process being slower
// weigh on both alike. Metrics: each crawler's (tally.report, prefixed by
// its name), and ratio, phasecrawl's pages/s over colly's in the
// iterations' sum.
func BenchmarkPaired(b *testing.B) {
	benchPaired(b, synthweb.DefaultConfig())
}

// BenchmarkPairedLarge is BenchmarkPaired on BenchmarkCrawlLarge's web.
func BenchmarkPairedLarge(b *testing.B) {
	benchPaired(b, largeConfig())
}

// BenchmarkPairedZipf is BenchmarkPaired on the Zipf-heavy webs
// (zipfConfig), one sub-benchmark per seed: the end of such a crawl is a
// few large sites, each a long run of requests over one connection, or a
// Crawl-delay host found late (bound-pages/s says which bounds it).
func BenchmarkPairedZipf(b *testing.B) {
	for _, seed := range zipfSeeds {
		b.Run(fmt.Sprintf("seed=%d", seed), func(b *testing.B) {
			benchPaired(b, zipfConfig(seed))
		})
	}
}

// BenchmarkPairedZipfNoCrawlDelay is BenchmarkPairedZipf with no
// Crawl-delay host (zipfConfig with CrawlDelayHosts 0): with Crawl-delay
// hosts of 30-80 ms and up to 50 pages, no polite crawler passes
// 7,400-9,200 pages/s on those webs (bound-pages/s), so once a crawler
// nears that its ratio to another measures the bound, not the crawler.
// Without them the bound is the five slow hosts' chains (16,700-17,700
// pages/s), and the crawl ends with its largest sites.
func BenchmarkPairedZipfNoCrawlDelay(b *testing.B) {
	for _, seed := range zipfSeeds {
		b.Run(fmt.Sprintf("seed=%d", seed), func(b *testing.B) {
			wc := zipfConfig(seed)
			wc.CrawlDelayHosts = 0
			benchPaired(b, wc)
		})
	}
}

// pairedRuns counts the calls of benchPaired in this process (benchmarks
// run one at a time): the order alternates across them too, since with
// -benchtime 1x every call has one iteration (i = 0), and phasecrawl would
// always go first.
var pairedRuns int

func benchPaired(b *testing.B, wc synthweb.Config) {
	web := prerenderedWeb(b, wc)
	var t [2]tally
	var bound time.Duration
	first := pairedRuns
	pairedRuns++
	b.StopTimer()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			c := (first + i + k) % 2 // alternate which crawler goes first
			res, _, least := checkedCrawl(b, web, crawlers[c].name, crawlers[c].run, i)
			t[c].add(res)
			bound += least
		}
	}
	for c := range 2 {
		t[c].report(b, crawlers[c].name+"-", b.N)
	}
	b.ReportMetric(t[0].pps()/t[1].pps(), "ratio")
	// The most pages/s any polite crawler can reach on this web (as in
	// benchCrawl; both crawlers' crawls counted).
	b.ReportMetric(float64(t[0].pages+t[1].pages)/bound.Seconds(), "bound-pages/s")
}
