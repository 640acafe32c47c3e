package synthweb

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Scope is the crawler configuration the expectation depends on.
type Scope struct {
	// Domains are the allowed domains (a host is in scope when it equals a
	// domain or ends with "."+domain). Empty: only the seeds' hosts, the
	// crawler's default.
	Domains []string
	// MaxPagesPerHost is the crawler's per-host admission cap; it must be
	// > 0 when the web has trap hosts (0 means unlimited: the trap never
	// ends). Choose it >= Expectation.MaxHostURLs.
	MaxPagesPerHost int
	// UserAgent is the crawler's User-Agent, used to pick robots.txt groups
	// ("phasecrawl/..." gets the "phasecrawl" groups).
	UserAgent string
	// PatternDepth is the crawler's scope.max_pattern_depth (0: off). The
	// trap calendar is a chain of months (/cal/YYYY/MM, one pattern), so a
	// node alone fetches its home, the first month and PatternDepth months
	// on either side of it.
	PatternDepth int
}

// trapPages is how many pages of a trap host a node alone fetches under
// sc: the per-host cap, or the calendar's months the pattern depth
// admits (-1: unbounded).
func (sc Scope) trapPages() int {
	n := sc.MaxPagesPerHost
	if n <= 0 {
		n = -1
	}
	if sc.PatternDepth > 0 {
		months := 2 + 2*sc.PatternDepth // the home, the first month, PatternDepth before and after
		if n < 0 || months < n {
			n = months
		}
	}
	return n
}

// Expectation is what a correct crawler does on the web, started from
// Seeds with the given Scope.
type Expectation struct {
	// Pages holds the canonical URL of every page that must be fetched
	// exactly once (404/410s, redirect sources and non-HTML files included;
	// trap pages excluded).
	Pages map[string]bool
	// Disallowed holds the discovered in-scope URLs robots.txt disallows:
	// they must never be fetched.
	Disallowed map[string]bool
	// TrapHosts maps each reachable trap host to the exact number of page
	// fetches on it (every admitted URL is fetched, so MaxPagesPerHost), or
	// -1 when MaxPagesPerHost is 0 (unbounded).
	TrapHosts map[string]int
	// Hosts is the number of hosts with at least one page fetched (trap
	// hosts included).
	Hosts int
	// Contacted holds the hosts whose robots.txt must be fetched exactly once.
	Contacted map[string]bool
	// CrawlDelay maps contacted hosts with a Crawl-delay for the user agent
	// to that delay.
	CrawlDelay map[string]time.Duration
	// Fetches is the number of page fetches (robots.txt excluded):
	// len(Pages) plus the trap fetches; the WARC holds as many responses.
	Fetches int
	// Status counts the expected fetches by HTTP status (trap pages are 200).
	Status map[int]int
	// MaxHostURLs is the largest number of URLs admitted on one non-trap
	// host (pages plus disallowed); MaxPagesPerHost must be at least this
	// for Pages to be exact.
	MaxHostURLs int
	// MinCrawlTime is a lower bound on the time any crawler needs to fetch
	// every page while obeying the politeness rules, with no delay of its
	// own: one request at a time per host, a slow host's sleep before each
	// response (robots.txt included), Crawl-delay between requests. It is
	// the longest such chain of one host, max((n+1)·sleep, n·Crawl-delay)
	// for its n pages; the time to discover the host is not counted. On a
	// web whose crawl is bound by it, pages/s cannot exceed
	// Fetches/MinCrawlTime whatever the crawler.
	MinCrawlTime time.Duration
	// Warnings says why the expectation is not exact (e.g. a non-trap host
	// over MaxPagesPerHost); Check reports them as violations.
	Warnings []string
}

