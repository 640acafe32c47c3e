// Package bench compares phasecrawl with github.com/gocolly/colly/v2 on the
// synthetic web (test/synthweb). It is a nested Go module so that colly never
// becomes a dependency of phasecrawl; `go test ./...` at the repository root
// does not enter it. See docs/design/performance.md for the command and the figures.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gocolly/colly/v2"
	"github.com/temoto/robotstxt"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/webnode"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// UserAgent is the user agent of both crawlers (phasecrawl's default): it
// selects the "phasecrawl" robots.txt groups of the synthetic web, so the
// oracle's expectation is the same for both.
var UserAgent = config.Default().UserAgent

// Result is one crawl's measurement.
type Result struct {
	Pages   int64         // page fetches (robots.txt excluded)
	Elapsed time.Duration // start to "nothing left to do"
	CPU     time.Duration // user+sys CPU of the crawler and the web server over the same span
	// ServerCPU is the web server's part of CPU when the crawler ran in a
	// child process (see child.go); 0 in process, where the two cannot be
	// told apart.
	ServerCPU time.Duration
	// Allocs is the bytes the crawler allocated on its Go heap during the
	// crawl, when it ran in a child process; 0 in process.
	Allocs uint64
	// RSSGrowth is how much the crawler process's peak resident set during
	// the crawl exceeded its resident set at the start (after its setup:
	// the child's copy of the web's structure), in bytes, when it ran in a
	// child process on Linux; 0 otherwise.
	RSSGrowth int64
	// Conns is how many connections the web accepted during the crawl
	// (set by the benchmark, which owns the web).
	Conns int64
	// Tail5 is how long the last 5% of the crawl's page requests took
	// (set by the benchmark, from the web's records).
	Tail5  time.Duration
	Series []Sample // the crawl's timeline when PHASECRAWL_BENCH_SERIES=1 (see series.go)
}

