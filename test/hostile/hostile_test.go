package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/harness"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// Limits the crawl runs with; the cases are built around them.
const (
	maxBody      = 4 << 20 // fetch.max_body_size
	maxPerHost   = 150     // scope.max_pages_per_host: ends the infinite URL spaces
	maxRedirects = 5       // fetch.max_redirects
	maxOutlinks  = 5000    // fetch.max_outlinks
	maxTries     = 2       // fetch.max_tries
	manyLinks    = 100000  // links on the links case's page
	bombSize     = 1 << 30 // what the gzip bomb inflates to
	workers      = 16      // workers
	// heapLimit bounds the heap: each worker may hold a body at the cap, raw and decoded, and
	// its links; 64 MiB for the rest. It peaks near 100 MiB; an unbounded body, bomb or
	// header would pass 1 GiB.
	heapLimit    = 3*maxBody*workers + 64<<20
	crawlTimeout = 3 * time.Minute
)

// u returns the URL of path on the case host label.
func u(label, path string) string { return "http://" + label + "." + domain + path }

// expect is the end state of one URL: in the frontier with state and reason (state 0: never
// admitted), and fetched exactly fetched times (-1: not checked).
type expect struct {
	url     string
	state   frontier.State
	reason  string
	fetched int
}

// result is what a crawl left behind, for the cases to check.
type result struct {
	rec     *recorder
	front   *frontier.Frontier // reopened after the node stopped
	metrics map[string]float64 // series -> value
	log     map[string][]archive.LogEntry
}

// metric returns the value of a series (0 when absent).
func (r *result) metric(series string) float64 { return r.metrics[series] }

type hostileCase struct {
	name    string
	seeds   []string
	expect  []expect
	metrics []string // series that must be > 0
	check   func(t *testing.T, r *result)
}

func ok(url string) expect { return expect{url, frontier.Completed, "ok", 1} }

// trapCheck: an infinite URL space is cut at exactly max_pages_per_host admitted URLs, each
// fetched once.
func trapCheck(label string) func(t *testing.T, r *result) { return trapCheckN(label, maxPerHost) }

// trapCheckN: an infinite URL space is cut at exactly want admitted URLs (by the trap
// limits and the canonical URLs, before max_pages_per_host), each fetched once.
func trapCheckN(label string, want int) func(t *testing.T, r *result) {
	return func(t *testing.T, r *result) {
		hs, found, err := r.front.Host(label + "." + domain)
		if err != nil || !found {
			t.Fatalf("host stats: %v %v", found, err)
		}
		if hs.Admitted != int64(want) {
			t.Errorf("admitted %d, want %d", hs.Admitted, want)
		}
		// Each admitted URL fetched once; a failed attempt (hs.Errors) is retried.
		if got := r.rec.pages(label); hs.Fetched < int64(want) || got > int(hs.Fetched) || (hs.Errors == 0 && got != want) {
			t.Errorf("%d attempts (%d failed), %d page requests served; want %d of each", hs.Fetched, hs.Errors, got, want)
		}
	}
}

// treePaths is how many paths of the endless tree p -> p/x, p/y under root the default
// trap limits admit.
func treePaths(root string) int {
	n := 0
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if urlscope.DefaultTraps().CheckPath(p, "") != "" {
			continue
		}
		n++
		queue = append(queue, strings.TrimSuffix(p, "/")+"/x", strings.TrimSuffix(p, "/")+"/y")
	}
	return n
}

