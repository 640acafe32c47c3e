package hostile

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
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
)

const (
	deepNesting = 100000   // elements nested on the nesting case's page
	bigAttr     = 10 << 20 // bytes of one attribute on the attribute case's page
	millionLink = 1000000  // links on the million-links case's page
	robotsBig   = 10 << 20 // bytes of the 10 MB robots.txt
)

// setAside is the crawl-log error of a URL set aside because its host was found unreachable.
const setAside = "host unreachable earlier in this list"

// perURL is a raw case host whose /bad fails inside its response with kind: the failure is that
// URL's alone, tried fetch.max_tries times; the host's plain pages are each fetched once, none
// set aside. With alt, /bad may also end with one of those kinds (a loaded machine may not read
// 10 MiB of headers within fetch.header_timeout).
func perURL(name, label, kind string, alt ...string) hostileCase {
	ex := []expect{ok(u(label, "/"))}
	var metrics []string
	if len(alt) == 0 {
		ex = append(ex, expect{u(label, "/bad"), frontier.Completed, kind, maxTries})
		metrics = []string{`phasecrawl_fetch_errors_total{kind="` + kind + `"}`}
	}
	for i := 1; i <= normalPages; i++ {
		ex = append(ex, ok(u(label, fmt.Sprintf("/n%d", i))))
	}
	return hostileCase{name: name, seeds: []string{u(label, "/")}, expect: ex, metrics: metrics,
		check: func(t *testing.T, r *result) {
			if len(alt) > 0 {
				bad := u(label, "/bad")
				es := r.log[bad]
				rec, found, err := r.front.Get(frontier.RefOf(bad))
				switch {
				case err != nil || !found || rec.State != frontier.Completed:
					t.Errorf("%s: frontier %v %q (found %v, %v), want COMPLETED", bad, rec.State, rec.Reason, found, err)
				case len(es) != maxTries || !slices.Contains(append(alt, kind), rec.Reason):
					t.Errorf("%s: %q after %d attempts, want %q (or %q) after %d: %+v", bad, rec.Reason, len(es), kind, alt, maxTries, es)
				}
			}
			for url, es := range r.log {
				if !strings.HasPrefix(url, "http://"+label+".") {
					continue
				}
				for _, e := range es {
					if e.Error == setAside {
						t.Errorf("%s set aside after a failure inside one response: %+v", url, e)
					}
				}
			}
		}}
}

