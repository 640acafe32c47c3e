// Package wildcard_test crawls servers that answer for any subdomain of
// their domain and link to fresh subdomains without end (wildcard DNS, a
// trap that mints host names): with politeness.key domain every name of a
// registered domain is one politeness unit across the cluster; with the
// default key, scope.max_hosts_per_domain bounds the names admitted.
package wildcard_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// suffix is added to the Public Suffix List in these tests (.test is not
// on it), so that w1.wild.test and w2.wild.test are registered domains.
const suffix = "wild.test"

// domains are the wildcard servers' registered domains in the tests.
var domains = []string{"w1." + suffix, "w2." + suffix}

// visit is one request the server answered.
type visit struct {
	host       string
	path       string
	start, end time.Time
}

// wildServer answers for any name under its domains: "/" links to three
// fresh subdomains and to one page of its own host; robots.txt is 404.
type wildServer struct {
	domains []string
	mu      sync.Mutex
	visits  []visit
	next    int
	srv     *http.Server
	addr    string
}

func startWild(t testing.TB, domains []string) *wildServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wildServer{addr: ln.Addr().String(), domains: domains}
	w.srv = &http.Server{Handler: w, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()
	t.Cleanup(func() { _ = w.srv.Close() })
	return w
}

func (w *wildServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	var dom string
	for _, d := range w.domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			dom = d
		}
	}
	time.Sleep(2 * time.Millisecond) // a request takes a moment: overlaps would show
	switch {
	case dom == "":
		http.NotFound(rw, r)
	case r.URL.Path == "/robots.txt":
		http.NotFound(rw, r)
	case r.URL.Path == "/":
		w.mu.Lock()
		var b strings.Builder
		b.WriteString("<html><body>")
		for range 3 {
			w.next++
			fmt.Fprintf(&b, `<a href="http://n%d.%s/">n%d</a> `, w.next, dom, w.next)
		}
		w.mu.Unlock()
		b.WriteString(`<a href="/about">about</a></body></html>`)
		rw.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(rw, b.String())
	default:
		rw.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(rw, "<html><body>about</body></html>")
	}
	w.mu.Lock()
	w.visits = append(w.visits, visit{host: host, path: r.URL.Path, start: start, end: time.Now()})
	w.mu.Unlock()
}

// byDomain returns the server's records of each domain, in start order.
func (w *wildServer) byDomain() map[string][]visit {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]visit{}
	for _, v := range w.visits {
		for _, d := range w.domains {
			if v.host == d || strings.HasSuffix(v.host, "."+d) {
				out[d] = append(out[d], v)
			}
		}
	}
	for _, vs := range out {
		slices.SortFunc(vs, func(a, b visit) int { return a.start.Compare(b.start) })
	}
	return out
}

func (w *wildServer) seeds() []string {
	var s []string
	for _, d := range w.domains {
		s = append(s, "http://"+d+"/")
	}
	return s
}

// nodeConfig is a node crawling the wildcard server w.
func nodeConfig(dir, name string, w *wildServer, delay time.Duration) config.Config {
	c := config.Default()
	c.Name, c.Data, c.HTTP = name, filepath.Join(dir, name), "127.0.0.1:0"
	c.Resolve = []string{"*." + suffix + "=" + w.addr}
	c.AllowPrivate = true
	c.Delay = delay
	c.Workers = 16
	c.Scope.AllowDomains = []string{suffix}
	c.Scope.PrivateSuffixes = []string{suffix}
	c.Bucket.MaxQueueWait = 50 * time.Millisecond
	c.ShutdownTimeout = 5 * time.Second
	c.Log.Level = "warn"
	return c
}

// runNodes starts the configured nodes (a cluster when there are more
// than one), posts the seeds to the first, and returns the API addresses
// and a stop function that waits for them to end.
func runNodes(t testing.TB, w *wildServer, cfgs []config.Config) ([]string, func()) {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var apis []string
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	var join []string
	for i, cfg := range cfgs {
		if len(cfgs) > 1 {
			cfg.Cluster.Gossip, cfg.Cluster.Exchange, cfg.Cluster.Join = "127.0.0.1:0", "127.0.0.1:0", join
			cfg.Cluster.KeyFile, cfg.Cluster.FastGossip = "unused: Key is set", true
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			t.Fatal(err)
		}
		var gossip string
		opts := launch.Options{Options: node.Options{Listener: ln, Logger: slog.New(slog.DiscardHandler)}, Key: key,
			Started: func(c *cluster.Cluster) { gossip = c.Members().Addr() }}
		n, err := launch.New(cfg, opts)
		if err != nil {
			_ = ln.Close()
			stop()
			t.Fatalf("%s: %v", cfg.Name, err)
		}
		apis = append(apis, ln.Addr().String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Run(ctx); err != nil {
				t.Errorf("%s: run: %v", cfg.Name, err)
			}
		}()
		if i == 0 {
			join = []string{gossip}
		}
	}
	if len(cfgs) > 1 {
		wait.For(t, 30*time.Second, "cluster formed", func() bool { return harness.Formed(apis) })
	}
	if err := harness.PostSeeds(apis[0], "", w.seeds()); err != nil {
		stop()
		t.Fatal(err)
	}
	return apis, stop
}