func cases(t *testing.T, srv *web) []hostileCase {
	h := srv.handlers
	var sid atomic.Int64

	// Endless redirect chains, loops and a chain over hosts.
	h["redirect-chain"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		var k int
		if _, err := fmt.Sscanf(r.URL.Path, "/r/%d", &k); err != nil {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/r/%d", k+1), http.StatusFound)
	})
	h["redirect-loop"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusMovedPermanently)
		case "/b":
			http.Redirect(w, r, "http://redirect-loop."+domain+"/a", http.StatusFound)
		default:
			http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
		}
	})
	srv.prefix["hop-"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		k, _ := strconv.Atoi(strings.TrimPrefix(hostLabel(r.Host), "hop-"))
		http.Redirect(w, r, u(fmt.Sprintf("hop-%d", k+1), "/"), http.StatusFound)
	})
	// Bodies: endless, slow drip, gzip bomb.
	h["big"] = robotsOr("", endless)
	h["drip"] = robotsOr("", drip)
	bomb := gzipBomb(bombSize)
	h["gzip-bomb"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(bomb)
	})
	// A page with 100,000 links.
	var many strings.Builder
	many.WriteString("<html><body>")
	for i := 0; i < manyLinks; i++ {
		fmt.Fprintf(&many, "<a href=/l/%d>%d</a>", i, i)
	}
	manyPage := many.String()
	h["links"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			html(w, manyPage)
			return
		}
		html(w, "leaf")
	})
	// Malformed HTML, invalid UTF-8, other charsets.
	h["malformed"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			html(w, "<html><body><a href=\"/m1\">one<div><a href='/m2'>two</a><table><tr><a href=/m3>three</table>"+
				"<a href=\"/caf\xe9\">latin-1 byte</a>\x00\xff\xfe<<<>>></b></i><a href=\"/latin1\">l</a>"+
				"<a href=\"/sjis\">s</a><a href=\"/utf16\">u</a><!-- unterminated <a href=\"/never\">")
		case "/latin1":
			w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
			_, _ = w.Write([]byte("<p>na\xefve <a href=\"/na\xefve\">x</a>"))
		case "/sjis":
			w.Header().Set("Content-Type", "text/html; charset=shift_jis")
			_, _ = w.Write([]byte("<a href=\"/\x83e\x83X\x83g\">\x83e\x83X\x83g</a>"))
		case "/utf16":
			w.Header().Set("Content-Type", "text/html; charset=utf-16le")
			_, _ = w.Write([]byte("\xff\xfe<\x00a\x00 \x00h\x00r\x00e\x00f\x00=\x00/\x00u\x00>\x00"))
		default:
			html(w, "leaf")
		}
	})
	// Hostile URLs.
	hugeHref := "/long/" + strings.Repeat("a", 100<<10)
	h["urls"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			html(w, links(hugeHref, "http://bad\x01host."+domain+"/", "http://[::1]:1/", "http://urls."+domain+":99999/",
				"ftp://urls."+domain+"/", "mailto:a@b.example", "javascript:alert(1)", "data:text/html,x", "file:///etc/passwd",
				"gopher://urls."+domain+"/", "http://user:pw@urls."+domain+"/userinfo", "http://urls."+domain+":8080/oddport",
				"http://bücher."+domain+"/", "/ctl/a\x01b", "/tofile"))
		case "/tofile":
			w.Header().Set("Location", "file:///etc/passwd")
			w.WriteHeader(http.StatusFound)
		default:
			html(w, "leaf")
		}
	})
	h["xn--bcher-kva"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) { html(w, "idna") })
	// robots.txt: huge, garbage, 5xx, 4xx, redirected, redirect loop, redirected to another host.
	leafOr := func(page string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				html(w, page)
				return
			}
			html(w, "leaf")
		}
	}
	huge := "User-agent: *\nDisallow: /early\n" + strings.Repeat("# filler filler filler filler filler filler filler\n", (2<<20)/52) + "Disallow: /late\n"
	h["robots-huge"] = robotsOr(huge, leafOr(links("/early", "/late")))
	h["robots-garbage"] = robotsOr(garbage(8000)+"\nUser-agent: *\nDisallow /nocolon\nDisallow: /blocked\n"+garbage(3000),
		leafOr(links("/blocked", "/nocolon")))
	h["robots-5xx"] = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		html(w, "never fetched")
	}
	h["robots-4xx"] = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		leafOr(links("/private"))(w, r)
	}
	h["robots-redirect"] = func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/r1.txt", http.StatusMovedPermanently)
		case "/r1.txt":
			http.Redirect(w, r, "/r2.txt", http.StatusFound)
		case "/r2.txt":
			http.Redirect(w, r, "/real.txt", http.StatusTemporaryRedirect)
		case "/real.txt":
			_, _ = io.WriteString(w, "User-agent: *\nDisallow: /secret\n")
		default:
			leafOr(links("/secret", "/public"))(w, r)
		}
	}
	var loops atomic.Int64
	h["robots-loop"] = func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/robots") {
			http.Redirect(w, r, fmt.Sprintf("/robots.txt?n=%d", loops.Add(1)), http.StatusFound)
			return
		}
		html(w, "ok")
	}
	h["robots-cross"] = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Redirect(w, r, u("robots-target", "/robots.txt"), http.StatusMovedPermanently)
			return
		}
		leafOr(links("/x", "/y"))(w, r)
	}
	h["robots-target"] = robotsOr("User-agent: *\nDisallow: /x\n", leafOr(""))
	// Infinite URL spaces: session ids, a calendar, soft 404s.
	h["session"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		a, b, c := sid.Add(1), sid.Add(1), sid.Add(1)
		html(w, links(fmt.Sprintf("/page?sid=%x", a), fmt.Sprintf("/page?sid=%x", b), fmt.Sprintf("/other?PHPSESSID=%x", c)))
	})
	h["calendar"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		y, m := 2024, 1
		_, _ = fmt.Sscanf(r.URL.Path, "/cal/%d/%d", &y, &m)
		next := time.Date(y, time.Month(m)+1, 1, 0, 0, 0, 0, time.UTC)
		prev := time.Date(y, time.Month(m)-1, 1, 0, 0, 0, 0, time.UTC)
		html(w, links(next.Format("/cal/2006/01"), prev.Format("/cal/2006/01")))
	})
	// A sequence whose every link is redirected to its canonical form:
	// /d/501 to /d/0501, which links /d/502 and /d/500.
	h["redirected"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		var k int
		if _, err := fmt.Sscanf(r.URL.Path, "/d/%d", &k); err != nil || k < 1 || k > 9998 {
			http.NotFound(w, r)
			return
		}
		if canon := fmt.Sprintf("/d/%04d", k); r.URL.Path != canon {
			http.Redirect(w, r, canon, http.StatusMovedPermanently)
			return
		}
		html(w, links(fmt.Sprintf("/d/%d", k+1), fmt.Sprintf("/d/%d", k-1)))
	})
	h["soft404"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimSuffix(r.URL.Path, "/")
		if len(p) > 1000 {
			p = "/deep"
		}
		html(w, "<title>Page not found</title>"+links(p+"/x", p+"/y"))
	})

	return []hostileCase{
		{name: "redirect chain", seeds: []string{u("redirect-chain", "/r/0")},
			expect: append(chain(maxRedirects, func(k int) string { return u("redirect-chain", fmt.Sprintf("/r/%d", k)) }),
				expect{u("redirect-chain", fmt.Sprintf("/r/%d", maxRedirects+1)), 0, "", 0}),
			metrics: []string{`phasecrawl_urls_out_of_scope_total{reason="redirects"}`}},
		{name: "redirect loop", seeds: []string{u("redirect-loop", "/a"), u("redirect-loop", "/self")},
			expect: []expect{{u("redirect-loop", "/a"), frontier.Completed, "redirect", 1},
				{u("redirect-loop", "/b"), frontier.Completed, "redirect", 1}, {u("redirect-loop", "/self"), frontier.Completed, "redirect", 1}}},
		{name: "redirect chain over hosts", seeds: []string{u("hop-0", "/")},
			expect: append(chain(maxRedirects, func(k int) string { return u(fmt.Sprintf("hop-%d", k), "/") }),
				expect{u(fmt.Sprintf("hop-%d", maxRedirects+1), "/"), 0, "", 0}),
			check: func(t *testing.T, r *result) {
				if n := r.rec.count(fmt.Sprintf("hop-%d", maxRedirects+1), "/robots.txt"); n != 0 {
					t.Errorf("the host past the limit was contacted (%d robots.txt requests)", n)
				}
			}},
		{name: "body over the limit", seeds: []string{u("big", "/")}, expect: []expect{ok(u("big", "/"))},
			metrics: []string{"phasecrawl_bodies_truncated_total"},
			check: func(t *testing.T, r *result) {
				e := r.last(t, u("big", "/"))
				if !e.Truncated || e.Bytes != maxBody {
					t.Errorf("crawl log: truncated=%v bytes=%d, want true and %d", e.Truncated, e.Bytes, maxBody)
				}
			}},
		{name: "slow drip", seeds: []string{u("drip", "/")},
			expect:  []expect{{u("drip", "/"), frontier.Completed, "too_slow", maxTries}},
			metrics: []string{`phasecrawl_fetch_errors_total{kind="too_slow"}`},
			check: func(t *testing.T, r *result) {
				for _, e := range r.log[u("drip", "/")] {
					if e.DurationMS > 3000 {
						t.Errorf("a slow-drip fetch lasted %dms: the min-rate guard should cut it after one window", e.DurationMS)
					}
				}
			}},
		{name: "server that never answers", seeds: []string{u("silent", "/")},
			expect:  []expect{{u("silent", "/"), frontier.Completed, "robots_unavailable", -1}},
			metrics: []string{`phasecrawl_fetch_errors_total{kind="robots_timeout"}`}},
		{name: "connection refused", seeds: []string{u("refused", "/")},
			expect:  []expect{{u("refused", "/"), frontier.Completed, "robots_unavailable", -1}},
			metrics: []string{`phasecrawl_fetch_errors_total{kind="robots_conn_refused"}`}},
		{name: "gzip bomb", seeds: []string{u("gzip-bomb", "/")}, expect: []expect{ok(u("gzip-bomb", "/"))},
			metrics: []string{"phasecrawl_bodies_truncated_total"},
			check: func(t *testing.T, r *result) {
				if e := r.last(t, u("gzip-bomb", "/")); !e.Truncated || e.Bytes != int64(len(bomb)) {
					t.Errorf("crawl log: truncated=%v bytes=%d, want true and %d (as transferred)", e.Truncated, e.Bytes, len(bomb))
				}
			}},
		{name: "100,000 links", seeds: []string{u("links", "/")}, expect: []expect{ok(u("links", "/")), ok(u("links", "/l/0"))},
			metrics: []string{`phasecrawl_urls_out_of_scope_total{reason="outlinks_cap"}`, "phasecrawl_urls_over_host_cap_total"},
			check: func(t *testing.T, r *result) {
				if e := r.last(t, u("links", "/")); e.Outlinks != maxOutlinks {
					t.Errorf("outlinks %d, want fetch.max_outlinks = %d", e.Outlinks, maxOutlinks)
				}
				// The million-links page adds its own (a number its truncation sets).
				if got := r.metric(`phasecrawl_urls_out_of_scope_total{reason="outlinks_cap"}`); got < manyLinks-maxOutlinks {
					t.Errorf("outlinks_cap counted %v, want at least %d", got, manyLinks-maxOutlinks)
				}
				if got := r.metric("phasecrawl_urls_over_host_cap_total"); got < maxOutlinks-maxPerHost+1 {
					t.Errorf("urls_over_host_cap_total = %v, want at least %d", got, maxOutlinks-maxPerHost+1)
				}
				trapCheck("links")(t, r)
			}},
		{name: "malformed HTML and charsets", seeds: []string{u("malformed", "/")},
			expect: []expect{ok(u("malformed", "/")), ok(u("malformed", "/m1")), ok(u("malformed", "/m2")), ok(u("malformed", "/m3")),
				ok(u("malformed", "/caf%E9")), ok(u("malformed", "/latin1")), ok(u("malformed", "/na%EFve")), ok(u("malformed", "/sjis")),
				ok(u("malformed", "/%83e%83X%83g")), ok(u("malformed", "/utf16")), {u("malformed", "/never"), 0, "", 0}}},
		{name: "hostile URLs", seeds: []string{u("urls", "/")},
			expect: []expect{ok(u("urls", "/")), ok(u("urls", "/userinfo")), ok("http://urls." + domain + ":8080/oddport"),
				ok(u("xn--bcher-kva", "/")), ok(u("urls", "/ctl/a%01b")), {u("urls", "/tofile"), frontier.Completed, "redirect", 1}},
			metrics: []string{`phasecrawl_urls_out_of_scope_total{reason="too_long"}`, `phasecrawl_urls_out_of_scope_total{reason="bad_host"}`,
				`phasecrawl_urls_out_of_scope_total{reason="scheme"}`,
				`phasecrawl_urls_out_of_scope_total{reason="host"}`},
			check: func(t *testing.T, r *result) {
				r.rec.mu.Lock()
				defer r.rec.mu.Unlock()
				if len(r.rec.auths) > 0 {
					t.Errorf("credentials of a URL's userinfo were sent: %q", r.rec.auths)
				}
				for uri := range r.rec.hits["urls"] {
					if len(uri) > 4096 {
						t.Errorf("a %d-byte URL was fetched", len(uri))
					}
				}
			}},
		{name: "robots.txt huge", seeds: []string{u("robots-huge", "/")},
			expect: []expect{ok(u("robots-huge", "/")), {u("robots-huge", "/early"), frontier.Completed, "robots", 0}, ok(u("robots-huge", "/late"))}},
		{name: "robots.txt malformed", seeds: []string{u("robots-garbage", "/")},
			expect: []expect{ok(u("robots-garbage", "/")), {u("robots-garbage", "/blocked"), frontier.Completed, "robots", 0}, ok(u("robots-garbage", "/nocolon"))}},
		{name: "robots.txt 5xx", seeds: []string{u("robots-5xx", "/")},
			expect:  []expect{{u("robots-5xx", "/"), frontier.Completed, "robots_unavailable", 0}},
			metrics: []string{`phasecrawl_fetch_errors_total{kind="robots_http_5xx"}`}},
		{name: "robots.txt 4xx", seeds: []string{u("robots-4xx", "/")},
			expect: []expect{ok(u("robots-4xx", "/")), ok(u("robots-4xx", "/private"))}},
		{name: "robots.txt redirected", seeds: []string{u("robots-redirect", "/")},
			expect: []expect{ok(u("robots-redirect", "/")), {u("robots-redirect", "/secret"), frontier.Completed, "robots", 0}, ok(u("robots-redirect", "/public"))}},
		{name: "robots.txt redirect loop", seeds: []string{u("robots-loop", "/")},
			expect: []expect{ok(u("robots-loop", "/"))},
			check: func(t *testing.T, r *result) {
				r.rec.mu.Lock()
				defer r.rec.mu.Unlock()
				n := 0
				for uri, c := range r.rec.hits["robots-loop"] {
					if strings.HasPrefix(uri, "/robots") {
						n += c
					}
				}
				// RFC 9309: follow at least five redirects, then allow all. A load that failed
				// (a timeout) is tried again after robots.error_ttl.
				failed := 0
				for _, e := range r.log[u("robots-loop", "/")] {
					if e.Reason == "robots_unavailable" {
						failed++
					}
				}
				if n < 6 || n > 6*(1+failed) || (failed == 0 && n != 6) {
					t.Errorf("%d robots.txt requests (%d failed loads), want 6: the file and five redirects", n, failed)
				}
			}},
		{name: "robots.txt redirected to another host", seeds: []string{u("robots-cross", "/")},
			expect: []expect{ok(u("robots-cross", "/")), {u("robots-cross", "/x"), frontier.Completed, "robots", 0}, ok(u("robots-cross", "/y"))}},
		// Session ids are removed (scope.canonical): "/", "/page" and "/other", once each.
		{name: "session ids", seeds: []string{u("session", "/")}, expect: []expect{ok(u("session", "/")), ok(u("session", "/page")), ok(u("session", "/other"))},
			check: trapCheckN("session", 3)},
		// The seed, then scope.max_pattern_depth steps either way (a seed starts a run).
		{name: "calendar", seeds: []string{u("calendar", "/cal/2024/01")}, expect: []expect{ok(u("calendar", "/cal/2024/01"))},
			metrics: []string{`phasecrawl_urls_out_of_scope_total{reason="url_pattern"}`}, check: trapCheckN("calendar", 1+2*config.Default().Scope.MaxPatternDepth)},
		// A redirect's target counts as found on the page that redirected
		// to it: its run goes on. The seed and its other form (/d/500,
		// linked by its neighbours), then scope.max_pattern_depth steps
		// either way, each a redirect and its target.
		{name: "redirected sequence", seeds: []string{u("redirected", "/d/0500")}, expect: []expect{ok(u("redirected", "/d/0500"))},
			metrics: []string{`phasecrawl_urls_out_of_scope_total{reason="url_pattern"}`}, check: trapCheckN("redirected", 2+4*config.Default().Scope.MaxPatternDepth)},
		{name: "soft 404", seeds: []string{u("soft404", "/")}, expect: []expect{ok(u("soft404", "/"))},
			metrics: []string{`phasecrawl_urls_out_of_scope_total{reason="path_repeats"}`}, check: trapCheckN("soft404", treePaths("/"))},
	}
}

