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

	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

const (
	apiClients   = 100
	crawlDelay   = 5 * time.Millisecond
	crawlTimeout = 5 * time.Minute
	thinkTime    = 10 * time.Millisecond
)

// crawl runs one node over a fresh copy of the web until it is done, with load running
// against its API meanwhile (nil: no load), and returns the pages per second.
func crawl(t *testing.T, wc synthweb.Config, load func(ctx context.Context, base string, pages []string)) (float64, *synthweb.Web, synthweb.Expectation) {
	t.Helper()
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := srv.NodeConfig("load", t.TempDir(), crawlDelay)
	exp := web.Expected(srv.Scope(cfg.UserAgent))
	n, err := node.New(cfg, node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
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
	deadline := time.Now().Add(crawlTimeout)
	for done := 0; done < 2; {
		if time.Now().After(deadline) {
			stopLoad()
			cancel()
			t.Fatalf("crawl not done after %s: %+v", crawlTimeout, n.Status())
		}
		if n.Done() {
			done++
		} else {
			done = 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	pages := n.Status().PagesFetched
	stopLoad()
	loadDone.Wait()
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("run: %v", err)
	}
	return float64(pages) / took.Seconds(), web, exp
}

// TestConcurrentClients crawls the same web twice, alone and with 100 API clients posting
// seeds (pages of the web, so the expected crawl does not change) and reading the status all
// along. The loaded crawl must complete exactly; the rates are logged, not asserted.
func TestConcurrentClients(t *testing.T) {
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages = 30, 900
	wc.TrapHosts = 0 // a trap host is fetched one page at a time: it would set the pace alone
	quiet, _, _ := crawl(t, wc, nil)

	var posts, statuses, failures atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		failures.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	load := func(ctx context.Context, base string, pages []string) {
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
							fail(err)
						}
					} else {
						var res node.SeedResult
						err := json.NewDecoder(resp.Body).Decode(&res)
						resp.Body.Close()
						if err != nil || resp.StatusCode != 200 || res.Given != 10 {
							fail(fmt.Errorf("seeds: %d %v %+v", resp.StatusCode, err, res))
						}
						posts.Add(1)
					}
					select { // a short think time: 100 clients still keep the API busy
					case <-ctx.Done():
						return
					case <-time.After(thinkTime):
					}
					req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/status", nil)
					if resp, err := hc.Do(req); err != nil {
						if ctx.Err() == nil {
							fail(err)
						}
					} else {
						var st node.Status
						err := json.NewDecoder(resp.Body).Decode(&st)
						resp.Body.Close()
						if err != nil || resp.StatusCode != 200 {
							fail(fmt.Errorf("status: %d %v", resp.StatusCode, err))
						}
						statuses.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		hc.CloseIdleConnections()
	}
	loaded, web, exp := crawl(t, wc, load)
	t.Logf("%d pages: %.0f pages/s alone, %.0f pages/s with %d API clients (%d seed posts, %d status reads)",
		exp.Fetches, quiet, loaded, apiClients, posts.Load(), statuses.Load())
	if failures.Load() > 0 {
		t.Errorf("%d API calls failed; first: %v", failures.Load(), firstErr.Load())
	}
	if posts.Load() < apiClients || statuses.Load() < apiClients {
		t.Errorf("only %d seed posts and %d status reads: the clients did not run", posts.Load(), statuses.Load())
	}
	if v := web.Check(exp, crawlDelay); len(v) > 0 {
		t.Errorf("%d violations under load:\n%s", len(v), strings.Join(v, "\n"))
	}
}