// moreCases adds the raw misbehaviours (served by raw), the large-document, content-type,
// status-code and robots.txt cases, and links and redirects to addresses the node was not
// given; webAddr is the web's own loopback address.
func moreCases(t *testing.T, srv *web, raw *rawServer, webAddr string) []hostileCase {
	h := srv.handlers
	_, webPort, _ := net.SplitHostPort(webAddr)

	raw.cases["raw-short"] = shortBody
	raw.cases["raw-chunks"] = badChunks
	raw.cases["raw-reset"] = resetAfterHeaders
	raw.cases["raw-headers"] = hugeHeaders
	raw.cases["raw-http09"] = http09
	raw.cases["raw-continue"] = endlessContinue
	raw.cases["raw-slowhead"] = slowHeaders
	raw.cases["raw-drip"] = dripBody
	raw.cases["raw-robots-slow"] = shortBody // never reached: its robots.txt never answers in time
	raw.robot["raw-robots-slow"] = slowHeaders

	// A Content-Length of 1 TB over an endless body.
	h["huge-cl"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1099511627776")
		endless(w, r)
	})
	// 100,000 nested elements with a link at the bottom; a 10 MiB attribute between two links;
	// a million links.
	h["nesting"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			html(w, "leaf")
			return
		}
		html(w, "<html><body>"+strings.Repeat("<div><span>", deepNesting/2)+"<a href=\"/bottom\">deep</a>"+strings.Repeat("</span></div>", deepNesting/2)+"</body></html>")
	})
	h["attr"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			html(w, "leaf")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = fmt.Fprint(w, "<html><body><a href=\"/before\">b</a><div title=\"")
		chunk := strings.Repeat("A", 64<<10)
		for i := 0; i < bigAttr/len(chunk); i++ {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
		_, _ = fmt.Fprint(w, "\"><a href=\"/after\">a</a></div></body></html>")
	})
	million := make([]byte, 0, 15*millionLink) // built once: generating it per request is slower than fetch.min_rate under -race
	for i := 0; i < millionLink; i++ {
		million = strconv.AppendInt(append(million, "<a href=/m/"...), int64(i), 10)
		million = append(million, '>')
	}
	h["million"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			html(w, "leaf")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(million)
	})
	// Content types that lie.
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
	h["types"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			html(w, links("/html-as-png", "/png-as-html", "/html-as-json", "/bad-type"))
		case "/html-as-png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = fmt.Fprint(w, links("/hidden-png"))
		case "/html-as-json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprint(w, links("/hidden-json"))
		case "/png-as-html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = fmt.Fprint(w, png+strings.Repeat("\x00\xff", 500))
		case "/bad-type":
			w.Header().Set("Content-Type", "text/html; charset=\"unterminated; ;;=")
			_, _ = fmt.Fprint(w, links("/from-bad-type"))
		default:
			html(w, "leaf")
		}
	})
	// Odd status codes.
	h["status"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			html(w, links("/304", "/299", "/204", "/418", "/999", "/301-nowhere"))
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/299":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(299)
			_, _ = fmt.Fprint(w, links("/from299"))
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/418":
			w.WriteHeader(http.StatusTeapot)
		case "/999":
			w.WriteHeader(999)
		case "/301-nowhere":
			w.WriteHeader(http.StatusMovedPermanently)
		default:
			html(w, "leaf")
		}
	})
	// robots.txt answering 401, and one of 10 MB.
	h["robots-401"] = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/" {
			html(w, links("/members"))
			return
		}
		html(w, "leaf")
	}
	h["robots-10mb"] = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = fmt.Fprint(w, "User-agent: *\nDisallow: /early\n")
			line := strings.Repeat("# filler filler filler filler filler filler filler\n", 1024)
			for n := 0; n < robotsBig; n += len(line) {
				if _, err := fmt.Fprint(w, line); err != nil {
					return
				}
			}
			_, _ = fmt.Fprint(w, "Disallow: /late\n")
			return
		}
		if r.URL.Path == "/" {
			html(w, links("/early", "/late"))
			return
		}
		html(w, "leaf")
	}
	// Links and redirects to loopback, link-local and metadata addresses the node was not
	// given (only *.hostile.test has a --resolve rule); scope.allow_hosts lets them through
	// the scope so the guard is what refuses them.
	loop := "http://127.0.0.1:" + webPort
	h["escape"] = robotsOr("", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			html(w, links(loop+"/admin", "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/",
				"http://[fe80::1]/", "/to-meta", "/to-loopback"))
		case "/to-meta":
			http.Redirect(w, r, "http://169.254.169.254/latest/user-data", http.StatusFound)
		case "/to-loopback":
			http.Redirect(w, r, loop+"/secret", http.StatusMovedPermanently)
		default:
			html(w, "leaf")
		}
	})

	refused := func(url string) expect { return expect{url, frontier.Completed, "private_address", -1} }
	return []hostileCase{
		perURL("short body", "raw-short", "conn_reset"),
		perURL("bad chunking", "raw-chunks", "other"),
		perURL("reset after the headers", "raw-reset", "conn_reset"),
		perURL("huge headers", "raw-headers", "other", "timeout"),
		perURL("HTTP/0.9", "raw-http09", "other"),
		perURL("endless 100 Continue", "raw-continue", "timeout"),
		perURL("slow headers", "raw-slowhead", "timeout"),
		perURL("slow drip among plain pages", "raw-drip", "too_slow"),
		{name: "robots.txt slowly", seeds: []string{u("raw-robots-slow", "/")},
			expect:  []expect{{u("raw-robots-slow", "/"), frontier.Completed, "robots_unavailable", 0}},
			metrics: []string{`phasecrawl_fetch_errors_total{kind="robots_timeout"}`}},
		{name: "huge Content-Length", seeds: []string{u("huge-cl", "/")}, expect: []expect{ok(u("huge-cl", "/"))},
			check: func(t *testing.T, r *result) {
				if e := r.last(t, u("huge-cl", "/")); !e.Truncated || e.Bytes != maxBody {
					t.Errorf("crawl log: truncated=%v bytes=%d, want true and %d", e.Truncated, e.Bytes, maxBody)
				}
			}},
		{name: "100,000 nested elements", seeds: []string{u("nesting", "/")},
			expect: []expect{ok(u("nesting", "/")), ok(u("nesting", "/bottom"))}},
		{name: "10 MiB attribute", seeds: []string{u("attr", "/")},
			expect: []expect{ok(u("attr", "/")), ok(u("attr", "/before")), {u("attr", "/after"), 0, "", 0}},
			check: func(t *testing.T, r *result) {
				if e := r.last(t, u("attr", "/")); !e.Truncated || e.Outlinks != 1 {
					t.Errorf("crawl log: truncated=%v outlinks=%d, want true and 1 (the link before the attribute)", e.Truncated, e.Outlinks)
				}
			}},
		{name: "a million links", seeds: []string{u("million", "/")},
			expect: []expect{ok(u("million", "/")), ok(u("million", "/m/0"))},
			check: func(t *testing.T, r *result) {
				if e := r.last(t, u("million", "/")); !e.Truncated || e.Outlinks != maxOutlinks {
					t.Errorf("crawl log: truncated=%v outlinks=%d, want true and %d", e.Truncated, e.Outlinks, maxOutlinks)
				}
				trapCheck("million")(t, r)
			}},
		{name: "wrong content types", seeds: []string{u("types", "/")},
			expect: []expect{ok(u("types", "/")), ok(u("types", "/html-as-png")), ok(u("types", "/png-as-html")),
				ok(u("types", "/html-as-json")), ok(u("types", "/bad-type")),
				{u("types", "/hidden-png"), 0, "", 0}, {u("types", "/hidden-json"), 0, "", 0}}},
		{name: "odd status codes", seeds: []string{u("status", "/")},
			expect: []expect{ok(u("status", "/")), {u("status", "/304"), frontier.Completed, "unsolicited_304", 1},
				ok(u("status", "/299")), ok(u("status", "/from299")), ok(u("status", "/204")),
				{u("status", "/418"), frontier.Completed, "http_4xx", 1}, {u("status", "/999"), frontier.Completed, "http_5xx", maxTries},
				{u("status", "/301-nowhere"), frontier.Completed, "redirect", 1}}},
		{name: "robots.txt 401", seeds: []string{u("robots-401", "/")},
			expect: []expect{ok(u("robots-401", "/")), ok(u("robots-401", "/members"))}},
		{name: "robots.txt of 10 MB", seeds: []string{u("robots-10mb", "/")},
			expect: []expect{ok(u("robots-10mb", "/")), {u("robots-10mb", "/early"), frontier.Completed, "robots", 0}, ok(u("robots-10mb", "/late"))}},
		{name: "links and redirects to addresses not given", seeds: []string{u("escape", "/")},
			expect: []expect{ok(u("escape", "/")), refused(loop + "/admin"), refused("http://169.254.169.254/latest/meta-data/"),
				refused("http://[fd00:ec2::254]/latest/meta-data/"), refused("http://[fe80::1]/"),
				{u("escape", "/to-meta"), frontier.Completed, "redirect", 1}, refused("http://169.254.169.254/latest/user-data"),
				{u("escape", "/to-loopback"), frontier.Completed, "redirect", 1}, refused(loop + "/secret")},
			check: func(t *testing.T, r *result) {
				r.rec.mu.Lock()
				defer r.rec.mu.Unlock()
				if n := len(r.rec.hits[""]); n > 0 {
					t.Errorf("the web was reached under %d URIs by a host it was not given: %v", n, r.rec.hits[""])
				}
			}},
	}
}