// chain expects URLs 0..limit of a redirect chain: all redirects, the last one cut.
func chain(limit int, url func(k int) string) []expect {
	var ex []expect
	for k := 0; k < limit; k++ {
		ex = append(ex, expect{url(k), frontier.Completed, "redirect", 1})
	}
	return append(ex, expect{url(limit), frontier.Completed, "redirect_limit", 1})
}

// checkServed compares how often the server answered e.url with e.fetched. Every request
// must match a logged attempt; an attempt that failed (a timeout on a loaded machine) is
// retried, so the count is exact only when no attempt failed.
func (r *result) checkServed(t *testing.T, e expect) {
	t.Helper()
	hostPath := strings.SplitN(strings.TrimPrefix(e.url, "http://"), "/", 2)
	got := r.rec.count(hostLabel(hostPath[0]), "/"+hostPath[1])
	es := r.log[e.url]
	failed := 0 // attempts that did not end as the URL did (a timeout retried)
	for _, le := range es {
		if le.Reason != e.reason {
			failed++
		}
	}
	switch {
	case e.fetched == 0 && got != 0:
		t.Errorf("%s: served %d times, want never", e.url, got)
	case got > len(es):
		t.Errorf("%s: served %d times but %d attempts logged: %+v", e.url, got, len(es), es)
	case failed == 0 && got != e.fetched:
		t.Errorf("%s: served %d times, want %d: %+v", e.url, got, e.fetched, es)
	case failed > 0 && got < min(e.fetched, 1):
		t.Errorf("%s: never served: %+v", e.url, es)
	case failed > 0:
		t.Logf("%s: %d of %d attempts failed (served %d times): %s", e.url, failed, len(es), got, es[0].Error)
	}
}

