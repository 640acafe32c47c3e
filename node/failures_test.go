package node

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestPerURLFailures: a failure inside one response (a short body, a reset after the headers)
// fails that URL alone, under its retry policy: the host's other pages are fetched once each,
// none set aside as if the host were unreachable. A 304 to a request without validators is
// logged as unsolicited_304.
func TestPerURLFailures(t *testing.T) {
	const tries = 2
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
			fmt.Fprint(w, `<a href="/short">s</a><a href="/reset">r</a><a href="/304">n</a><a href="/p1">1</a><a href="/p2">2</a><a href="/p3">3</a>`)
		case "/short", "/reset":
			conn, bw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			fmt.Fprint(bw, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n<html>part")
			bw.Flush()
			if r.URL.Path == "/reset" {
				time.Sleep(20 * time.Millisecond)                     // the reset comes a moment after the part, as from a peer that died mid-body
				conn.(interface{ SetLinger(int) error }).SetLinger(0) // close sends RST
			}
			conn.Close()
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		default:
			// Each page its own bytes: identical bodies would make the
			// later ones revisits of the first (warc.dedup), in whichever
			// order their records are written.
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "plain "+r.URL.Path)
		}
	}))
	defer srv.Close()
	c := testConfig(t, srv)
	c.Fetch.MaxTries = tries
	c.Fetch.RetryBackoff = 10 * time.Millisecond
	n, stop := start(t, c)
	defer stop()
	wait.For(t, 30*time.Second, "crawl", func() bool { k := n.Frontier().Counts(); return n.Done() && k.Completed == 7 })
	stop()

	log := map[string][]archive.LogEntry{}
	if _, err := archive.ReadCrawlLog(filepath.Join(c.Data, "crawl.log"), func(e archive.LogEntry) error {
		p := strings.TrimPrefix(e.URL, srv.URL)
		log[p] = append(log[p], e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tc := range []struct {
		path, reason string
		served       int
	}{
		{"/", "ok", 1}, {"/p1", "ok", 1}, {"/p2", "ok", 1}, {"/p3", "ok", 1},
		{"/short", "conn_reset", tries}, {"/reset", "conn_reset", tries}, {"/304", "unsolicited_304", 1},
	} {
		es := log[tc.path]
		if len(es) == 0 || es[len(es)-1].Reason != tc.reason {
			t.Errorf("%s: crawl log %+v, want last reason %q", tc.path, es, tc.reason)
		}
		for _, e := range es {
			if e.Error == "host unreachable earlier in this list" {
				t.Errorf("%s set aside after a failure inside another response: %+v", tc.path, e)
			}
		}
		if hits[tc.path] != tc.served || len(es) != tc.served {
			t.Errorf("%s: served %d times, %d log lines; want %d", tc.path, hits[tc.path], len(es), tc.served)
		}
	}
}