// Expected computes, by a breadth-first search over the web's model, what a
// correct crawler fetches from Seeds: seeds at depth 0; robots.txt of each
// host honoured (404 = allow all; the group of the user agent, else "*";
// longest match); links of 2xx text/html pages followed (a/area href,
// frame/iframe src, <base href>) except rel=nofollow links and every link
// of a meta-robots-nofollow page; a 3xx Location is a discovered URL; 404,
// 410 and non-HTML pages have no links; out-of-scope URLs dropped; every
// URL fetched at most once; at most MaxPagesPerHost URLs admitted per host.
func (w *Web) Expected(sc Scope) Expectation {
	exp := Expectation{
		Pages:      make(map[string]bool),
		Disallowed: make(map[string]bool),
		TrapHosts:  make(map[string]int),
		Contacted:  make(map[string]bool),
		CrawlDelay: make(map[string]time.Duration),
		Status:     make(map[int]int),
	}
	domains := make([]string, 0, len(sc.Domains))
	for _, d := range sc.Domains {
		domains = append(domains, strings.TrimSuffix(strings.ToLower(d), "."))
	}
	seedHosts := make(map[int32]bool)
	for _, id := range w.seeds {
		seedHosts[w.pages[id].site] = true
	}
	inScope := func(s *site) bool {
		if len(domains) == 0 {
			return seedHosts[s.idx]
		}
		for _, d := range domains {
			if s.name == d || strings.HasSuffix(s.name, "."+d) {
				return true
			}
		}
		return false
	}
	seen := make([]bool, len(w.pages))
	admitted := make([]int, len(w.sites))
	fetchedOn := make([]bool, len(w.sites))
	pagesOn := make([]int, len(w.sites))
	var queue []int32
	discover := func(id int32) {
		if seen[id] {
			return
		}
		seen[id] = true
		p := &w.pages[id]
		s := w.sites[p.site]
		if !inScope(s) {
			return
		}
		exp.Contacted[s.name] = true
		if s.trap {
			n := sc.trapPages()
			exp.TrapHosts[s.name] = n
			fetchedOn[s.idx] = true
			pagesOn[s.idx] = max(n, 0)
			return
		}
		admitted[s.idx]++
		if !s.robots.allowed(sc.UserAgent, p.path) {
			exp.Disallowed[w.url(id)] = true
			return
		}
		exp.Pages[w.url(id)] = true
		exp.Status[int(p.status)]++
		fetchedOn[s.idx] = true
		pagesOn[s.idx]++
		queue = append(queue, id)
	}
	for _, id := range w.seeds {
		discover(id)
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		p := &w.pages[id]
		switch {
		case p.kind == kRedirect:
			if p.to >= 0 {
				discover(p.to)
			}
		case p.kind.followsLinks():
			for _, l := range p.links {
				if l.to >= 0 && l.how.followed() {
					discover(l.to)
				}
			}
		}
	}
	for _, s := range w.sites {
		if fetchedOn[s.idx] {
			exp.Hosts++
		}
		if exp.Contacted[s.name] {
			if d := s.robots.delay(sc.UserAgent); d > 0 {
				exp.CrawlDelay[s.name] = d
			}
		}
		n := time.Duration(pagesOn[s.idx])
		exp.MinCrawlTime = max(exp.MinCrawlTime, (n+1)*s.slow, n*exp.CrawlDelay[s.name])
		if s.trap {
			continue
		}
		if admitted[s.idx] > exp.MaxHostURLs {
			exp.MaxHostURLs = admitted[s.idx]
		}
		if sc.MaxPagesPerHost > 0 && admitted[s.idx] > sc.MaxPagesPerHost {
			exp.Warnings = append(exp.Warnings, fmt.Sprintf("oracle inexact: host %s has %d admissible URLs > MaxPagesPerHost=%d (raise it to >= %d)",
				s.name, admitted[s.idx], sc.MaxPagesPerHost, exp.MaxHostURLs))
		}
	}
	exp.Fetches = len(exp.Pages)
	for h, n := range exp.TrapHosts {
		if n < 0 {
			exp.Warnings = append(exp.Warnings, fmt.Sprintf("oracle inexact: trap host %s is unbounded with MaxPagesPerHost=0 and PatternDepth=0", h))
			continue
		}
		exp.Fetches += n
		exp.Status[200] += n
	}
	sort.Strings(exp.Warnings)
	return exp
}

// violations collects messages by category, keeping at most limit each.
type violations struct {
	limit int
	order []string
	msgs  map[string][]string
	count map[string]int
}

func (v *violations) add(cat, format string, args ...any) {
	if v.msgs == nil {
		v.msgs, v.count = make(map[string][]string), make(map[string]int)
	}
	if _, ok := v.count[cat]; !ok {
		v.order = append(v.order, cat)
	}
	v.count[cat]++
	v.msgs[cat] = append(v.msgs[cat], fmt.Sprintf(format, args...))
}