// last returns the last crawl-log entry of url.
func (r *result) last(t *testing.T, url string) archive.LogEntry {
	t.Helper()
	es := r.log[url]
	if len(es) == 0 {
		t.Fatalf("%s: no crawl log entry", url)
	}
	return es[len(es)-1]
}

func nodeConfig(t *testing.T, webAddr, rawAddr, silentAddr, refusedAddr string, seeds []string) config.Config {
	c := config.Default()
	c.Name = "hostile"
	c.Data = filepath.Join(t.TempDir(), "data")
	c.HTTP = "127.0.0.1:0"
	c.Seeds = seeds
	c.Resolve = []string{"silent." + domain + "=" + silentAddr, "refused." + domain + "=" + refusedAddr,
		"raw-*." + domain + "=" + rawAddr, "*." + domain + "=" + webAddr}
	c.AllowPrivate = false // the --resolve targets need it not; nothing else on loopback may be reached
	c.Delay = 2 * time.Millisecond
	c.Workers = workers
	c.ShutdownTimeout = 5 * time.Second
	c.Scope.AllowDomains = []string{domain}
	c.Scope.AllowHosts = escapeHosts
	c.Scope.MaxPagesPerHost = maxPerHost
	c.Fetch.ConnectTimeout = time.Second
	c.Fetch.HeaderTimeout = 3 * time.Second // the silent server; generous for a loaded machine under -race
	c.Fetch.BodyTimeout = 5 * time.Second
	c.Fetch.MaxBodySize = maxBody
	c.Fetch.MinRate = 2000
	c.Fetch.RateWindow = 300 * time.Millisecond
	c.Fetch.MaxTries = maxTries
	c.Fetch.RetryBackoff = 100 * time.Millisecond
	c.Fetch.MaxRedirects = maxRedirects
	c.Fetch.MaxOutlinks = maxOutlinks
	c.Robots.ErrorTTL = time.Second
	c.Bucket.MaxQueueWait = 20 * time.Millisecond
	// Its pages repeat a few short bodies under many URLs, some of whose
	// links resolve to other URLs under each: every page is archived and
	// read in full, as each case expects.
	c.WARC.Dedup = false
	return c
}

