package trapweb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/internal/syncbuf"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
)

// maxPerTrapHost is the most requests the crawl may send a trap host.
const maxPerTrapHost = 1000

// serve starts a trap web with trapHosts trap hosts beside a small
// synthetic web, on a loopback port.
func serve(t *testing.T, trapHosts int) (*Web, string) {
	t.Helper()
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seeds, wc.TrapHosts = 40, 800, 3, 0
	wc.SlowHosts, wc.CrawlDelayHosts = 0, 0
	real, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	w := New(real, trapHosts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return w, ln.Addr().String()
}

// nodeConfig is a node with the default scope settings (trap limits,
// canonicalization) crawling w at addr.
func nodeConfig(w *Web, addr, dir string, delay time.Duration) config.Config {
	c := config.Default()
	c.Name = "traps"
	c.Data = dir
	c.HTTP = "127.0.0.1:0"
	c.Seeds = w.Seeds()
	c.Resolve = []string{w.Real.ResolvePattern() + "=" + addr, "*." + Domain + "=" + addr}
	c.AllowPrivate = true
	c.Delay = delay
	c.Scope.AllowDomains = []string{w.Real.Config().Domain, Domain}
	c.Bucket.MaxQueueWait = 100 * time.Millisecond
	c.Fetch.RetryBackoff = time.Second
	c.ShutdownTimeout = 10 * time.Second
	return c
}

// TestTrapWebOneNode: one node with the default settings crawls a web of
// 43 hosts, three of which hold the four traps: it fetches every real page
// once, stops by itself, and sends each trap host at most 1,000 requests.
func TestTrapWebOneNode(t *testing.T) {
	w, addr := serve(t, 3)
	const delay = 2 * time.Millisecond
	cfg := nodeConfig(w, addr, t.TempDir(), delay)
	var logs syncbuf.Buffer
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("node run: %v", err)
		}
	}()
	wait.Steady(t, 3*time.Minute, 100*time.Millisecond, "crawl done", func() (bool, string) {
		return n.Done(), fmt.Sprintf("%+v; trap requests %v", n.Status(), w.Requests())
	})
	elapsed := time.Since(start)
	metrics := getText(t, "http://"+n.Addr().String()+"/metrics")
	for _, reason := range []string{"url_pattern", "path_repeats", "facets"} {
		series := `phasecrawl_urls_out_of_scope_total{reason="` + reason + `"}`
		if !strings.Contains(metrics, series+" ") {
			t.Errorf("metrics lack %s", series)
		}
	}
	// The first refusal of each trap host is logged, and no other.
	for _, h := range w.Hosts() {
		got := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "trap limit: a URL of this host refused") && strings.Contains(line, " host="+h+" ") {
				got++
			}
		}
		if got != 1 {
			t.Errorf("host %s: %d trap refusals logged, want 1", h, got)
		}
	}
	d := config.Default()
	v, summary := w.Check(d.Scope.MaxPagesPerHost, d.Scope.MaxPatternDepth, maxPerTrapHost, d.UserAgent, delay)
	for _, line := range strings.Split(summary, "\n") {
		t.Log(line)
	}
	t.Logf("crawl done in %s", elapsed.Round(10*time.Millisecond))
	if len(v) > 0 {
		t.Errorf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
	}
	// Each trap costs exactly what the limits admit (the runs are those of
	// the URLs' ways, whatever the order of the fetches).
	want, ok := w.Alone(d.Scope)
	if !ok {
		t.Fatal("the default limits leave a trap unbounded")
	}
	for h, k := range w.Requests() {
		delete(k, KindSession) // counted by Check
		if !maps.Equal(k, want) {
			t.Errorf("trap host %s: requests %v, want %v", h, k, want)
		}
	}
}

func getText(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
