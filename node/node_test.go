package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/robots"
)

// site is a tiny web of one host: / links to /a and /b, /b redirects to /c,
// /c links /slow, robots.txt disallows /private, and /slow never answers
// within the header timeout.
func site(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/a">a</a><a href="b">b</a><a href="/private/x">p</a><a href="http://other.invalid/">o</a>`)
		case "/a":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/">home</a>`)
		case "/b":
			http.Redirect(w, r, "/c", http.StatusMovedPermanently)
		case "/c":
			// /slow is found last: a timeout stalls what is left of its
			// host's trip, and nothing is left after it.
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `c <a href="/slow">s</a>`)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		default:
			http.NotFound(w, r)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &hits
}

func testConfig(t *testing.T, srv *httptest.Server) config.Config {
	c := config.Default()
	c.Name = "t"
	c.Data = t.TempDir()
	c.HTTP = "127.0.0.1:0"
	c.AllowPrivate = true
	c.Delay = time.Millisecond
	c.Workers = 4
	c.Bucket.MaxQueueWait = 20 * time.Millisecond
	c.Fetch.HeaderTimeout = 200 * time.Millisecond
	c.Fetch.RetryBackoff = time.Hour
	c.Seeds = []string{srv.URL + "/"}
	return c
}

func start(t *testing.T, c config.Config) (*Node, func()) {
	t.Helper()
	return startWith(t, c, Options{})
}

// startWith is start with node options (a Logger that discards is set when
// opts has none).
func startWith(t *testing.T, c config.Config, opts Options) (*Node, func()) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	n, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop := func() { // may be called twice (deferred, and when a test stops the node early)
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	return n, stop
}

func TestCrawlTinySite(t *testing.T) {
	srv, _ := site(t)
	n, stop := start(t, testConfig(t, srv))
	defer stop()
	// /, /a, /b, /c fetched; /private denied; /slow STALLED (header timeout) awaiting retry.
	wait.For(t, 30*time.Second, "crawl", func() bool {
		c := n.Frontier().Counts()
		return c.InList == 0 && c.InProgress == 0 && c.Completed == 5 && c.Stalled == 1
	})
	s := n.Status()
	if s.PagesFetched != 4 {
		t.Errorf("pages_fetched = %d, want 4 (/, /a, /b, /c)", s.PagesFetched)
	}
	if s.Done {
		t.Errorf("Done with a STALLED URL waiting for its retry")
	}
	if s.FetchErrors != 1 {
		t.Errorf("fetch_errors = %d, want 1 (/slow)", s.FetchErrors)
	}
}

func TestAPI(t *testing.T) {
	srv, _ := site(t)
	c := testConfig(t, srv)
	c.Seeds = nil
	n, stop := start(t, c)
	defer stop()
	base := "http://" + n.Addr().String()
	wait.For(t, 30*time.Second, "ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	tests := []struct {
		name, body string
		code       int
		added      int
		bad        []int
	}{
		{"lines", srv.URL + "/\n# comment\n\n" + srv.URL + "/a\n", 200, 2, nil},
		{"again: nothing new", srv.URL + "/\n", 200, 0, nil},
		{"json", `["` + srv.URL + `/json-only"]`, 200, 1, nil}, // no page links to it: the crawl cannot have found it first
		{"bad lines named", "ftp://x/\n" + srv.URL + "/fresh\nnot a url\n", 400, 1, []int{1, 3}},
		{"bad json: elements before the syntax error are taken", `["x"`, 400, 0, []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(base+"/v1/seeds", "text/plain", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("code = %d, want %d", resp.StatusCode, tc.code)
			}
			var res SeedResult
			if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
				if tc.code == 400 && tc.added == 0 {
					return // the malformed-JSON answer is an error object
				}
				t.Fatal(err)
			}
			if res.Added != tc.added {
				t.Errorf("added = %d, want %d", res.Added, tc.added)
			}
			var lines []int
			for _, b := range res.Bad {
				lines = append(lines, b.Line)
			}
			if fmt.Sprint(lines) != fmt.Sprint(tc.bad) && !(len(lines) == 0 && tc.bad == nil) {
				t.Errorf("bad lines = %v, want %v", lines, tc.bad)
			}
		})
	}

	resp, err := http.Get(base + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, k := range []string{"node", "frontier", "bucket", "pages_fetched", "bytes_fetched", "uptime_s"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("/v1/status lacks %q", k)
		}
	}
	for _, k := range []string{"in_list", "in_progress", "completed", "stalled"} {
		if _, ok := raw["frontier"].(map[string]any)[k]; !ok {
			t.Errorf("/v1/status frontier lacks %q", k)
		}
	}
	for _, k := range []string{"free", "queuing", "fetching", "timewait"} {
		if _, ok := raw["bucket"].(map[string]any)[k]; !ok {
			t.Errorf("/v1/status bucket lacks %q", k)
		}
	}
	resp, err = http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", err, resp)
	}
	resp.Body.Close()
}