// scrape reads /metrics into series -> value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// netnsEnv is set in the test binary run inside its network namespace.
const netnsEnv = "PHASECRAWL_HOSTILE_NETNS"

// TestHostileWeb crawls every case at once with one node and checks each case's end state.
// Some cases link to or redirect to addresses off loopback (169.254.169.254, which answers on
// some machines): the crawl runs in a network namespace with only loopback (unshare -n), the
// test binary started again inside it, so even a guard that failed could reach nothing.
func TestHostileWeb(t *testing.T) {
	if os.Getenv(netnsEnv) == "1" {
		onlyLoopback(t)
		hostileWeb(t)
		t.Run("allow-private keeps link-local closed", allowPrivateKeepsLinkLocal)
		return
	}
	why := ""
	if os.Geteuid() != 0 {
		why = "not root (unshare -n needs CAP_SYS_ADMIN)"
	}
	for _, bin := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(bin); err != nil && why == "" {
			why = bin + " not found (util-linux and iproute2 are needed)"
		}
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the hostile suite cannot run: %s (CI=true: it must run in CI)", why)
		}
		t.Skipf("the hostile suite needs a network namespace: %s", why)
	}
	args := []string{"-n", "--", "sh", "-c", `ip link set lo up && exec "$0" "$@"`, os.Args[0], "-test.run=^TestHostileWeb$", "-test.count=1"}
	if testing.Verbose() {
		args = append(args, "-test.v=true")
	}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace with only loopback:\n%s", out)
	if err != nil {
		t.Fatalf("the suite failed in its namespace: %v", err)
	}
}