// escapeHosts are the scope.allow_hosts entries that let the escape case's links reach the guard.
var escapeHosts = []string{"127.0.0.1", "169.254.169.254", "[fd00:ec2::254]", "[fe80::1]"}

// allowPrivateKeepsLinkLocal crawls with --allow-private: loopback opens, link-local and
// metadata addresses stay refused (fetch.allow_link_local is off), before any connection.
// It runs in the suite's network namespace.
func allowPrivateKeepsLinkLocal(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		html(w, "loopback page")
	}))
	defer srv.Close()
	refused := []string{"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/latest/meta-data/", "http://[fe80::1]/"}
	c := config.Default()
	c.Name = "allow-private"
	c.Data = filepath.Join(t.TempDir(), "data")
	c.HTTP = "127.0.0.1:0"
	c.AllowPrivate = true
	c.Seeds = append([]string{srv.URL + "/page"}, refused...)
	c.Delay = time.Millisecond
	c.Workers = 4
	c.Fetch.ConnectTimeout = time.Second
	c.Bucket.MaxQueueWait = 20 * time.Millisecond
	n, err := launch.New(c, launch.Options{Options: node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	wait.For(t, time.Minute, "crawl done", func() (bool, string) { return n.Done(), fmt.Sprintf("%+v", n.Status()) })
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("run: %v", err)
	}
	reasons := map[string]archive.LogEntry{}
	if _, err := archive.ReadCrawlLog(filepath.Join(c.Data, "crawl.log"), func(e archive.LogEntry) error {
		reasons[e.URL] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if e := reasons[srv.URL+"/page"]; e.Reason != "ok" {
		t.Errorf("loopback page with --allow-private: %+v, want ok", e)
	}
	for _, u := range refused {
		if e := reasons[u]; e.Reason != "private_address" || !strings.Contains(e.Error, "fetch.allow_link_local") {
			t.Errorf("%s with --allow-private: %+v, want private_address naming fetch.allow_link_local", u, e)
		}
	}
	if h := hits.Load(); h != 2 {
		t.Errorf("the loopback server got %d requests, want 2 (robots.txt and the page)", h)
	}
}