func (v *violations) list() []string {
	var out []string
	sort.Strings(v.order)
	for _, cat := range v.order {
		m := v.msgs[cat]
		sort.Strings(m)
		if len(m) > v.limit {
			out = append(out, m[:v.limit]...)
			out = append(out, fmt.Sprintf("... and %d more: %s", len(m)-v.limit, cat))
		} else {
			out = append(out, m...)
		}
	}
	return out
}

// Check compares what the web served (Report) with exp and returns
// human-readable violations, at most 20 per kind plus a count of the rest;
// nil means the crawl was exact and polite. minDelay is the crawler's
// configured per-host delay; the gap between consecutive requests to a
// host must be at least max(minDelay, Crawl-delay) - 1ms.
func (w *Web) Check(exp Expectation, minDelay time.Duration) []string {
	return w.Report().Check(exp, minDelay)
}

// Check is Web.Check on a snapshot.
func (rep Report) Check(exp Expectation, minDelay time.Duration) []string {
	v := &violations{limit: 20}
	for _, m := range exp.Warnings {
		v.add("oracle warnings", "%s", m)
	}
	for u := range exp.Pages {
		if rep.URLs[u] == 0 {
			v.add("missing pages", "missing page (never fetched): %s", u)
		}
	}
	for u, c := range rep.URLs {
		host := hostOfURL(u)
		_, trap := exp.TrapHosts[host]
		switch {
		case exp.Pages[u] || trap:
			if c > 1 {
				v.add("duplicate fetches", "duplicate: %s fetched %d times", u, c)
			}
		case exp.Disallowed[u]:
			v.add("robots-disallowed fetches", "robots-disallowed URL fetched: %s (%d times)", u, c)
		default:
			v.add("unexpected fetches", "unexpected page fetched (must not be reachable): %s", u)
		}
	}
	for h, n := range exp.TrapHosts {
		if n >= 0 && rep.TrapFetches[h] != n {
			v.add("trap counts", "trap host %s: %d page fetches, want exactly %d", h, rep.TrapFetches[h], n)
		}
	}
	for u, c := range rep.Unknown {
		v.add("unknown URLs", "request to an unknown host or path: %s (%d times)", u, c)
	}
	for h, hr := range rep.Hosts {
		if hr.MaxInFlight > 1 {
			v.add("concurrency", "host %s: %d requests in flight at once, want at most 1", h, hr.MaxInFlight)
		}
		need := minDelay
		if d := exp.CrawlDelay[h]; d > need {
			need = d
		}
		if need > time.Millisecond && hr.MinGap >= 0 && hr.MinGap < need-time.Millisecond {
			v.add("politeness gaps", "host %s: requests %s apart, want >= %s", h, hr.MinGap, need)
		}
		if !exp.Contacted[h] {
			v.add("unexpected hosts", "host %s contacted (%d requests) but not reachable", h, hr.Requests)
		}
	}
	for h := range exp.Contacted {
		if n := rep.Hosts[h].RobotsFetches; n != 1 {
			v.add("robots.txt fetches", "host %s: robots.txt fetched %d times, want exactly 1", h, n)
		}
	}
	return v.list()
}

func hostOfURL(u string) string {
	rest := strings.TrimPrefix(u, "http://")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}

// LinkedHosts returns the other hosts that the page at uri of host links to
// (followed links, or its redirect's target), each once; nil for an unknown
// page, robots.txt and trap calendar pages. It records nothing: a measuring
// aid (test/bench's tail report: which page found the host a crawl ended
// with).
func (w *Web) LinkedHosts(host, uri string) []string {
	s := w.byName[host]
	if s == nil {
		return nil
	}
	id, ok := s.paths[uri]
	if !ok {
		return nil
	}
	p := &w.pages[id]
	var out []string
	add := func(to int32) {
		if to < 0 || w.pages[to].site == s.idx {
			return
		}
		name := w.sites[w.pages[to].site].name
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	switch {
	case p.kind == kRedirect:
		add(p.to)
	case p.kind.followsLinks():
		for _, l := range p.links {
			if l.how.followed() {
				add(l.to)
			}
		}
	}
	return out
}
