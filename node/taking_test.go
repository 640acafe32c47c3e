package node

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestTripTakesOwnLinks: a trip goes on with the new pages of its host that
// its own pages link to, up to bucket.list_cap URLs in all, then (no other
// host waiting) with the ones the scheduler refills it with, and every
// page is still fetched exactly once. The site is a chain /p0 -> /p1 ->
// ... -> /p5, so each page is known only once the one before it was
// fetched, and a dispatched list holds one URL: every page is dispatched,
// taken or refilled.
func TestTripTakesOwnLinks(t *testing.T) {
	for _, tc := range []struct {
		listCap   int
		wantTaken float64 // URLs fetched in the trip that found them, at least
	}{
		{20, 5}, // one trip: /p0, then /p1.../p5 taken one by one
		{3, 2},  // /p0 +p1 +p2, then /p3 queued (no room): refilled, or a trip of its own that takes /p4, /p5
	} {
		t.Run(fmt.Sprintf("list_cap=%d", tc.listCap), func(t *testing.T) {
			const pages = 6
			srv, hits := chainSite(t, pages)
			c := testConfig(t, srv)
			c.Seeds = []string{srv.URL + "/p0"}
			c.Bucket.ListCap = tc.listCap
			n, stop := start(t, c)
			defer stop()
			wait.For(t, 30*time.Second, "crawl", func() bool { return n.Frontier().Counts().Completed == pages })
			got := hits()
			for i := 0; i < pages; i++ {
				if p := fmt.Sprintf("/p%d", i); got[p] != 1 {
					t.Errorf("%s fetched %d times, want once", p, got[p])
				}
			}
			if len(got) != pages {
				t.Errorf("requests for %d paths, want %d: %v", len(got), pages, got)
			}
			taken := counterValue(t, n, "phasecrawl_urls_taken_total")
			refilled := counterValue(t, n, "phasecrawl_urls_refilled_total")
			trips := labelledValue(t, n, "phasecrawl_host_trips_total", "live")
			if taken < tc.wantTaken || taken+refilled+trips != pages {
				t.Errorf("%v URLs taken, %v refilled, %v trips: want at least %v taken, and %d pages in all", taken, refilled, trips, tc.wantTaken, pages)
			}
			if taken > trips*float64(tc.listCap-1) {
				t.Errorf("%v URLs taken in %v trips: over list_cap=%d per trip", taken, trips, tc.listCap)
			}
		})
	}
}

// counterValue reads an unlabelled counter from the node's registry (as
// Prometheus would scrape it); the test fails if it is not registered.
func counterValue(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	mfs, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0
}

// labelledValue reads the counter of a labelled family whose one label
// has value (as Prometheus would scrape it); 0 when none was counted.
func labelledValue(t *testing.T, n *Node, name, value string) float64 {
	t.Helper()
	mfs, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// chainSite serves /p0 -> /p1 -> ... -> /p(pages-1), each page linking to
// the next; hits returns how many times each path was requested.
func chainSite(t *testing.T, pages int) (srv *httptest.Server, hits func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	count := map[string]int{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		count[r.URL.Path]++
		mu.Unlock()
		var i int
		if _, err := fmt.Sscanf(r.URL.Path, "/p%d", &i); err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		if i+1 < pages {
			fmt.Fprintf(w, `<a href="/p%d">next</a>`, i+1)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(count)
	}
}

// holder holds some fingerprints, like the cluster's Holds for the URLs
// of a member away.
type holder struct {
	mu   sync.Mutex
	held map[uint64]bool
}

func (r *holder) Held(fp uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[fp]
}

// TestTripTakesNoHeldURL: a URL its owner's absence holds (cluster) is not
// fetched by the trip that took it; it goes back to IN_LIST and is crawled
// once the hold ends.
func TestTripTakesNoHeldURL(t *testing.T) {
	const pages = 3
	srv, hits := chainSite(t, pages)
	p1 := srv.URL + "/p1"
	r := &holder{held: map[uint64]bool{frontier.Fingerprint(p1): true}}
	c := testConfig(t, srv)
	c.Seeds = nil
	n, stop := startWith(t, c, Options{Cluster: Delegates(ClusterDelegates{Holds: r})})
	defer stop()
	if _, err := n.AddSeeds(context.Background(), []string{srv.URL + "/p0"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "/p0 crawled, /p1 back in the queue", func() bool {
		cn := n.Frontier().Counts()
		return cn.Completed == 1 && cn.InList == 1 && cn.InProgress == 0
	})
	schedulerTurns(t, n, 3) // scans of the queue: /p1 still held
	if got := hits(); got["/p1"] != 0 || got["/p0"] != 1 {
		t.Fatalf("requests %v while /p1 is held, want /p0 once and no /p1", got)
	}
	r.mu.Lock()
	r.held = nil
	r.mu.Unlock()
	n.notify()
	wait.For(t, 30*time.Second, "crawl after the hold", func() bool { return n.Frontier().Counts().Completed == pages })
	for p, k := range hits() {
		if k != 1 {
			t.Errorf("%s fetched %d times, want once", p, k)
		}
	}
}
