// Package trapweb is a web of crawler traps for tests: a synthetic web
// (demo/synthweb) with a few more hosts that hold, beside a handful of real
// pages, the four classic traps:
//
//   - a calendar: /calendar/YYYY-MM/ links the previous and next month and
//     each day /calendar/YYYY-MM/DD/, which links the previous and next
//     day, without end;
//   - session ids: every link of every page carries a session id or
//     tracking tags, new on every response (;jsessionid=, ?PHPSESSID=,
//     ?sid=, ?sessionid=, ?utm_source=&utm_medium=), the page unchanged;
//   - a path that grows: /deep/X/ links the relative a/ and b/
//     (/deep/a/b/a/...), without end;
//   - shop facets: /shop/?f1=..&f2=.. links one more filter of eight, the
//     new one last, so the same set comes in every order.
//
// The server keeps, per trap host, the requests by kind and by page (the
// URL without its session parameters and with its query sorted), so a test
// asserts that real pages were fetched once and traps were bounded.
package trapweb

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// Domain is the trap hosts' domain: trap hosts are t1.Domain, t2.Domain, ...
const Domain = "traps.test"

// RealPages is how many numbered real pages (/page/K.html) a trap host has.
const RealPages = 20

// Kinds of request the server counts.
const (
	KindReal     = "real"
	KindCalendar = "calendar"
	KindDeep     = "deep"
	KindFacets   = "facets"
	KindSession  = "session" // a request whose URL carried a session id or tracking tag
	KindOther    = "other"   // robots.txt, unknown paths
)

var facets = []string{"brand=acme", "color=red", "size=m", "price=low", "rating=4", "stock=yes", "ship=free", "sale=yes"}

// Web serves the synthetic web and the trap hosts on one listener, told
// apart by the Host header.
type Web struct {
	Real  *synthweb.Web
	hosts []string

	mu        sync.Mutex
	responses int
	kinds     map[string]map[string]int // host -> kind -> requests
	pages     map[string]int            // canonical URL -> requests
	first     time.Time
	last      time.Time
}

// New returns a trap web over real with n trap hosts.
func New(real *synthweb.Web, n int) *Web {
	w := &Web{Real: real, kinds: map[string]map[string]int{}, pages: map[string]int{}}
	for i := 1; i <= n; i++ {
		w.hosts = append(w.hosts, "t"+strconv.Itoa(i)+"."+Domain)
	}
	return w
}

// Hosts are the trap host names.
func (w *Web) Hosts() []string { return slices.Clone(w.hosts) }

// Seeds are the real web's seeds and the home page of each trap host.
func (w *Web) Seeds() []string {
	s := w.Real.Seeds()
	for _, h := range w.hosts {
		s = append(s, "http://"+h+"/")
	}
	return s
}

// RealURLs are the real pages of the trap hosts, each to be fetched once.
func (w *Web) RealURLs() []string {
	var out []string
	for _, h := range w.hosts {
		out = append(out, "http://"+h+"/", "http://"+h+"/about/")
		for k := 1; k <= RealPages; k++ {
			out = append(out, fmt.Sprintf("http://%s/page/%d.html", h, k))
		}
	}
	return out
}

// Requests returns, per trap host, the requests by kind.
func (w *Web) Requests() map[string]map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]map[string]int{}
	for h, k := range w.kinds {
		out[h] = maps.Clone(k)
	}
	return out
}

// Pages returns the requests per page of the trap hosts (canonical URL).
func (w *Web) Pages() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.pages)
}

// Span is the time from the first to the last request to a trap host.
func (w *Web) Span() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last.Sub(w.first)
}

func (w *Web) isTrap(host string) bool {
	return slices.Contains(w.hosts, host)
}

// ServeHTTP serves a trap host's page, or passes the request to the real web.
func (w *Web) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	host = strings.ToLower(host)
	if !w.isTrap(host) {
		w.Real.ServeHTTP(rw, r)
		return
	}
	path := r.URL.EscapedPath()
	session := false
	if i := strings.IndexByte(path, ';'); i >= 0 {
		session = true
		path = path[:i]
	}
	q := r.URL.Query()
	for k := range q {
		if k == "PHPSESSID" || k == "sid" || k == "sessionid" || strings.HasPrefix(k, "utm_") {
			session = true
			q.Del(k)
		}
	}
	kind := KindReal
	switch {
	case path == "/robots.txt":
		kind = KindOther
	case strings.HasPrefix(path, "/calendar/"):
		kind = KindCalendar
	case strings.HasPrefix(path, "/deep/"):
		kind = KindDeep
	case path == "/shop/":
		kind = KindFacets
	}
	w.mu.Lock()
	now := time.Now()
	if w.first.IsZero() {
		w.first = now
	}
	w.last = now
	if w.kinds[host] == nil {
		w.kinds[host] = map[string]int{}
	}
	w.kinds[host][kind]++
	if session {
		w.kinds[host][KindSession]++
	}
	key := "http://" + host + path
	if enc := q.Encode(); enc != "" { // Encode sorts by key
		key += "?" + enc
	}
	if kind != KindOther {
		w.pages[key]++
	}
	w.responses++
	sid := fmt.Sprintf("%08X%04d", uint32(now.UnixNano()), w.responses%10000)
	w.mu.Unlock()

	if kind == KindOther {
		if path == "/robots.txt" {
			rw.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(rw, "User-agent: *\nDisallow: /private/\n")
			return
		}
		http.NotFound(rw, r)
		return
	}
	links, ok := w.links(path, r.URL.RawQuery)
	if !ok {
		http.NotFound(rw, r)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html><head><title>" + path + "</title></head><body>\n<h1>" + path + "</h1>\n")
	for i, l := range links {
		fmt.Fprintf(&b, "<p><a href=\"%s\">link %d</a></p>\n", withSession(l, i, sid), i)
	}
	b.WriteString("</body></html>\n")
	fmt.Fprint(rw, b.String())
}