// cpuTime is the process's user+sys CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RunPhasecrawl crawls the web served by srv with one phasecrawl node as
// configured by webnode.NodeConfig (frontier persistence and WARC on, the
// defaults; config.Default().Workers workers) with delay 0, keeping its data under dir. It returns
// once the node reports nothing left to do and has shut down (the
// measurement stops before the shutdown).
func RunPhasecrawl(ctx context.Context, srv *webnode.Server, dir string, timeout time.Duration) (Result, error) {
	cfg := srv.NodeConfig("bench", dir, 0)
	cfg.UserAgent = UserAgent
	cfg.Workers = config.Default().Workers
	// PHASECRAWL_* variables change the node's settings, for experiments
	// (PHASECRAWL_FRONTIER_BATCH_DELAY=40ms…); the figures in the README use none.
	if err := config.ApplyEnv(&cfg, os.LookupEnv); err != nil {
		return Result{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if !cfg.WARC.Enabled {
		return Result{}, errors.New("bench: WARC output must be on")
	}
	return RunPhasecrawlConfig(ctx, cfg, timeout)
}

// RunPhasecrawlConfig is RunPhasecrawl with a given node configuration (for
// experiments with other settings).
func RunPhasecrawlConfig(ctx context.Context, cfg config.Config, timeout time.Duration) (Result, error) {
	n, err := node.New(cfg, node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return Result{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	cpu0, start := cpuTime(), time.Now()
	go func() { errc <- n.Run(runCtx) }()
	smp := startSampler(start, cpu0, func() int64 { return n.Status().PagesFetched }, func() string {
		st := n.Status()
		f, b := st.Frontier, st.Bucket
		return fmt.Sprintf("in_list %6d in_progress %5d | queuing %4d fetching %3d timewait %4d", f.InList, f.InProgress, b.Queuing, b.Fetching, b.TimeWait)
	})
	defer smp.stop()

	// Done twice in a row, 5 ms apart (like test/e2e's waitDone, finer; the
	// check reads counters only). It was 20 ms apart: up to 40 ms added to
	// a crawl that colly's Wait ends at once.
	deadline := time.Now().Add(timeout)
	seen := 0
	var res Result
	for {
		if n.Done() {
			if seen++; seen >= 2 {
				break
			}
		} else {
			seen = 0
		}
		if time.Now().After(deadline) {
			cancel()
			<-errc
			return Result{}, fmt.Errorf("bench: phasecrawl not done after %s: %+v", timeout, n.Status())
		}
		select {
		case <-ctx.Done():
			cancel()
			<-errc
			return Result{}, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	res.Elapsed, res.CPU = time.Since(start), cpuTime()-cpu0
	res.Pages = n.Status().PagesFetched
	res.Series = smp.stop()
	cancel()
	if err := <-errc; err != nil {
		return res, err
	}
	return res, nil
}

// RunColly crawls the web served by srv with colly, set up to be correct
// and polite like phasecrawl, and returns when colly has nothing left to do.
//
// Set-up (see the issue, item 6):
//   - colly.Async(true), robots.txt obeyed (IgnoreRobotsTxt=false), MaxDepth 0
//     (unlimited), phasecrawl's user agent;
//   - one LimitRule per host (DomainGlob = the exact host, Parallelism 1,
//     Delay 0 = --delay 0) plus a transport with MaxConnsPerHost 1: one
//     connection and one request at a time per host. colly's Limit is not
//     safe to call while requests run (it appends the rule under its lock
//     but compiles it outside, and GetMatchingRule reads the slice header
//     unlocked), so the rules are registered up front, one per host name of
//     the web (srv.Web.HostNames()); a crawler discovering hosts would have
//     to do the same from a host list. colly scans its rules linearly on
//     every request: that cost is colly's.
//   - the transport dials every *.synth.test host at the web's address (like
//     --resolve); idle connections are kept (one per host, no global cap) so
//     colly keeps a persistent connection per host like phasecrawl;
//   - scope: a URLFilter for http(s)://*.synth.test/ plus the same check
//     before Visit;
//   - links are de-duplicated before Visit with our own mutex-protected set
//     of URLs normalized by urlscope.Normalize (gocolly/colly#520: colly's own
//     visited check races under Async); AllowURLRevisit=true because colly's
//     redirect check would otherwise mark a redirect target visited and the
//     Visit of that target (our own enqueue) would be refused;
//   - redirects are not followed inline (RedirectHandler returns
//     http.ErrUseLastResponse); the Location of a 3xx is enqueued like any
//     discovered link, so fetch counts are comparable;
//   - links: a/area href, frame/iframe src, resolved against the first
//     <base href> (colly's Request.AbsoluteURL), rel=nofollow links skipped,
//     no link of a page with <meta name=robots content=nofollow|none>
//     followed; colly only parses 2xx (< 203) text/html responses, so 404,
//     410 and non-HTML bodies give no links, as the oracle expects;
//   - at most srv.PerHostCap() URLs admitted per host (bounds the trap);
//   - robots.txt: colly fetches it inside Visit, unsynchronized, so two
//     goroutines visiting a new host at once would both fetch it; the first
//     Visit of each host is therefore serialized by a per-host mutex (later
//     Visits of that host find it in colly's cache);
//   - Crawl-delay: colly ignores it. The transport reads each robots.txt
//     response with temoto/robotstxt (the parser colly itself uses) and, for
//     hosts with a Crawl-delay for our agent, sets that host's LimitRule.Delay
//     (colly sleeps Delay after each request while holding the host's slot)
//     and waits Delay after the robots.txt response, so no two requests to
//     the host are closer than Crawl-delay, as the oracle checks. The write
//     happens before any page request of that host is issued (the first Visit
//     of a host is serialized, see above), so it does not race.
func RunColly(ctx context.Context, srv *webnode.Server, timeout time.Duration) (Result, error) {
	cc, err := newCollyCrawl(srv)
	if err != nil {
		return Result{}, err
	}
	defer cc.tr.CloseIdleConnections()
	cpu0, start := cpuTime(), time.Now()
	for _, s := range srv.Web.Seeds() {
		cc.enqueue(s)
	}
	smp := startSampler(start, cpu0, cc.pages.Load, nil)
	defer smp.stop()
	done := make(chan struct{})
	go func() { cc.c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		return Result{}, fmt.Errorf("bench: colly not done after %s (%d pages)", timeout, cc.pages.Load())
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	res := Result{Elapsed: time.Since(start), CPU: cpuTime() - cpu0, Pages: cc.pages.Load()}
	res.Series = smp.stop()
	if err := cc.firstError(); err != nil {
		return res, err
	}
	return res, nil
}

type collyCrawl struct {
	c      *colly.Collector
	tr     *http.Transport
	domain string
	rules  map[string]*colly.LimitRule // host -> its rule; read-only after setup
	cap    int                         // URLs admitted per host at most (webnode.Server.PerHostCap)
	pages  atomic.Int64

	mu      sync.Mutex
	seen    map[string]struct{} // normalized URLs admitted
	perHost map[string]int      // admitted URLs per host
	hosts   map[string]*hostGate

	errMu sync.Mutex
	errs  []error
}

// hostGate serializes the first Visit of a host (the one that fetches its
// robots.txt inside colly).
type hostGate struct {
	mu    sync.Mutex
	ready atomic.Bool
}

func newCollyCrawl(srv *webnode.Server) (*collyCrawl, error) {
	domain := srv.Web.Config().Domain
	cc := &collyCrawl{
		domain:  domain,
		cap:     srv.PerHostCap(),
		rules:   make(map[string]*colly.LimitRule),
		seen:    make(map[string]struct{}),
		perHost: make(map[string]int),
		hosts:   make(map[string]*hostGate),
	}
	c := colly.NewCollector(
		colly.Async(true),
		colly.UserAgent(UserAgent),
		colly.MaxDepth(0),
		colly.AllowURLRevisit(),
		colly.URLFilters(regexp.MustCompile(`(?i)^https?://([a-z0-9-]+\.)*`+regexp.QuoteMeta(domain)+`(:[0-9]+)?/`)),
	)
	c.IgnoreRobotsTxt = false
	for _, h := range srv.Web.HostNames() {
		r := &colly.LimitRule{DomainGlob: h, Parallelism: 1}
		if err := c.Limit(r); err != nil {
			return nil, fmt.Errorf("bench: colly limit rule for %s: %w", h, err)
		}
		cc.rules[h] = r
	}
	dialer := &net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}
	addr := srv.Addr
	cc.tr = &http.Transport{
		DialContext: func(ctx context.Context, network, hostport string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(hostport)
			if err != nil {
				return nil, err
			}
			if !cc.inDomain(host) {
				return nil, fmt.Errorf("bench: %s is outside %s", host, domain)
			}
			return dialer.DialContext(ctx, network, addr)
		},
		MaxConnsPerHost:       1,
		MaxIdleConnsPerHost:   1,
		MaxIdleConns:          0, // no global cap: keep one idle connection per host
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
	}
	c.WithTransport(&pageCounter{cc: cc, next: cc.tr})
	c.SetRedirectHandler(func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse })

	c.OnHTML("html", cc.onHTML)
	c.OnError(func(r *colly.Response, err error) {
		if r != nil && r.StatusCode >= 300 && r.StatusCode < 400 && r.Headers != nil {
			if loc := r.Headers.Get("Location"); loc != "" && r.Request != nil {
				cc.enqueue(r.Request.AbsoluteURL(loc))
			}
			return
		}
		if r != nil && r.StatusCode >= 400 {
			return // 404/410: expected, no links
		}
		if errors.Is(err, colly.ErrNoURLFiltersMatch) {
			return // a redirect out of the domain: colly's redirect check drops it, as we would
		}
		cc.fail(fmt.Errorf("colly: %v: %w", reqURL(r), err))
	})
	cc.c = c
	return cc, nil
}

func reqURL(r *colly.Response) string {
	if r == nil || r.Request == nil || r.Request.URL == nil {
		return "?"
	}
	return r.Request.URL.String()
}

func (cc *collyCrawl) fail(err error) {
	cc.errMu.Lock()
	cc.errs = append(cc.errs, err)
	cc.errMu.Unlock()
}

func (cc *collyCrawl) firstError() error {
	cc.errMu.Lock()
	defer cc.errMu.Unlock()
	if len(cc.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%d colly errors, first: %w", len(cc.errs), cc.errs[0])
}

func (cc *collyCrawl) inDomain(host string) bool {
	return host == cc.domain || strings.HasSuffix(host, "."+cc.domain)
}

// onHTML extracts the followed links of a 2xx HTML page.
func (cc *collyCrawl) onHTML(e *colly.HTMLElement) {
	nofollow := false
	e.DOM.Find("meta[name]").Each(func(_ int, s *goquery.Selection) {
		if !strings.EqualFold(strings.TrimSpace(s.AttrOr("name", "")), "robots") {
			return
		}
		for _, f := range strings.FieldsFunc(strings.ToLower(s.AttrOr("content", "")), func(r rune) bool {
			return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f'
		}) {
			if f == "nofollow" || f == "none" {
				nofollow = true
			}
		}
	})
	if nofollow {
		return
	}
	e.DOM.Find("a[href], area[href], frame[src], iframe[src]").Each(func(_ int, s *goquery.Selection) {
		n := s.Get(0)
		if n.Namespace != "" {
			return
		}
		attr := "src"
		if n.Data == "a" || n.Data == "area" {
			attr = "href"
			for _, f := range strings.Fields(strings.ToLower(s.AttrOr("rel", ""))) {
				if f == "nofollow" {
					return
				}
			}
		}
		cc.enqueue(e.Request.AbsoluteURL(s.AttrOr(attr, "")))
	})
}

// enqueue admits a discovered absolute URL once (normalized), within the
// domain and the per-host cap, and hands it to colly.
func (cc *collyCrawl) enqueue(raw string) {
	if raw == "" {
		return
	}
	u, err := urlscope.Normalize(raw)
	if err != nil {
		return
	}
	pu, err := url.Parse(u)
	if err != nil || !cc.inDomain(pu.Hostname()) {
		return
	}
	host := pu.Host
	cc.mu.Lock()
	if _, dup := cc.seen[u]; dup || cc.perHost[host] >= cc.cap {
		cc.mu.Unlock()
		return
	}
	cc.seen[u] = struct{}{}
	cc.perHost[host]++
	g := cc.hosts[host]
	if g == nil {
		g = &hostGate{}
		cc.hosts[host] = g
	}
	cc.mu.Unlock()
	if !g.ready.Load() {
		g.mu.Lock()
		err = cc.c.Visit(u)
		g.ready.Store(true)
		g.mu.Unlock()
	} else {
		err = cc.c.Visit(u)
	}
	if err != nil && !errors.Is(err, colly.ErrRobotsTxtBlocked) {
		cc.fail(fmt.Errorf("colly visit %s: %w", u, err))
	}
}

// pageCounter counts page fetches (robots.txt excluded) and applies
// robots.txt Crawl-delay to the host's LimitRule (see RunColly).
type pageCounter struct {
	cc   *collyCrawl
	next http.RoundTripper
}

func (p *pageCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if req.URL.Path != "/robots.txt" {
		p.cc.pages.Add(1)
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var delay time.Duration
	if rd, err := robotstxt.FromStatusAndBytes(resp.StatusCode, body); err == nil && rd != nil {
		if g := rd.FindGroup(UserAgent); g != nil {
			delay = g.CrawlDelay
		}
	}
	if r := p.cc.rules[req.URL.Host]; r != nil && delay > 0 {
		r.Delay = delay
		time.Sleep(delay)
	}
	return resp, nil
}