// onlyLoopback fails the test unless the only network interface is an up loopback.
func onlyLoopback(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 || i.Flags&net.FlagUp == 0 {
			t.Fatalf("interface %s (%v) in the test's namespace: want only an up loopback", i.Name, i.Flags)
		}
	}
}

func hostileWeb(t *testing.T) {
	rec := newRecorder()
	w := &web{rec: rec, handlers: map[string]http.HandlerFunc{}, prefix: map[string]http.HandlerFunc{}}
	hs := httptest.NewUnstartedServer(w)
	hs.Config.ReadHeaderTimeout = 10 * time.Second
	raw := newRawServer(t, rec)
	cs := append(cases(t, w), moreCases(t, w, raw, hs.Listener.Addr().String())...)
	hs.Start()
	defer hs.Close()
	raw.Start()
	silent := newSilent(t)
	var seeds []string
	for _, c := range cs {
		seeds = append(seeds, c.seeds...)
	}
	cfg := nodeConfig(t, hs.Listener.Addr().String(), raw.Addr(), silent.Addr(), closedPort(t), seeds)

	stopHeap := harness.PeakHeap(25 * time.Millisecond)
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	base := "http://" + n.Addr().String()
	start := time.Now()

	t.Run("seeds API refuses hostile seeds", func(t *testing.T) { hostileSeeds(t, base) })

	wait.Steady(t, crawlTimeout, 100*time.Millisecond, "crawl done", func() (bool, string) {
		select {
		case err := <-runErr:
			t.Fatalf("the node stopped during the crawl: %v", err)
		default:
		}
		return n.Done(), fmt.Sprintf("%+v", n.Status())
	})
	crawlTime := time.Since(start)
	res := &result{rec: rec, metrics: scrape(t, base)}
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("node not healthy after the crawl: %v", err)
	} else {
		resp.Body.Close()
	}
	status := n.Status()
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("node did not stop")
	}
	peak := stopHeap()
	t.Logf("crawl done in %s: %d pages, %d fetch errors; heap peak %d MiB", crawlTime.Round(time.Millisecond), status.PagesFetched, status.FetchErrors, peak>>20)
	if peak > heapLimit {
		t.Errorf("heap peaked at %d MiB, over the %d MiB bound", peak>>20, heapLimit>>20)
	}
	if f := status.Frontier; f.InList != 0 || f.InProgress != 0 || f.Stalled != 0 {
		t.Errorf("frontier not drained: %+v", f)
	}

	// The crawl log and the frontier agree on every URL: COMPLETED with the logged reason.
	res.log = map[string][]archive.LogEntry{}
	if _, err := archive.ReadCrawlLog(filepath.Join(cfg.Data, "crawl.log"), func(e archive.LogEntry) error {
		res.log[e.URL] = append(res.log[e.URL], e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fo := frontier.DefaultOptions(filepath.Join(cfg.Data, "frontier.db"))
	if res.front, err = frontier.Open(fo); err != nil {
		t.Fatal(err)
	}
	defer res.front.Close()
	if c := res.front.Counts(); c.Completed != int64(len(res.log)) {
		t.Errorf("%d URLs COMPLETED, %d URLs in the crawl log", c.Completed, len(res.log))
	}
	var bad []string
	for url, es := range res.log {
		last := es[len(es)-1]
		rec, found, err := res.front.Get(frontier.RefOf(url))
		if err != nil || !found || rec.State != frontier.Completed || last.Reason == "" || rec.Reason != last.Reason {
			bad = append(bad, fmt.Sprintf("%s: frontier %v %q (found %v, %v), log reason %q", url, rec.State, rec.Reason, found, err, last.Reason))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d URLs without a defined end state:\n%s", len(bad), strings.Join(bad[:min(len(bad), 20)], "\n"))
	}

	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			for _, e := range c.expect {
				rec, found, err := res.front.Get(frontier.RefOf(e.url))
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case e.state == 0 && found:
					t.Errorf("%s: admitted (%v %q), want never admitted", e.url, rec.State, rec.Reason)
				case e.state != 0 && !found:
					t.Errorf("%s: not in the frontier, want %v %q", e.url, e.state, e.reason)
				case e.state != 0 && (rec.State != e.state || rec.Reason != e.reason):
					t.Errorf("%s: %v %q, want %v %q", e.url, rec.State, rec.Reason, e.state, e.reason)
				}
				if e.state != 0 {
					if es := res.log[e.url]; len(es) == 0 || es[len(es)-1].Reason != e.reason {
						t.Errorf("%s: crawl log %+v, want last reason %q", e.url, es, e.reason)
					}
				}
				if e.fetched >= 0 {
					res.checkServed(t, e)
				}
			}
			for _, m := range c.metrics {
				if res.metric(m) <= 0 {
					t.Errorf("metric %s = %v, want > 0", m, res.metric(m))
				}
			}
			if c.check != nil {
				c.check(t, res)
			}
		})
	}
}