// withSession appends a session id or tracking tags to link, in one of
// five forms picked by i.
func withSession(link string, i int, sid string) string {
	sep := "?"
	if strings.Contains(link, "?") {
		sep = "&"
	}
	switch i % 5 {
	case 0:
		if strings.Contains(link, "?") {
			p, q, _ := strings.Cut(link, "?")
			return p + ";jsessionid=" + sid + "?" + q
		}
		return link + ";jsessionid=" + sid
	case 1:
		return link + sep + "PHPSESSID=" + sid
	case 2:
		return link + sep + "sid=" + sid
	case 3:
		return link + sep + "sessionid=" + sid
	default:
		return link + sep + "utm_source=s" + sid + "&amp;utm_medium=m" + sid
	}
}

// links returns the hrefs of the page at path (escaped) with query raw.
func (w *Web) links(path, raw string) ([]string, bool) {
	switch {
	case path == "/":
		l := []string{"/about/", "/calendar/2026-11/", "/deep/a/", "/shop/", "/"}
		for k := 1; k <= RealPages; k++ {
			l = append(l, fmt.Sprintf("/page/%d.html", k))
		}
		return l, true
	case path == "/about/":
		return []string{"/", "/page/1.html"}, true
	case strings.HasPrefix(path, "/page/"):
		var k int
		if _, err := fmt.Sscanf(path, "/page/%d.html", &k); err != nil || k < 1 || k > RealPages || path != fmt.Sprintf("/page/%d.html", k) {
			return nil, false
		}
		l := []string{"/", "/about/", "/calendar/2026-11/"}
		if k > 1 {
			l = append(l, fmt.Sprintf("/page/%d.html", k-1))
		}
		if k < RealPages {
			l = append(l, fmt.Sprintf("/page/%d.html", k+1))
		}
		return l, true
	case strings.HasPrefix(path, "/calendar/"):
		return calendar(path)
	case strings.HasPrefix(path, "/deep/") && strings.HasSuffix(path, "/"):
		return []string{"a/", "b/", "/"}, true
	case path == "/shop/":
		return shop(raw)
	}
	return nil, false
}