// TestWildcardDomainKeyCluster: three members with politeness.key domain
// crawl two wildcard servers until max_hosts_per_domain stops the fresh
// names. Each server's own records show, across all its names, one request
// at a time and no two closer than the delay.
func TestWildcardDomainKeyCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three-member crawl in -short mode")
	}
	const delay = 40 * time.Millisecond
	const maxHosts = 8
	w := startWild(t, domains)
	dir := t.TempDir()
	var cfgs []config.Config
	for _, name := range []string{"a", "b", "c"} {
		c := nodeConfig(dir, name, w, delay)
		c.Politeness.Key = "domain"
		c.Scope.MaxHostsPerDomain = maxHosts
		c.Cluster.PhaseDuration = 600 * time.Millisecond
		cfgs = append(cfgs, c)
	}
	start := time.Now()
	apis, stop := runNodes(t, w, cfgs)
	wait.For(t, 90*time.Second, "crawl done", func() bool { return harness.CrawlDone(apis) })
	elapsed := time.Since(start)
	stop()
	checkUnits(t, w, delay)
	for d, vs := range w.byDomain() {
		names := map[string]bool{}
		for _, v := range vs {
			names[v.host] = true
		}
		t.Logf("%s: %d requests over %d names in %s (3 members, delay %s)", d, len(vs), len(names), elapsed.Round(time.Millisecond), delay)
		// The cap is per member: each admits maxHosts names besides the seed's.
		if len(names) > 3*maxHosts+1 {
			t.Errorf("%s: %d names fetched, want at most 3 members × %d + the seed's", d, len(names), maxHosts)
		}
		if len(names) < maxHosts+1 {
			t.Errorf("%s: %d names fetched, want at least %d: the crawl stopped short", d, len(names), maxHosts+1)
		}
	}
}

// checkUnits fails t for every two requests to one registered domain that
// overlap or are closer than delay, by the server's clock.
func checkUnits(t testing.TB, w *wildServer, delay time.Duration) {
	t.Helper()
	for d, vs := range w.byDomain() {
		overlaps, short := 0, 0
		for i := 1; i < len(vs); i++ {
			gap := vs[i].start.Sub(vs[i-1].end)
			if gap < 0 {
				overlaps++
			} else if gap < delay {
				short++
			}
			if gap < delay && overlaps+short <= 3 {
				t.Errorf("%s: %s%s started %s after %s%s ended (delay %s)", d, vs[i].host, vs[i].path, gap, vs[i-1].host, vs[i-1].path, delay)
			}
		}
		if overlaps+short > 0 {
			t.Errorf("%s: %d overlapping requests and %d gaps under the delay in %d requests", d, overlaps, short, len(vs))
		}
	}
}

// TestWildcardHostCap: with the default politeness key, one node fetches
// at most scope.max_hosts_per_domain names of each wildcard domain besides
// the seed's, and the crawl ends by itself; the refusals are counted under
// their own reason.
func TestWildcardHostCap(t *testing.T) {
	const maxHosts = 12
	w := startWild(t, domains)
	c := nodeConfig(t.TempDir(), "a", w, 5*time.Millisecond)
	c.Scope.MaxHostsPerDomain = maxHosts
	start := time.Now()
	apis, stop := runNodes(t, w, []config.Config{c})
	wait.For(t, 60*time.Second, "crawl done", func() bool { return harness.CrawlDone(apis) })
	elapsed := time.Since(start)
	m, err := harness.Metrics(apis[0])
	stop()
	if err != nil {
		t.Fatal(err)
	}
	for d, vs := range w.byDomain() {
		names := map[string]bool{}
		for _, v := range vs {
			names[v.host] = true
		}
		t.Logf("%s: %d requests over %d names in %s", d, len(vs), len(names), elapsed.Round(time.Millisecond))
		if len(names) != maxHosts+1 {
			t.Errorf("%s: %d names fetched, want max_hosts_per_domain %d + the seed's", d, len(names), maxHosts)
		}
	}
	if !strings.Contains(m, `phasecrawl_urls_out_of_scope_total{reason="max_hosts_per_domain"}`) {
		t.Errorf("no phasecrawl_urls_out_of_scope_total{reason=\"max_hosts_per_domain\"} series")
	}
}

// BenchmarkWildcardDomainKey: five wildcard servers, each linking every
// page to fresh names, crawled by three members with politeness.key
// domain, a 100 ms delay and the default scope.max_hosts_per_domain, for
// PHASECRAWL_BENCH_WILDCARD_FOR (default 10s, and the shutdown): the
// requests each server got between its first and its last (the delay
// allows at most that time / 100 ms + 1), with the overlap and gap check
// of the tests.
//
//	go test ./test/wildcard -run '^$' -bench WildcardDomainKey -benchtime 1x
func BenchmarkWildcardDomainKey(b *testing.B) {
	d := 10 * time.Second
	if v := os.Getenv("PHASECRAWL_BENCH_WILDCARD_FOR"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	const delay = 100 * time.Millisecond
	for range b.N {
		var doms []string
		for i := range 5 {
			doms = append(doms, fmt.Sprintf("s%d.%s", i+1, suffix))
		}
		w := startWild(b, doms)
		dir := b.TempDir()
		var cfgs []config.Config
		for _, name := range []string{"a", "b", "c"} {
			c := nodeConfig(dir, name, w, delay)
			c.Politeness.Key = "domain"
			c.Workers = 64
			cfgs = append(cfgs, c)
		}
		_, stop := runNodes(b, w, cfgs)
		time.Sleep(d) // the members crawl for d, real time: the requests over that span are the figure
		stop()
		checkUnits(b, w, delay)
		var total int
		var spans time.Duration
		for dom, vs := range w.byDomain() {
			names := map[string]bool{}
			for _, v := range vs {
				names[v.host] = true
			}
			span := vs[len(vs)-1].end.Sub(vs[0].start)
			total, spans = total+len(vs), spans+span
			b.Logf("%s: %d requests over %d names from its first request to its last, %s (the delay allows %d)",
				dom, len(vs), len(names), span.Round(time.Millisecond), int(span/delay)+1)
		}
		b.ReportMetric(float64(total)/spans.Seconds(), "requests/s/server")
	}
}
