package node

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// hangServer accepts connections on loopback and never answers (a dead
// server whose port is open). accepted counts the connections.
func hangServer(t testing.TB) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String(), accepted
}

// liveSite serves / linking to /p0../p(pages-1) and to each of extra.
func liveSite(t testing.TB, pages int, extra []string, wait time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if wait > 0 {
			time.Sleep(wait)
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := 0; i < pages; i++ {
				fmt.Fprintf(w, `<a href="/p%d">p</a>`, i)
			}
			for _, u := range extra {
				fmt.Fprintf(w, `<a href="%s">x</a>`, u)
			}
			return
		}
		fmt.Fprint(w, "page")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A host that timed out is served by the dead-link lane from then on: its
// retries are trips of the inactive lane, the live host's pages are all
// fetched, and the dead URLs end with their tries used up.
func TestDeadLane(t *testing.T) {
	dead, accepted := hangServer(t)
	deadURLs := []string{"http://" + dead + "/a", "http://" + dead + "/b"}
	srv := liveSite(t, 10, deadURLs, 0)
	c := testConfig(t, srv)
	c.Workers = 2
	c.Fetch.InactiveWorkers = 1
	c.Fetch.MaxTries = 3
	c.Fetch.RetryBackoff = 0
	c.Fetch.HeaderTimeout = 300 * time.Millisecond
	c.Bucket.ListCap = 1
	c.Robots.ErrorTTL = time.Second // every retry of the dead host tries its robots.txt again
	c.Seeds = append(c.Seeds, deadURLs...)
	n, stop := start(t, c)
	defer stop()
	waitFor(t, "crawl", func() bool {
		cn := n.Frontier().Counts()
		return cn.Completed == 13 && cn.InList == 0 && cn.InProgress == 0 && cn.Stalled == 0
	})
	t.Logf("%+v", n.Frontier().Counts())
	for _, u := range deadURLs {
		r, ok, err := n.Frontier().Get(frontier.RefOf(u))
		if err != nil || !ok || r.State != frontier.Completed || r.Reason != "robots_unavailable" || r.Tries != 3 {
			t.Errorf("%s: %+v %v %v, want COMPLETED robots_unavailable (its robots.txt timed out) after 3 tries", u, r, ok, err)
		}
	}
	for _, p := range append([]string{"/"}, pagePaths(10)...) {
		r, ok, err := n.Frontier().Get(frontier.RefOf(srv.URL + p))
		if err != nil || !ok || r.Reason != "ok" {
			t.Errorf("%s: %+v %v %v, want ok", p, r, ok, err)
		}
	}
	// Every try after a host's first timeout is the lane's: the first
	// timeout makes the host inactive, so at most the trips dispatched
	// before it ran on the live workers.
	inactive := labelledCounter(t, n, "phasecrawl_host_trips_total", "inactive")
	if inactive < 2 {
		t.Errorf("inactive lane trips = %g, want at least 2 (of %d connections to the dead host)", inactive, accepted.Load())
	}
	if !n.inactive.has(dead) {
		t.Errorf("dead host %s not in the inactive set", dead)
	}
}

func TestInactiveLaneSize(t *testing.T) {
	c := testConfig(t, liveSite(t, 0, nil, 0))
	tests := []struct{ workers, set, want int }{
		{256, -1, 25}, {4, -1, 1}, {1, -1, 1}, {30, 0, 0}, {30, 7, 7},
	}
	for _, tc := range tests {
		c.Workers, c.Fetch.InactiveWorkers = tc.workers, tc.set
		if got := c.Fetch.InactiveLane(c.Workers); got != tc.want {
			t.Errorf("workers %d inactive_workers %d: lane of %d, want %d", tc.workers, tc.set, got, tc.want)
		}
	}
}