// hostileSeeds posts seeds that must all be refused, as lines and as JSON.
func hostileSeeds(t *testing.T, base string) {
	lines := []string{
		"http://urls." + domain + "/" + strings.Repeat("a", 100<<10),  // too long (normalized)
		"http://" + strings.Repeat("b", 200<<10) + "." + domain + "/", // over the line cap
		"ftp://urls." + domain + "/",
		"http://[::1]:1/",
		"http://bad\x01host." + domain + "/",
		"http://urls." + domain + ":99999/",
		"javascript:alert(1)",
	}
	post := func(body string) node.SeedResult {
		resp, err := http.Post(base+"/v1/seeds", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res node.SeedResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want 400: %+v", resp.StatusCode, res)
		}
		return res
	}
	res := post(strings.Join(lines, "\n") + "\n")
	if res.Added != 0 || res.BadTotal != len(lines) || len(res.Bad) != len(lines) {
		t.Errorf("lines: %d added, %d bad; want 0 and %d: %+v", res.Added, res.BadTotal, len(lines), res.Bad)
	}
	for i, b := range res.Bad {
		if b.Line != i+1 || len(b.URL) > 300 || b.Error == "" {
			t.Errorf("bad line %d: %+v", i+1, b)
		}
	}
	res = post(`[1, {"a": 2}, null, "ftp://y.example/", ["x"]]`)
	if res.Added != 0 || res.BadTotal != 5 || res.Given != 5 {
		t.Errorf("JSON: %+v, want 5 given, 5 bad", res)
	}
}