func TestDataDirLocked(t *testing.T) {
	srv, _ := site(t)
	c := testConfig(t, srv)
	n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.closeResources()
	c2 := c
	c2.HTTP = "127.0.0.1:0"
	_, err = New(c2, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(c.Data, "frontier.db")) {
		t.Fatalf("second node on the same data: err = %v, want a clear error naming the file", err)
	}
}

func TestPrivateAddressRefused(t *testing.T) {
	srv, hits := site(t)
	c := testConfig(t, srv)
	c.AllowPrivate = false
	n, stop := start(t, c)
	defer stop()
	wait.For(t, 30*time.Second, "seed to complete", func() bool { return n.Frontier().Counts().Completed == 1 })
	if hits.Load() != 0 {
		t.Fatalf("the server got %d requests despite the private-address guard", hits.Load())
	}
}

func TestAPIListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv, _ := site(t)
	c := testConfig(t, srv)
	c.HTTP = ln.Addr().String()
	_, err = New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "key http") {
		t.Fatalf("err = %v, want it to name the http key", err)
	}
}

// recordRouter is a Router: it records what it is given.
type recordRouter struct{ got []frontier.NewURL }

func (r *recordRouter) ShareSeedHosts(context.Context, []string) error { return nil }

func (r *recordRouter) ShareRobots(robots.Record) {}

func (r *recordRouter) Route(_ context.Context, urls []frontier.NewURL) (int, error) {
	r.got = append(r.got, urls...)
	return len(urls), nil
}

// TestTakeCluster: a node alone (no Router) keeps every URL for the local
// write; a Router given without Split receives every URL through Route
// and none is kept for the local write; a Split given is used as it is.
func TestTakeCluster(t *testing.T) {
	urls := []frontier.NewURL{{URL: "http://a.test/1", Host: "a.test"}, {URL: "http://b.test/2", Host: "b.test"}}
	for _, tc := range []struct {
		name      string
		c         func(*recordRouter) ClusterDelegates
		wantLocal int
		wantRoute int
	}{
		{"alone", func(*recordRouter) ClusterDelegates { return ClusterDelegates{} }, 2, 0},
		{"router only", func(r *recordRouter) ClusterDelegates { return ClusterDelegates{Router: r} }, 0, 2},
		{"router and split", func(r *recordRouter) ClusterDelegates { return ClusterDelegates{Router: r, Split: Standalone{}} }, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := &recordRouter{}
			n := &Node{}
			n.takeCluster(tc.c(rr))
			local, err := n.split.RouteForeign(context.Background(), urls)
			if err != nil || len(local) != tc.wantLocal || len(rr.got) != tc.wantRoute {
				t.Fatalf("local %v, routed %v, err %v; want %d local, %d routed", local, rr.got, err, tc.wantLocal, tc.wantRoute)
			}
			if local, err = n.split.RouteForeign(context.Background(), nil); err != nil || len(local) != 0 || len(rr.got) != tc.wantRoute {
				t.Fatalf("no URLs: local %v, routed %d, err %v; want nothing routed", local, len(rr.got), err)
			}
		})
	}
}

// schedulerTurns wakes the scheduler and waits until it has gone round
// its loop k more times, each woken (each turn publishes its state, and a
// woken turn scans the queue when it may).
func schedulerTurns(t *testing.T, n *Node, k int) {
	t.Helper()
	last, seen := n.snap.Load(), 0
	n.notify()
	wait.For(t, 30*time.Second, fmt.Sprintf("%d turns of the scheduler", k), func() bool {
		if s := n.snap.Load(); s != last {
			last, seen = s, seen+1
			n.notify()
		}
		return seen >= k
	})
}
