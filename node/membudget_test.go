package node

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// memWeb is a web of hosts h0.mem.test … whose / links to pages /p0 …
// of size bytes each: /pI is served with a Content-Length (I%3 == 0),
// chunked without one (1) or gzip'd with a length (2). Every host's
// robots.txt redirects once. sent counts the page body bytes written (as
// transferred), robots.txt's aside.
type memWeb struct {
	srv          *httptest.Server
	hosts, pages int
	sent         atomic.Int64
	// budget, once set, holds each large body half way until one of its
	// fetches waited or spooled (at most 5 s).
	budget atomic.Pointer[fetch.BodyBudget]
}

// gate pauses a body half way: 5 ms (a slow body: the fetches overlap),
// or, with budget set, until the budget made a fetch wait or spool (the
// bodies half read all hold their shares meanwhile), at most 5 s. It polls
// in the server's handlers, not the test's goroutine, and its time limit
// is no failure (the test's assertions are), hence no wait.For.
func (w *memWeb) gate() {
	b := w.budget.Load()
	if b == nil {
		time.Sleep(5 * time.Millisecond)
		return
	}
	for deadline := time.Now().Add(5 * time.Second); b.Waits()+b.Spools() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// memBody is size bytes of compressible HTML without links.
func memBody(size int) []byte {
	const filler = "<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.</p>\n"
	b := make([]byte, 0, size)
	b = append(b, "<html><body>\n"...)
	for len(b) < size {
		b = append(b, filler[:min(len(filler), size-len(b))]...)
	}
	return b
}

func newMemWeb(t testing.TB, hosts, pages, size int) *memWeb {
	w := &memWeb{hosts: hosts, pages: pages}
	plain := memBody(size)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(plain)
	zw.Close()
	zipped := zb.Bytes()
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			http.Redirect(rw, r, "/robots-moved.txt", http.StatusMovedPermanently)
		case r.URL.Path == "/robots-moved.txt":
			rw.Write([]byte("User-agent: *\nDisallow: /private\n"))
		case r.URL.Path == "/":
			rw.Header().Set("Content-Type", "text/html")
			var sb strings.Builder
			for i := range pages {
				fmt.Fprintf(&sb, `<a href="/p%d">p</a>`, i)
			}
			n, _ := rw.Write([]byte(sb.String()))
			w.sent.Add(int64(n))
		case strings.HasPrefix(r.URL.Path, "/p"):
			i, err := strconv.Atoi(r.URL.Path[2:])
			if err != nil {
				http.NotFound(rw, r)
				return
			}
			rw.Header().Set("Content-Type", "text/html")
			body := plain
			switch i % 3 {
			case 0:
				rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
			case 2:
				body = zipped
				rw.Header().Set("Content-Encoding", "gzip")
				rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			// A pause half way: the fetches of the workers overlap.
			n, _ := rw.Write(body[:len(body)/2])
			rw.(http.Flusher).Flush()
			w.gate()
			m, _ := rw.Write(body[len(body)/2:])
			w.sent.Add(int64(n + m))
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *memWeb) config(t testing.TB, workers int, budget, maxBody int64) config.Config {
	c := config.Default()
	c.Name = "mem"
	c.Data = t.TempDir()
	c.HTTP = "127.0.0.1:0"
	c.AllowPrivate = true
	c.Delay = time.Millisecond
	c.Workers = workers
	c.Bucket.MaxQueueWait = 20 * time.Millisecond
	c.Fetch.RetryBackoff = time.Hour
	c.Fetch.MaxBodySize = maxBody
	c.Fetch.MaxInflightBytes = budget
	// Every page has one of two bodies: archived as revisit records, the
	// copies would give their memory back before the next fetch (no
	// contention for the budget to measure).
	c.WARC.Dedup = false
	c.Scope.AllowDomains = []string{"mem.test"}
	c.Resolve = []string{"*.mem.test=" + w.srv.Listener.Addr().String()}
	_, port, _ := net.SplitHostPort(w.srv.Listener.Addr().String())
	for h := range w.hosts {
		c.Seeds = append(c.Seeds, fmt.Sprintf("http://h%d.mem.test:%s/", h, port))
	}
	return c
}

// TestInflightBudget: workers that fetch large bodies at once, together
// many times fetch.max_inflight_bytes, never hold more body bytes than it
// (the budget's own count, which phasecrawl_inflight_body_bytes shows),
// and every page is still fetched whole; once the crawl is over nothing is
// held and no spooled body is left.
func TestInflightBudget(t *testing.T) {
	const (
		hosts, pages = 12, 4
		size         = 256 << 10
		budget       = 1 << 20
	)
	web := newMemWeb(t, hosts, pages, size)
	c := web.config(t, hosts, budget, 1<<20)
	n, stop := start(t, c)
	defer stop()
	b := n.client.Budget()
	web.budget.Store(b)
	var over atomic.Int64 // gauge samples above the budget
	sampled := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
			if v := inflightGauge(t, n); v > budget {
				over.Add(1)
			}
		}
	}()
	want := int64(hosts * (pages + 1))
	wait.For(t, 30*time.Second, "crawl", func() bool {
		c := n.Frontier().Counts()
		return c.InList == 0 && c.InProgress == 0 && c.Completed+c.Stalled == want
	})
	close(quit)
	<-sampled
	if got := n.Frontier().Counts(); got.Completed != want {
		t.Errorf("completed %d URLs, want %d (stalled %d)", got.Completed, want, got.Stalled)
	}
	if got := n.Status().PagesFetched; got != want {
		t.Errorf("pages fetched %d, want %d", got, want)
	}
	if got, sent := n.bytes.Load(), web.sent.Load(); got != sent {
		t.Errorf("body bytes fetched %d, the web sent %d: pages cut", got, sent)
	}
	if b.Peak() > budget || over.Load() > 0 {
		t.Errorf("body bytes held peaked at %d (gauge above the budget %d times), budget %d", b.Peak(), over.Load(), budget)
	}
	if b.Waits()+b.Spools() == 0 {
		t.Errorf("no body waited or spooled: %d bodies of %d bytes under a budget of %d", hosts*pages, size, budget)
	}
	wait.For(t, 30*time.Second, "shares given back", func() bool { return b.InFlight() == 0 })
	if ents, _ := os.ReadDir(filepath.Join(c.Data, spoolDirName)); len(ents) != 0 {
		t.Errorf("%d spooled bodies left", len(ents))
	}
	t.Logf("peak %d of %d, waits %d, spools %d", b.Peak(), int64(budget), b.Waits(), b.Spools())
}

// inflightGauge reads phasecrawl_inflight_body_bytes (from any goroutine).
func inflightGauge(t testing.TB, n *Node) float64 {
	const name = "phasecrawl_inflight_body_bytes"
	mfs, err := n.m.Registry.Gather()
	if err != nil {
		t.Error(err)
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == name && mf.GetType() == dto.MetricType_GAUGE && len(mf.Metric) == 1 {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Errorf("no gauge %s", name)
	return 0
}

// TestOpenSpoolDir: the spool directory is made, and the bodies a killed
// process left in it are removed at start; other files are left alone.
func TestOpenSpoolDir(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, spoolDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"body-1.spool", "body-2.spool", "keep.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := openSpoolDir(data)
	if err != nil || got != dir {
		t.Fatalf("openSpoolDir = %q, %v; want %q", got, err, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "keep.txt" {
		t.Errorf("left in the spool directory: %v, want only keep.txt", ents)
	}
	if _, err := openSpoolDir(filepath.Join(data, "new")); err != nil {
		t.Errorf("a new data directory: %v", err)
	}
}
