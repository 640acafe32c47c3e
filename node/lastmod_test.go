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

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestSitemapLastModRevisit: a page revisited hourly (its sites: entry) is
// listed in a sitemap revisited every second. While the sitemap's
// <lastmod> for it is older than its capture, the page keeps its schedule
// (fetched once); once the sitemap says it changed after its capture, it is
// fetched again at once, and only once.
func TestSitemapLastModRevisit(t *testing.T) {
	var pageHits atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 loopback address: %v", err)
	}
	pages := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/page" {
			http.NotFound(w, r)
			return
		}
		pageHits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!DOCTYPE html><html><body>the page</body></html>")
	}))
	pages.Listener.Close()
	pages.Listener = ln
	pages.Start()
	t.Cleanup(pages.Close)

	var mu sync.Mutex
	lastmod := "2000-01-01"
	var mapHits atomic.Int64
	maps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/map.xml" {
			http.NotFound(w, r)
			return
		}
		defer mapHits.Add(1)
		mu.Lock()
		lm := lastmod
		mu.Unlock()
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(w, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>%s/page</loc><lastmod>%s</lastmod></url></urlset>`, pages.URL, lm)
	}))
	t.Cleanup(maps.Close)

	c := testConfig(t, maps)
	c.Seeds = []string{maps.URL + "/map.xml"}
	c.Scope.AllowHosts = []string{"127.0.0.1", "127.0.0.2"}
	c.Recrawl.Interval = time.Second
	c.Sites = []config.Site{{Match: "127.0.0.2", Revisit: time.Hour}}
	n, stop := start(t, c)
	defer stop()

	wait.For(t, 30*time.Second, "the page fetched", func() bool { return pageHits.Load() >= 1 })
	captured := time.Now()
	// The sitemap is revisited every second; an old lastmod changes nothing.
	revisits(t, &mapHits, 2)
	if got := pageHits.Load(); got != 1 {
		t.Fatalf("page fetched %d times with a lastmod older than its capture, want 1", got)
	}
	mu.Lock()
	lastmod = captured.Add(time.Second).UTC().Format(time.RFC3339)
	mu.Unlock()
	wait.For(t, 30*time.Second, "the page fetched again after a newer lastmod", func() bool { return pageHits.Load() >= 2 })
	// The lastmod is not newer than the new capture: the page waits for its
	// hour again.
	revisits(t, &mapHits, 2)
	if got := pageHits.Load(); got != 2 {
		t.Errorf("page fetched %d times after one newer lastmod, want 2", got)
	}
	if s := n.Status(); s.PagesFetched < 4 {
		t.Errorf("pages fetched %d: the sitemap was not revisited", s.PagesFetched)
	}
}

// revisits waits until the sitemap has been served k more times after the
// one being served now, if any (its revisits: a page its lastmod sends
// for would be fetched by the last of them).
func revisits(t *testing.T, hits *atomic.Int64, k int64) {
	t.Helper()
	until := hits.Load() + k + 1
	wait.For(t, 30*time.Second, fmt.Sprintf("the sitemap revisited %d times", k), func() bool { return hits.Load() >= until })
}
