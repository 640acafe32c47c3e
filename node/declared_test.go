package node

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// docsSite is a small documentation site of the kind Sphinx builds: pages
// reachable only by <link rel=index|search|next>, a Link header, a meta
// refresh, srcset, requisites (a style sheet naming an image, a script, an
// image), a page naming another as canonical, and pages listed only in
// sitemaps (robots.txt names a gzip'd sitemap index; /sitemap.xml is
// found only by fetch.sitemaps=all). It records the paths requested.
func docsSite(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var hits []string
	html := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!DOCTYPE html><html><head><meta charset=utf-8></head><body>"+body+"</body></html>")
	}
	gzipped := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(s))
		_ = zw.Close()
		return b.Bytes()
	}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, r.URL.RequestURI())
		mu.Unlock()
		switch r.URL.RequestURI() {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nDisallow: /private\nSitemap: %s/maps/index.xml.gz\n", srv.URL)
		case "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!DOCTYPE html><html><head>
<link rel="index" title="Index" href="genindex.html">
<link rel="search" title="Search" href="search.html">
<link rel="next" href="next.html">
<link rel="stylesheet" href="_static/style.css">
<script src="_static/app.js"></script>
</head><body><img src="_images/logo.png" srcset="_images/logo@2x.png 2x">
<a href="dup.html?session=1">dup</a></body></html>`)
		case "/genindex.html", "/search.html", "/header-linked.html", "/refreshed.html", "/dup.html",
			"/only-in-sitemap-1", "/only-in-sitemap-2", "/only-in-root-sitemap", "/only-via-dup":
			html(w, "leaf")
		case "/next.html":
			w.Header().Set("Link", `</header-linked.html>; rel="next", </private/x>; rel=prev`)
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><meta http-equiv="refresh" content="5; url=refreshed.html"></head><body>next</body></html>`)
		case "/dup.html?session=1":
			html(w, `<link rel="canonical" href="/dup.html"><a href="/only-via-dup">x</a>`)
		case "/_static/style.css":
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, `body { background: url("../_images/bg.png") }`)
		case "/_static/app.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, `var a = "<a href='/not-a-link'>";`)
		case "/_images/logo.png", "/_images/logo@2x.png", "/_images/bg.png":
			w.Header().Set("Content-Type", "image/png")
			fmt.Fprint(w, "\x89PNG\r\n\x1a\n")
		case "/maps/index.xml.gz":
			w.Header().Set("Content-Type", "application/gzip")
			_, _ = w.Write(gzipped(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>%[1]s/maps/a.xml.gz</loc><lastmod>2026-01-01</lastmod></sitemap>
<sitemap><loc>%[1]s/maps/b.xml</loc></sitemap></sitemapindex>`, srv.URL)))
		case "/maps/a.xml.gz":
			w.Header().Set("Content-Type", "application/x-gzip")
			_, _ = w.Write(gzipped(fmt.Sprintf(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>%s/only-in-sitemap-1</loc><lastmod>2026-01-01T10:00:00Z</lastmod></url></urlset>`, srv.URL)))
		case "/maps/b.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>%s/only-in-sitemap-2</loc></url><url><loc>http://other.invalid/out-of-scope</loc></url>
<url><loc>%s/private/in-sitemap</loc></url></urlset>`, srv.URL, srv.URL)
		case "/sitemap.xml":
			w.Header().Set("Content-Type", "text/xml")
			fmt.Fprintf(w, `<urlset><url><loc>%s/only-in-root-sitemap</loc></url></urlset>`, srv.URL)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(hits)
		sort.Strings(out)
		return out
	}
}

// TestDeclaredLinksAndSitemaps crawls docsSite with the default settings
// and with requisites and every sitemap: the pages reachable only through
// <link rel>, a Link header, a meta refresh, srcset and sitemaps are
// fetched, each once; requisites only when asked for; the page naming
// another as canonical gives that page instead of its links, and the crawl
// log says so; and the crawl's WARC files pass gowarc's validation with a
// CDXJ index that points at their records.
func TestDeclaredLinksAndSitemaps(t *testing.T) {
	always := []string{"/", "/robots.txt", "/genindex.html", "/search.html", "/next.html", "/header-linked.html",
		"/refreshed.html", "/_images/logo@2x.png", "/dup.html?session=1", "/dup.html"}
	robotsMaps := []string{"/maps/index.xml.gz", "/maps/a.xml.gz", "/maps/b.xml", "/only-in-sitemap-1", "/only-in-sitemap-2"}
	requisites := []string{"/_static/style.css", "/_static/app.js", "/_images/logo.png", "/_images/bg.png"}
	tests := []struct {
		name       string
		requisites bool
		sitemaps   string
		want       []string
	}{
		{"defaults", false, "robots", slices.Concat(always, robotsMaps)},
		{"requisites and all sitemaps", true, "all", slices.Concat(always, robotsMaps, requisites, []string{"/sitemap.xml", "/only-in-root-sitemap"})},
		{"no sitemaps", false, "off", always},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, hits := docsSite(t)
			c := testConfig(t, srv)
			c.Fetch.Requisites = tt.requisites
			c.Fetch.Sitemaps = tt.sitemaps
			// No page of docsSite is slow: a response late on a loaded
			// machine must not stall a page for the hour-long backoff.
			c.Fetch.HeaderTimeout = 10 * time.Second
			n, stop := start(t, c)
			wait.For(t, 30*time.Second, "crawl", func() bool { return n.Status().Done })
			stop()
			want := slices.Clone(tt.want)
			sort.Strings(want)
			if got := hits(); !slices.Equal(got, want) {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			canon := map[string]string{}
			if _, err := archive.ReadCrawlLog(filepath.Join(c.Data, crawlLogName), func(e archive.LogEntry) error {
				if e.Canonical != "" {
					canon[strings.TrimPrefix(e.URL, srv.URL)] = strings.TrimPrefix(e.Canonical, srv.URL)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"/dup.html?session=1": "/dup.html"}; fmt.Sprint(canon) != fmt.Sprint(want) {
				t.Errorf("canonical in the crawl log: %v, want %v", canon, want)
			}
			files, _ := filepath.Glob(filepath.Join(c.Data, "warc", "*.warc.gz"))
			if len(files) == 0 {
				t.Fatal("no WARC file")
			}
			records, lines := 0, 0
			for _, f := range files {
				k, err := archive.ValidateWARC(f)
				if err != nil {
					t.Fatal(err)
				}
				records += k
				k, err = archive.CheckCDXJ(f)
				if err != nil {
					t.Fatal(err)
				}
				lines += k
			}
			// a warcinfo per file, a request and a response per request made
			if n := len(hits()); records != 2*n+len(files) || lines != n {
				t.Errorf("%d WARC records and %d index lines for %d requests in %d files", records, lines, n, len(files))
			}
		})
	}
}