func calendar(path string) ([]string, bool) {
	var y, m, d int
	rest := strings.TrimPrefix(path, "/calendar/")
	if n, _ := fmt.Sscanf(rest, "%d-%d/%d/", &y, &m, &d); n < 2 || m < 1 || m > 12 || y < 1 || y > 9999 {
		return nil, false
	}
	month := time.Date(y, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
	mpath := func(t time.Time) string { return fmt.Sprintf("/calendar/%04d-%02d/", t.Year(), int(t.Month())) }
	dpath := func(t time.Time) string { return fmt.Sprintf("%s%02d/", mpath(t), t.Day()) }
	if d == 0 {
		if rest != fmt.Sprintf("%04d-%02d/", y, m) {
			return nil, false
		}
		l := []string{mpath(month.AddDate(0, -1, 0)), mpath(month.AddDate(0, 1, 0))}
		for t := month; t.Month() == month.Month(); t = t.AddDate(0, 0, 1) {
			l = append(l, dpath(t))
		}
		return l, true
	}
	day := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if day.Month() != month.Month() || rest != fmt.Sprintf("%04d-%02d/%02d/", y, m, d) {
		return nil, false
	}
	return []string{mpath(month), dpath(day.AddDate(0, 0, -1)), dpath(day.AddDate(0, 0, 1))}, true
}

func shop(raw string) ([]string, bool) {
	have := map[string]bool{}
	for _, p := range strings.Split(raw, "&") {
		if p == "" || strings.HasPrefix(p, "PHPSESSID=") || strings.HasPrefix(p, "sid=") || strings.HasPrefix(p, "sessionid=") || strings.HasPrefix(p, "utm_") {
			continue
		}
		if !slices.Contains(facets, p) {
			return nil, false
		}
		have[p] = true
	}
	var kept []string
	for _, p := range strings.Split(raw, "&") {
		if have[p] {
			kept = append(kept, p)
		}
	}
	base := "/shop/"
	if len(kept) > 0 {
		base += "?" + strings.Join(kept, "&")
	}
	l := []string{"/"}
	for _, f := range facets {
		if have[f] {
			continue
		}
		if len(kept) == 0 {
			l = append(l, "/shop/?"+f)
		} else {
			l = append(l, base+"&"+f)
		}
	}
	return l, true
}

// Alone returns the requests a node alone sends each trap host under the
// trap limits of the scope settings sc, by kind (real pages, robots.txt as KindOther, and each
// trap): the calendar's first month (the one the home page links) and
// c.MaxPatternDepth months on either side of it, with their days (a
// day's run is its month's: the day after the last one is a step, into
// the next month); the paths under /deep/ that the path rules admit; the
// shop and c.MaxQuerySets sets of its filters. ok is false when a trap is
// unbounded (scope.max_pattern_depth or scope.max_query_sets 0).
func (w *Web) Alone(sc config.Scope) (kinds map[string]int, ok bool) {
	c := urlscope.TrapConfig{MaxSegmentRepeats: sc.MaxSegmentRepeats, MaxPathDepth: sc.MaxPathDepth, MaxQueryParams: sc.MaxQueryParams,
		MaxPatternDepth: sc.MaxPatternDepth, MaxQuerySets: sc.MaxQuerySets}
	if c.MaxPatternDepth <= 0 || c.MaxQuerySets <= 0 {
		return nil, false
	}
	kinds = map[string]int{KindReal: 2 + RealPages, KindOther: 1, KindFacets: 1 + min(c.MaxQuerySets, 1<<len(facets)-1)}
	home, _ := w.links("/", "")
	first := ""
	for _, l := range home {
		if strings.HasPrefix(l, "/calendar/") {
			first = l
		}
	}
	months := map[string]bool{first: true}
	for _, dir := range []int{0, 1} { // a month's links: the previous month, the next, its days
		m := first
		for range c.MaxPatternDepth {
			l, _ := calendar(m)
			m = l[dir]
			months[m] = true
		}
	}
	for m := range months {
		l, _ := calendar(m)
		kinds[KindCalendar] += 1 + len(l) - 2
	}
	seen := map[string]bool{}
	queue := []string{}
	for _, l := range home {
		if strings.HasPrefix(l, "/deep/") {
			queue = append(queue, l)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] || c.CheckPath(p, "") != "" {
			continue
		}
		seen[p] = true
		l, _ := w.links(p, "")
		for _, rel := range l {
			if !strings.HasPrefix(rel, "/") {
				queue = append(queue, p+rel)
			}
		}
	}
	kinds[KindDeep] = len(seen)
	return kinds, true
}

// Check returns what a crawl with the default settings got wrong on the
// web: the real web's violations (its oracle with the scope of
// allowDomain, the per-host cap maxPagesPerHost and the pattern depth
// patternDepth, gaps under delay), real pages of the trap hosts not
// fetched exactly once, pages fetched more than once (under another
// session id or parameter order), requests carrying a session id, trap
// hosts with more than maxPerTrapHost requests or a trap never entered.
// summary gives the requests by kind.
func (w *Web) Check(maxPagesPerHost, patternDepth, maxPerTrapHost int, userAgent string, delay time.Duration) (violations []string, summary string) {
	exp := w.Real.Expected(synthweb.Scope{Domains: []string{w.Real.Config().Domain}, MaxPagesPerHost: maxPagesPerHost,
		UserAgent: userAgent, PatternDepth: patternDepth})
	for _, v := range w.Real.Check(exp, delay) {
		violations = append(violations, "real web: "+v)
	}
	pages := w.Pages()
	for _, u := range w.RealURLs() {
		if pages[u] != 1 {
			violations = append(violations, fmt.Sprintf("real page %s fetched %d times, want once", u, pages[u]))
		}
	}
	var dups []string
	for u, n := range pages {
		if n > 1 {
			dups = append(dups, u)
		}
	}
	sort.Strings(dups)
	if len(dups) > 0 {
		violations = append(violations, fmt.Sprintf("%d pages fetched more than once, e.g. %s", len(dups), dups[0]))
	}
	total := map[string]int{}
	var b strings.Builder
	reqs := w.Requests()
	for _, h := range w.hosts {
		k := reqs[h]
		n := 0
		for kind, c := range k {
			total[kind] += c
			if kind != KindSession {
				n += c
			}
		}
		if n > maxPerTrapHost {
			violations = append(violations, fmt.Sprintf("trap host %s: %d requests, want at most %d (%v)", h, n, maxPerTrapHost, k))
		}
		if k[KindSession] > 0 {
			violations = append(violations, fmt.Sprintf("trap host %s: %d requests carried a session id or tracking tags", h, k[KindSession]))
		}
		if k[KindCalendar] == 0 || k[KindDeep] == 0 || k[KindFacets] == 0 {
			violations = append(violations, fmt.Sprintf("trap host %s: a trap was never entered: %v", h, k))
		}
		fmt.Fprintf(&b, "trap host %s: %d requests %v\n", h, n, k)
	}
	fmt.Fprintf(&b, "all trap hosts: %v; real web: %d pages", total, exp.Fetches)
	return violations, b.String()
}
