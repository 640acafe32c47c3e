package load

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
)

const (
	apiClients   = 100
	crawlDelay   = 5 * time.Millisecond
	crawlTimeout = 5 * time.Minute
	thinkTime    = 10 * time.Millisecond
)

// crawlResult is what crawl measured.
type crawlResult struct {
	pagesPerSec float64
	pages       int64 // the node's pages_fetched at the end
	web         *synthweb.Web
	exp         synthweb.Expectation
}

// crawl runs one node over a fresh copy of the web until it is done, with load running
// against its API meanwhile (nil: no load).
func crawl(tb testing.TB, wc synthweb.Config, load func(ctx context.Context, base string, pages []string)) crawlResult {
	tb.Helper()
	web, err := synthweb.New(wc)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		tb.Fatal(err)
	}
	defer srv.Close()
	cfg := srv.NodeConfig("load", tb.TempDir(), crawlDelay)
	exp := web.Expected(srv.Scope(cfg.UserAgent))
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	start := time.Now()
	go func() { runErr <- n.Run(ctx) }()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadDone sync.WaitGroup
	if load != nil {
		var pages []string
		for u := range exp.Pages {
			pages = append(pages, u)
		}
		sort.Strings(pages)
		loadDone.Add(1)
		go func() { defer loadDone.Done(); load(loadCtx, "http://"+n.Addr().String(), pages) }()
	}
	// The load and the node stop here, or when the wait fails.
	stop := sync.OnceValue(func() error {
		stopLoad()
		loadDone.Wait()
		cancel()
		return <-runErr
	})
	defer stop()
	wait.Steady(tb, crawlTimeout, 100*time.Millisecond, "crawl done", func() (bool, string) {
		return n.Done(), fmt.Sprintf("%+v", n.Status())
	})
	took := time.Since(start)
	pages := n.Status().PagesFetched
	if err := stop(); err != nil {
		tb.Fatalf("run: %v", err)
	}
	return crawlResult{pagesPerSec: float64(pages) / took.Seconds(), pages: pages, web: web, exp: exp}
}

// loadWeb is the web of the load test: 30 hosts, 900 pages.
func loadWeb() synthweb.Config {
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages = 30, 900
	wc.TrapHosts = 0 // a trap host is fetched one page at a time: it would set the pace alone
	return wc
}

// apiLoad is the load of 100 API clients: each posts ten seeds (pages of the web, so the
// expected crawl does not change), waits thinkTime, reads the status, and again, until the
// crawl ends. It counts the calls that succeeded and the ones that failed.
type apiLoad struct {
	posts, statuses, failures atomic.Int64
	firstErr                  atomic.Value
}

func (l *apiLoad) fail(err error) {
	l.failures.Add(1)
	l.firstErr.CompareAndSwap(nil, err.Error())
}

func (l *apiLoad) run(ctx context.Context, base string, pages []string) {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: apiClients}}
	var wg sync.WaitGroup
	for c := 0; c < apiClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; ctx.Err() == nil; i += apiClients {
				var body strings.Builder
				for j := 0; j < 10; j++ {
					body.WriteString(pages[(i*10+j)%len(pages)] + "\n")
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/seeds", strings.NewReader(body.String()))
				if resp, err := hc.Do(req); err != nil {
					if ctx.Err() == nil {
						l.fail(err)
					}
				} else {
					var res node.SeedResult
					err := json.NewDecoder(resp.Body).Decode(&res)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 || res.Given != 10 {
						l.fail(fmt.Errorf("seeds: %d %v %+v", resp.StatusCode, err, res))
					} else {
						l.posts.Add(1)
					}
				}
				select { // a short think time: 100 clients still keep the API busy
				case <-ctx.Done():
					return
				case <-time.After(thinkTime):
				}
				req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/status", nil)
				if resp, err := hc.Do(req); err != nil {
					if ctx.Err() == nil {
						l.fail(err)
					}
				} else {
					var st node.Status
					err := json.NewDecoder(resp.Body).Decode(&st)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 {
						l.fail(fmt.Errorf("status: %d %v", resp.StatusCode, err))
					} else {
						l.statuses.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	hc.CloseIdleConnections()
}

// TestConcurrentClients crawls a web with 100 API clients posting seeds and reading the
// status all along. The crawl must complete exactly (every page fetched once, the oracle's
// politeness checks, pages_fetched equal to the pages of the web) and every API call must
// succeed, each client having made at least one of each. BenchmarkConcurrentClients gives
// the pages per second with and without the clients.
func TestConcurrentClients(t *testing.T) {
	var l apiLoad
	r := crawl(t, loadWeb(), l.run)
	t.Logf("%d pages with %d API clients (%d seed posts, %d status reads)", r.pages, apiClients, l.posts.Load(), l.statuses.Load())
	if l.failures.Load() > 0 {
		t.Errorf("%d API calls failed; first: %v", l.failures.Load(), l.firstErr.Load())
	}
	if l.posts.Load() < apiClients || l.statuses.Load() < apiClients {
		t.Errorf("only %d seed posts and %d status reads: the clients did not run", l.posts.Load(), l.statuses.Load())
	}
	if r.pages != int64(r.exp.Fetches) {
		t.Errorf("the node fetched %d pages, the web has %d to fetch", r.pages, r.exp.Fetches)
	}
	if v := r.web.Check(r.exp, crawlDelay); len(v) > 0 {
		t.Errorf("%d violations under load:\n%s", len(v), strings.Join(v, "\n"))
	}
}

// BenchmarkConcurrentClients crawls the web of TestConcurrentClients alone and with the 100
// API clients, and reports both rates (pages/s-alone, pages/s-loaded):
//
//	go test ./test/load -run '^$' -bench ConcurrentClients -benchtime 1x -count 3
func BenchmarkConcurrentClients(b *testing.B) {
	var alone, loaded float64
	for range b.N {
		q := crawl(b, loadWeb(), nil)
		var l apiLoad
		r := crawl(b, loadWeb(), l.run)
		if l.failures.Load() > 0 {
			b.Fatalf("%d API calls failed; first: %v", l.failures.Load(), l.firstErr.Load())
		}
		for _, c := range []crawlResult{q, r} {
			if v := c.web.Check(c.exp, crawlDelay); len(v) > 0 {
				b.Fatalf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
			}
		}
		alone += q.pagesPerSec
		loaded += r.pagesPerSec
	}
	b.ReportMetric(alone/float64(b.N), "pages/s-alone")
	b.ReportMetric(loaded/float64(b.N), "pages/s-loaded")
	b.ReportMetric(0, "ns/op")
}
