package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestRecoverArchivedPages: a node killed after it archived pages but before
// their frontier write committed finds them IN_LIST again on restart; it
// settles them from the WARC file the crash left open instead of fetching
// them again, and crawls the links found on them. A page whose record was
// committed after its archived response (a retry) is not settled again.
func TestRecoverArchivedPages(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/a">a</a><a href="/moved">m</a>`)
		case "/moved":
			http.Redirect(w, r, "/b", http.StatusFound)
		case "/a", "/b", "/c":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<a href="/c">c</a>`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := testConfig(t, srv)
	host := strings.TrimPrefix(srv.URL, "http://")

	// The state a kill -9 leaves: "/" and "/moved" fetched and archived, not
	// recorded (IN_PROGRESS, which opening turns back to IN_LIST); "/a" was
	// archived, then recorded STALLED and released for a retry (IN_LIST,
	// fetched after its archived response): it must be fetched again.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fo := frontier.DefaultOptions(filepath.Join(cfg.Data, "frontier.db"))
	f, err := frontier.Open(fo)
	if err != nil {
		t.Fatal(err)
	}
	cc := fetch.DefaultClientConfig()
	cc.AllowPrivate = true
	client, err := fetch.NewClient(cc)
	if err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewWARCWriter(archive.DefaultWARCConfig(filepath.Join(cfg.Data, "warc")))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/a", "/", "/moved"} {
		u := srv.URL + p
		if _, err := f.Add(ctx, []frontier.NewURL{{URL: u, Host: host}}); err != nil {
			t.Fatal(err)
		}
		if err := f.MarkInProgress(ctx, []frontier.Ref{frontier.RefOf(u)}); err != nil {
			t.Fatal(err)
		}
		r, err := client.Fetch(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		head := archive.HTTPResponseHead(r.Proto, r.Status, r.Header, len(r.RawBody))
		if err := w.Write(archive.Capture{Target: u, Request: r.RequestDump, Response: head, Body: r.RawBody}); err != nil {
			t.Fatal(err)
		}
	}
	// The records reached the file (a flush before some commit), the pages'
	// results did not reach the frontier: the kill came in between.
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// "/" had its crawl log line written before the kill, "/moved" had not.
	clog, err := archive.OpenCrawlLog(filepath.Join(cfg.Data, crawlLogName))
	if err != nil {
		t.Fatal(err)
	}
	if err := clog.Write(archive.LogEntry{URL: srv.URL + "/", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if err := clog.Close(); err != nil {
		t.Fatal(err)
	}
	refA := frontier.RefOf(srv.URL + "/a")
	if err := f.Finish(ctx, []frontier.Result{{FP: refA.FP, Host: refA.Host, State: frontier.Stalled, Reason: "http_5xx"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReleaseStalled(ctx, time.Now().Add(time.Minute), 10); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	open, _ := filepath.Glob(filepath.Join(cfg.Data, "warc", "*"+archive.OpenSuffix))
	if len(open) != 1 {
		t.Fatalf("WARC files left open: %v", open)
	}
	// w is dropped unclosed, as a killed process leaves it.

	n, stop := start(t, cfg)
	defer stop()
	wait.For(t, 30*time.Second, "crawl", func() bool {
		c := n.Frontier().Counts()
		return c.InList == 0 && c.InProgress == 0 && c.Completed == 5
	})
	mu.Lock()
	defer mu.Unlock()
	// Before the restart each page was fetched once; after it only /a (its
	// retry), /b and /c (found on the settled pages).
	want := map[string]int{"/": 1, "/moved": 1, "/a": 2, "/b": 1, "/c": 1}
	for p, k := range want {
		if hits[p] != k {
			t.Errorf("%s fetched %d times, want %d (all: %v)", p, hits[p], k, hits)
		}
	}
	for _, p := range []string{"/", "/moved"} {
		rec, ok, err := n.Frontier().Get(frontier.RefOf(srv.URL + p))
		if err != nil || !ok || rec.State != frontier.Completed || rec.Tries != 1 {
			t.Errorf("%s: %+v %v %v, want COMPLETED after 1 try", p, rec, ok, err)
		}
	}
	stop()
	lines := map[string]int{}
	if _, err := archive.ReadCrawlLog(filepath.Join(cfg.Data, crawlLogName), func(e archive.LogEntry) error {
		lines[strings.TrimPrefix(e.URL, srv.URL)]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Every page has its line, once: "/moved" got it at recovery.
	for p := range want {
		if k := want[p]; p == "/a" && lines[p] != k-1 || p != "/a" && lines[p] != 1 {
			t.Errorf("%s has %d crawl log lines (all: %v)", p, lines[p], lines)
		}
	}
	if _, err := os.Stat(open[0]); !os.IsNotExist(err) {
		t.Errorf("the WARC file left open was not repaired: %v", err)
	}
}
