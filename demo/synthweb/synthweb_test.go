package synthweb

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

const testUA = "phasecrawl/1.0 (+https://example.invalid/bot)"

func defaultScope(w *Web, maxPerHost int) Scope {
	return Scope{Domains: []string{w.Config().Domain}, MaxPagesPerHost: maxPerHost, UserAgent: testUA}
}

func mustNew(t testing.TB, c Config) *Web {
	t.Helper()
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestDefaultWebMeetsFloors: the default web gives the end-to-end test at
// least 20,000 pages over at least 500 hosts, with some of every feature.
func TestDefaultWebMeetsFloors(t *testing.T) {
	w := mustNew(t, DefaultConfig())
	exp := w.Expected(defaultScope(w, 1000))
	t.Logf("pages=%d hosts=%d/%d disallowed=%d trap=%v fetches=%d crawl-delay hosts=%d max host URLs=%d status=%v seeds=%v",
		len(exp.Pages), exp.Hosts, len(w.sites), len(exp.Disallowed), exp.TrapHosts, exp.Fetches, len(exp.CrawlDelay), exp.MaxHostURLs, exp.Status, w.Seeds())
	if len(exp.Pages) < 20000 || exp.Hosts < 500 {
		t.Errorf("default web: %d pages over %d hosts, want >= 20000 over >= 500", len(exp.Pages), exp.Hosts)
	}
	if exp.Hosts >= len(w.sites) {
		t.Errorf("every host reachable (%d); some must not be", exp.Hosts)
	}
	if len(exp.Disallowed) == 0 || len(exp.CrawlDelay) == 0 || exp.Status[404] == 0 || exp.Status[410] == 0 || exp.Status[301] == 0 {
		t.Errorf("missing features: disallowed=%d crawl-delay=%d status=%v", len(exp.Disallowed), len(exp.CrawlDelay), exp.Status)
	}
	if len(exp.TrapHosts) != 1 || exp.TrapHosts["trap1.synth.test"] != 1000 {
		t.Errorf("trap hosts %v, want trap1.synth.test: 1000", exp.TrapHosts)
	}
	if len(exp.Warnings) > 0 || exp.MaxHostURLs >= 1000 {
		t.Errorf("warnings %v, max host URLs %d", exp.Warnings, exp.MaxHostURLs)
	}
	if w.ResolvePattern() != "*.synth.test" {
		t.Errorf("ResolvePattern() = %q", w.ResolvePattern())
	}
	// A too small cap makes the oracle say it is inexact.
	if e := w.Expected(defaultScope(w, 50)); len(e.Warnings) == 0 {
		t.Error("no warning with MaxPagesPerHost=50")
	}
}

// digest renders every URL of the web (robots.txt included) in order.
func digest(t testing.TB, w *Web) [32]byte {
	h := sha256.New()
	for _, s := range w.sites {
		var b bytes.Buffer
		w.robotsResponse(&b, s)
		h.Write(b.Bytes())
		paths := make([]string, 0, len(s.paths))
		for p := range s.paths {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			b.Reset()
			resp := w.render(&b, s, s.paths[p])
			io.WriteString(h, s.name+p+" "+resp.location+" "+resp.ctype+"\n")
			h.Write(b.Bytes())
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func TestDeterminism(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.Pages, c.MaxSitePages = 60, 1500, 150
	a, b := mustNew(t, c), mustNew(t, c)
	if digest(t, a) != digest(t, b) {
		t.Fatal("two webs from the same config differ")
	}
	sc := defaultScope(a, 1000)
	if !reflect.DeepEqual(a.Expected(sc), b.Expected(sc)) || !reflect.DeepEqual(a.Seeds(), b.Seeds()) {
		t.Fatal("expectations or seeds differ")
	}
	c.Seed = 2
	if digest(t, mustNew(t, c)) == digest(t, a) {
		t.Fatal("seed 2 gives the same web as seed 1")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error, "" = valid
	}{
		{"default", func(*Config) {}, ""},
		{"hosts", func(c *Config) { c.Hosts = 0 }, "hosts=0"},
		{"pages too few", func(c *Config) { c.Pages = 10 }, "pages=10"},
		{"pages too many", func(c *Config) { c.Hosts, c.Pages, c.MaxSitePages = 2, 1000, 10 }, "pages=1000"},
		{"zipf", func(c *Config) { c.ZipfS = -1 }, "zipf_s"},
		{"domain upper", func(c *Config) { c.Domain = "Synth.test" }, "domain"},
		{"domain invalid tld", func(c *Config) { c.Domain = "synth.invalid" }, "domain"},
		{"domain one label", func(c *Config) { c.Domain = "localhost" }, "domain"},
		{"seeds", func(c *Config) { c.Seeds = 0 }, "seeds=0"},
		{"fraction", func(c *Config) { c.GzipHosts = 1.5 }, "gzip_hosts"},
		{"robots sum", func(c *Config) { c.RobotsMissing, c.RobotsDisallow = 0.6, 0.6 }, "robots_missing+robots_disallow"},
		{"slow order", func(c *Config) { c.SlowMin, c.SlowMax = time.Second, time.Millisecond }, "slow_max"},
		{"body order", func(c *Config) { c.MinBody, c.MaxBody = 4096, 1024 }, "max_body"},
		{"traps", func(c *Config) { c.TrapHosts = 100 }, "trap_hosts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one naming %q", err, tt.want)
			}
			if _, err := New(c); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

func TestSiteSizes(t *testing.T) {
	for _, tt := range []struct {
		hosts, pages, max int
		s                 float64
	}{{600, 24000, 400, 1}, {30, 1000, 100, 1}, {10, 10, 5, 1}, {10, 50, 5, 2}, {7, 700, 1000, 0}, {500, 20000, 400, 1.3}} {
		sz := siteSizes(tt.hosts, tt.pages, tt.max, tt.s)
		sum := 0
		for i, v := range sz {
			sum += v
			if v < 1 || v > tt.max || i > 0 && v > sz[i-1] {
				t.Fatalf("%+v: bad size %d at %d", tt, v, i)
			}
		}
		if sum != tt.pages {
			t.Fatalf("%+v: sum %d", tt, sum)
		}
	}
}

func TestRelRef(t *testing.T) {
	for _, tt := range []struct{ base, target, want string }{
		{"/", "/", "./"},
		{"/docs/", "/", "../"},
		{"/docs/", "/docs/page-1.html", "page-1.html"},
		{"/docs/more/", "/docs/page-1.html", "../page-1.html"},
		{"/docs/", "/blog/more/page-3.html", "../blog/more/page-3.html"},
		{"/", "/a-z/index.php?id=5&lang=en", "a-z/index.php?id=5&lang=en"},
		{"/~staff/more/", "/~staff/more/page-3.html", "page-3.html"},
	} {
		if got := relRef(tt.base, tt.target); got != tt.want {
			t.Errorf("relRef(%q, %q) = %q, want %q", tt.base, tt.target, got, tt.want)
		}
	}
}

func TestRobotsModel(t *testing.T) {
	f := robotsFile{status: 200, groups: []robotsGroup{
		{agents: []string{"otherbot"}, rules: []robotsRule{{path: "/"}}},
		{agents: []string{"phasecrawl"}, delay: 50 * time.Millisecond, rules: []robotsRule{{path: "/private/"}, {path: "/private/open/", allow: true}}},
		{agents: []string{"*"}, rules: []robotsRule{{path: "/"}}},
	}}
	for _, tt := range []struct {
		ua, uri string
		want    bool
	}{
		{"phasecrawl/1.0", "/docs/page-1.html", true},
		{"PhaseCrawl/2", "/private/1.html", false},
		{"phasecrawl", "/private/open/1.html", true},
		{"otherbot/1", "/docs/", false},
		{"somebot", "/", false},
		{"", "/x", false},
	} {
		if got := f.allowed(tt.ua, tt.uri); got != tt.want {
			t.Errorf("allowed(%q, %q) = %v", tt.ua, tt.uri, got)
		}
	}
	if d := f.delay("phasecrawl/1.0"); d != 50*time.Millisecond {
		t.Errorf("delay %v", d)
	}
	want := "User-agent: otherbot\nDisallow: /\n\nUser-agent: phasecrawl\nCrawl-delay: 0.05\nDisallow: /private/\nAllow: /private/open/\n\nUser-agent: *\nDisallow: /\n"
	if got := f.text(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if nf := (robotsFile{status: 404}); !nf.allowed("x", "/private/") {
		t.Error("404 robots must allow all")
	}
}

func TestParseCal(t *testing.T) {
	for _, tt := range []struct {
		uri string
		ok  bool
	}{
		{"/cal/2026/11", true}, {"/cal/1/01", true}, {"/cal/2026/11?sessionid=0123456789ab", true},
		{"/cal/2026/13", false}, {"/cal/2026/1", false}, {"/cal/02026/11", false}, {"/cal/0/11", false},
		{"/cal/2026/11?sessionid=XYZ", false}, {"/cal/2026/11?x=1", false}, {"/cal/2026", false}, {"/calx/2026/11", false},
	} {
		if _, _, _, ok := parseCal(tt.uri); ok != tt.ok {
			t.Errorf("parseCal(%q) ok=%v", tt.uri, ok)
		}
		if y, m, s, ok := parseCal(tt.uri); ok && calPath(y, m, s) != tt.uri {
			t.Errorf("calPath round trip %q -> %q", tt.uri, calPath(y, m, s))
		}
	}
}

func smallConfig() Config {
	c := DefaultConfig()
	c.Hosts, c.Pages, c.MaxSitePages = 30, 1000, 120
	c.UnlinkedHosts = 0.05
	c.CrawlDelayHosts, c.SlowHosts = 0.05, 0.05
	c.SlowMin, c.SlowMax = 2*time.Millisecond, 5*time.Millisecond
	c.TrapHosts = 2
	return c
}

func get(t *testing.T, w *Web, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, req)
	return rec.Result()
}

func TestServeHTTP(t *testing.T) {
	w := mustNew(t, smallConfig())
	var robots404, robots200, gz, plain, redirect, missing *site
	for _, s := range w.sites {
		switch {
		case s.robots.status == 404 && robots404 == nil:
			robots404 = s
		case s.robots.status == 200 && robots200 == nil:
			robots200 = s
		}
		if s.gzip && gz == nil && !s.trap {
			gz = s
		}
		if !s.gzip && plain == nil && !s.trap {
			plain = s
		}
		if _, ok := s.paths["/r/1"]; ok && redirect == nil {
			redirect = s
		}
		if _, ok := s.paths["/missing/1.html"]; ok && missing == nil {
			missing = s
		}
	}
	if res := get(t, w, "http://"+robots404.name+"/robots.txt", nil); res.StatusCode != 404 {
		t.Errorf("robots 404 host: %d", res.StatusCode)
	}
	res := get(t, w, "http://"+strings.ToUpper(robots200.name)+":8080/robots.txt", nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(body), "User-agent:") {
		t.Errorf("robots: %d %q", res.StatusCode, body)
	}
	res = get(t, w, "http://"+gz.name+"/", map[string]string{"Accept-Encoding": "gzip"})
	if res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip host answered without gzip: %v", res.Header)
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(zr)
	if !strings.Contains(string(html), "<!DOCTYPE html>") {
		t.Errorf("gunzipped body: %.100q", html)
	}
	if res := get(t, w, "http://"+gz.name+"/", map[string]string{"Accept-Encoding": "gzip;q=0"}); res.Header.Get("Content-Encoding") != "" {
		t.Error("gzip despite q=0")
	}
	if res := get(t, w, "http://"+plain.name+"/", map[string]string{"Accept-Encoding": "gzip"}); res.Header.Get("Content-Encoding") != "" {
		t.Error("plain host gzipped")
	}
	res = get(t, w, "http://"+redirect.name+"/r/1", nil)
	if res.StatusCode/100 != 3 || res.Header.Get("Location") == "" {
		t.Errorf("redirect: %d %v", res.StatusCode, res.Header)
	}
	if res := get(t, w, "http://"+missing.name+"/missing/1.html", nil); res.StatusCode != 404 {
		t.Errorf("missing: %d", res.StatusCode)
	}
	if res := get(t, w, "http://trap1.synth.test/cal/2026/11?sessionid=0123456789ab", nil); res.StatusCode != 200 {
		t.Errorf("trap: %d", res.StatusCode)
	}
	// Non-canonical request targets are not pages: crawlers must normalize.
	get(t, w, "http://"+plain.name+"/%7Estaff/page-1.html", nil)
	get(t, w, "http://nosuchhost.synth.test/", nil)
	rep := w.Report()
	if len(rep.Unknown) != 2 || rep.Hosts[robots200.name].RobotsFetches != 1 || rep.TrapFetches["trap1.synth.test"] != 1 {
		t.Errorf("report: unknown=%v hosts=%v trap=%v", rep.Unknown, rep.Hosts, rep.TrapFetches)
	}
	w.Reset()
	if rep := w.Report(); rep.Requests != 0 || len(rep.Hosts) != 0 || len(rep.URLs) != 0 {
		t.Errorf("after Reset: %+v", rep)
	}
}

// TestCheckFindsViolations: Check reports what a broken crawler does.
func TestCheckFindsViolations(t *testing.T) {
	c := smallConfig()
	c.SlowHosts = 0
	w := mustNew(t, c)
	exp := w.Expected(defaultScope(w, 200))
	if v := w.Check(exp, 0); len(v) == 0 {
		t.Fatal("no violations for an empty crawl")
	} else if !strings.Contains(strings.Join(v, "\n"), "missing page") {
		t.Fatalf("no missing page in %v", v)
	}
	w.Reset()
	var dis string
	for u := range exp.Disallowed {
		dis = u
		break
	}
	seed := w.Seeds()[0]
	bait := ""
	for p := range w.sites[0].paths {
		if strings.HasPrefix(p, "/bait/") {
			bait = "http://" + w.sites[0].name + p
		}
	}
	for _, u := range []string{seed, seed, dis, bait} {
		get(t, w, u, map[string]string{"User-Agent": testUA})
	}
	v := strings.Join(w.Check(exp, time.Hour), "\n")
	for _, want := range []string{"duplicate: " + seed, "robots-disallowed URL fetched: " + dis, "apart, want >= 1h0m0s", "robots.txt fetched 0 times", "missing page", "unexpected page fetched (must not be reachable): " + bait} {
		if !strings.Contains(v, want) {
			t.Errorf("violations lack %q:\n%s", want, v)
		}
	}
	if rep := w.Report(); len(rep.DisallowedFetches) != 1 || rep.Duplicates != 1 {
		t.Errorf("report disallowed=%v duplicates=%d", rep.DisallowedFetches, rep.Duplicates)
	}
}

// TestEveryPageLinksMatchModel parses every HTML page of a small web with
// the reference extractor and compares its followable links with the model,
// page by page (reachable or not).
func TestEveryPageLinksMatchModel(t *testing.T) {
	w := mustNew(t, smallConfig())
	kinds := map[kind]int{}
	for id := range w.pages {
		p := &w.pages[id]
		kinds[p.kind]++
		if !p.kind.followsLinks() && p.kind != kMetaNofollow {
			continue
		}
		s := w.sites[p.site]
		var b bytes.Buffer
		w.render(&b, s, int32(id))
		pu, _ := url.Parse(w.url(int32(id)))
		got := map[string]bool{}
		for _, u := range naiveLinks(pu, b.Bytes()) {
			got[u.String()] = true
		}
		want := map[string]bool{}
		if p.kind != kMetaNofollow {
			for _, l := range p.links {
				if l.to >= 0 && l.how.followed() {
					want[w.url(l.to)] = true
				}
			}
		}
		for u := range got {
			if u == pu.String() || strings.Contains(u, ".invalid") || strings.HasPrefix(u, "ftp:") {
				continue // self links and out-of-scope links are decorations
			}
			if !want[u] {
				t.Errorf("%s: extra link %s", pu, u)
			}
		}
		for u := range want {
			if !got[u] {
				t.Errorf("%s (kind %d): missing link %s\n%s", pu, p.kind, u, b.String())
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	if kinds[kFrameset] == 0 || kinds[kMetaNofollow] == 0 || kinds[kNofollowOnly] == 0 || kinds[kRedirect] == 0 || kinds[kGone] == 0 {
		t.Errorf("small web lacks a feature: %v", kinds)
	}
}

// TestConcurrentRecording: many goroutines on a few hosts; Report stays
// consistent (run with -race).
func TestConcurrentRecording(t *testing.T) {
	c := smallConfig()
	c.SlowHosts = 0
	w := mustNew(t, c)
	seeds := w.Seeds()
	done := make(chan bool)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				rec := httptest.NewRecorder()
				w.ServeHTTP(rec, httptest.NewRequest("GET", seeds[i%len(seeds)], nil))
				if i%10 == 0 {
					w.Report()
				}
			}
			done <- true
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
	rep := w.Report()
	n := 0
	for _, c := range rep.URLs {
		n += c
	}
	if rep.Requests != 400 || n != 400 || rep.Duplicates != 400-len(seeds) {
		t.Fatalf("requests=%d url fetches=%d duplicates=%d", rep.Requests, n, rep.Duplicates)
	}
	visits := 0
	for h, vs := range w.Visits() {
		for _, v := range vs {
			if v.End.Before(v.Start) || v.URI == "" {
				t.Fatalf("%s: bad visit %+v", h, v)
			}
		}
		visits += len(vs)
	}
	if visits != 400 {
		t.Fatalf("%d visits recorded, want 400", visits)
	}
	// In-flight accounting itself, without timing.
	var st hostStats
	st.reset()
	now := time.Now()
	st.arrive(now, "/", false, true, false)
	st.arrive(now.Add(time.Millisecond), "/a", false, true, false)
	st.leave(Visit{URI: "/a", Start: now.Add(time.Millisecond), End: now.Add(2 * time.Millisecond)})
	st.arrive(now.Add(3*time.Millisecond), "/robots.txt", true, true, false)
	st.leave(Visit{URI: "/robots.txt", Start: now.Add(3 * time.Millisecond), End: now.Add(4 * time.Millisecond)})
	st.leave(Visit{URI: "/", Start: now, End: now.Add(5 * time.Millisecond)})
	if st.maxInflight != 2 || st.inflight != 0 || st.minGap != time.Millisecond || st.minPageGap != time.Millisecond || st.robots != 1 {
		t.Fatalf("stats %+v", &st)
	}
	if len(st.visits) != 3 || st.visits[0].URI != "/a" || st.visits[2].URI != "/" || st.visits[2].End.Sub(st.visits[2].Start) != 5*time.Millisecond {
		t.Fatalf("visits %+v", st.visits)
	}
}

// TestMinCrawlTime: the politeness bound is the longest chain of one host's
// requests: (n+1)·sleep on a slow host (robots.txt is slept on too),
// n·Crawl-delay on a Crawl-delay host.
func TestMinCrawlTime(t *testing.T) {
	for _, tc := range []struct {
		name        string
		slow, delay bool
	}{
		{"slow", true, false},
		{"crawl-delay", false, true},
		{"neither", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Hosts, c.Pages, c.Seeds, c.TrapHosts, c.UnlinkedHosts = 1, 30, 1, 0, 0
			c.RobotsMissing, c.RobotsDisallow = 0, 0
			c.SlowHosts, c.CrawlDelayHosts = 0, 0
			c.SlowMin, c.SlowMax = 10*time.Millisecond, 10*time.Millisecond
			if tc.slow {
				c.SlowHosts = 1
			}
			if tc.delay {
				c.CrawlDelayHosts = 1
			}
			w := mustNew(t, c)
			exp := w.Expected(Scope{UserAgent: "t", Domains: []string{c.Domain}})
			n := time.Duration(len(exp.Pages))
			var want time.Duration
			switch {
			case tc.slow:
				want = (n + 1) * 10 * time.Millisecond
			case tc.delay:
				d := exp.CrawlDelay[w.sites[0].name]
				if d <= 0 {
					t.Fatalf("the only host has no Crawl-delay: %v", exp.CrawlDelay)
				}
				want = n * d
			}
			if n < 2 || exp.MinCrawlTime != want {
				t.Fatalf("%d pages: MinCrawlTime %s, want %s", n, exp.MinCrawlTime, want)
			}
		})
	}
}

// TestLinkedHosts: a page's other hosts are those of its followed links
// (or its redirect's target), each once, never its own; unknown pages have
// none.
func TestLinkedHosts(t *testing.T) {
	w := mustNew(t, DefaultConfig())
	checked := 0
	for id := range w.pages {
		p := &w.pages[id]
		s := w.sites[p.site]
		want := map[string]bool{}
		switch {
		case p.kind == kRedirect:
			if p.to >= 0 && w.pages[p.to].site != p.site {
				want[w.sites[w.pages[p.to].site].name] = true
			}
		case p.kind.followsLinks():
			for _, l := range p.links {
				if l.how.followed() && l.to >= 0 && w.pages[l.to].site != p.site {
					want[w.sites[w.pages[l.to].site].name] = true
				}
			}
		}
		got := w.LinkedHosts(s.name, p.path)
		if len(got) != len(want) {
			t.Fatalf("%s%s: LinkedHosts %v, want %v", s.name, p.path, got, want)
		}
		for _, h := range got {
			if !want[h] || h == s.name {
				t.Fatalf("%s%s: LinkedHosts %v, want %v", s.name, p.path, got, want)
			}
		}
		if len(got) > 0 {
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d pages link to other hosts", checked)
	}
	if got := w.LinkedHosts(w.sites[0].name, "/no-such-page"); got != nil {
		t.Fatalf("unknown page: %v", got)
	}
	if got := w.LinkedHosts("nowhere.test", "/"); got != nil {
		t.Fatalf("unknown host: %v", got)
	}
}
