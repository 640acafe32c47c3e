package node

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestTripTakesOwnLinks: a trip goes on with the new pages of its host that
// its own pages link to, up to bucket.list_cap URLs in all, and every page
// is still fetched exactly once. The site is a chain /p0 -> /p1 -> ... ->
// /p5, so each page is known only once the one before it was fetched.
func TestTripTakesOwnLinks(t *testing.T) {
	for _, tc := range []struct {
		listCap   int
		wantTaken float64 // URLs fetched in the trip that found them
	}{
		{20, 5}, // one trip: /p0, then /p1.../p5 taken one by one
		{3, 4},  // trips of 3: /p0 +p1 +p2, then /p3 (queued: no room) +p4 +p5
	} {
		t.Run(fmt.Sprintf("list_cap=%d", tc.listCap), func(t *testing.T) {
			const pages = 6
			var mu sync.Mutex
			hits := map[string]int{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/robots.txt" {
					http.NotFound(w, r)
					return
				}
				mu.Lock()
				hits[r.URL.Path]++
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
			defer srv.Close()
			c := testConfig(t, srv)
			c.Seeds = []string{srv.URL + "/p0"}
			c.Bucket.ListCap = tc.listCap
			n, stop := start(t, c)
			defer stop()
			waitFor(t, "crawl", func() bool { return n.Frontier().Counts().Completed == pages })
			mu.Lock()
			defer mu.Unlock()
			for i := 0; i < pages; i++ {
				if p := fmt.Sprintf("/p%d", i); hits[p] != 1 {
					t.Errorf("%s fetched %d times, want once", p, hits[p])
				}
			}
			if len(hits) != pages {
				t.Errorf("requests for %d paths, want %d: %v", len(hits), pages, hits)
			}
			if got := counterValue(t, n, "phasecrawl_urls_taken_total"); got != tc.wantTaken {
				t.Errorf("phasecrawl_urls_taken_total = %v, want %v", got, tc.wantTaken)
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
