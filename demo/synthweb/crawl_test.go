package synthweb

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// naiveCrawler is an independent, sequential reference crawler written from
// the crawler's specification (net/http + x/net/html, no phasecrawl code and
// none of the web's model): if it passes Check, the server and the oracle
// agree.
type naiveCrawler struct {
	t        *testing.T
	client   *http.Client
	ua       string
	domains  []string
	seeds    map[string]bool // seed hosts: the scope when domains is empty
	cap      int
	minDelay time.Duration // configured per-host delay
	robots   map[string]*naiveRobots
	last     map[string]time.Time
	seen     map[string]bool
	admitted map[string]int
	queue    []string
	fetches  int
}

func newNaiveCrawler(t *testing.T, addr, ua string, domains []string, maxPerHost int) *naiveCrawler {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr) // every host lives on the one listener
		},
		MaxConnsPerHost: 1,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &naiveCrawler{
		t: t, ua: ua, domains: domains, cap: maxPerHost,
		client: &http.Client{Transport: tr, Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		seeds: make(map[string]bool), robots: make(map[string]*naiveRobots), last: make(map[string]time.Time),
		seen: make(map[string]bool), admitted: make(map[string]int),
	}
}

// naiveNormalize resolves ref against base and normalizes it: lower-case
// scheme and host, default port dropped, dot segments removed, fragment
// dropped, percent-encoding re-done from the decoded path (which decodes
// escaped unreserved characters).
func naiveNormalize(base *url.URL, ref string) (*url.URL, bool) {
	u, err := base.Parse(strings.TrimSpace(ref))
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, false
	}
	host := strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && p != "80" {
		host += ":" + p
	}
	u.Host, u.User = host, nil
	u.Fragment, u.RawFragment, u.RawPath = "", "", ""
	if u.Path == "" {
		u.Path = "/"
	}
	return u, true
}

func (c *naiveCrawler) inScope(host string) bool {
	if len(c.domains) == 0 {
		return c.seeds[host]
	}
	for _, d := range c.domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

func (c *naiveCrawler) add(u *url.URL) {
	s := u.String()
	if !c.inScope(u.Host) || c.seen[s] {
		return
	}
	c.seen[s] = true
	if c.cap > 0 && c.admitted[u.Host] >= c.cap {
		return
	}
	c.admitted[u.Host]++
	c.queue = append(c.queue, s)
}

// get fetches one URL politely: at most one request at a time (sequential)
// and at least delay between the end of a response and the next request.
func (c *naiveCrawler) get(u *url.URL, delay time.Duration) (*http.Response, []byte) {
	delay = max(delay, c.minDelay)
	if last, ok := c.last[u.Host]; ok {
		if d := time.Until(last.Add(delay)); d > 0 {
			time.Sleep(d) // the politeness delay itself
		}
	}
	req, err := http.NewRequest("GET", u.String(), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("User-Agent", c.ua)
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("GET %s: %v", u, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatalf("GET %s: body: %v", u, err)
	}
	c.last[u.Host] = time.Now()
	return resp, body
}

func (c *naiveCrawler) robotsFor(u *url.URL) *naiveRobots {
	if r, ok := c.robots[u.Host]; ok {
		return r
	}
	resp, body := c.get(&url.URL{Scheme: "http", Host: u.Host, Path: "/robots.txt"}, 0)
	r := &naiveRobots{}
	switch {
	case resp.StatusCode/100 == 2:
		r = parseNaiveRobots(string(body), c.ua)
	case resp.StatusCode >= 500:
		r.disallowAll = true
	}
	c.robots[u.Host] = r
	return r
}

func (c *naiveCrawler) crawl(seeds []string) {
	for _, s := range seeds {
		u, _ := url.Parse(s)
		c.seeds[u.Host] = true
	}
	for _, s := range seeds {
		u, _ := url.Parse(s)
		c.add(u)
	}
	for len(c.queue) > 0 {
		s := c.queue[0]
		c.queue = c.queue[1:]
		u, _ := url.Parse(s)
		rb := c.robotsFor(u)
		if !rb.allowed(u.RequestURI()) {
			continue
		}
		resp, body := c.get(u, rb.delay)
		c.fetches++
		switch {
		case resp.StatusCode/100 == 3:
			if n, ok := naiveNormalize(u, resp.Header.Get("Location")); ok {
				c.add(n)
			}
		case resp.StatusCode/100 == 2 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html"):
			for _, n := range naiveLinks(u, body) {
				c.add(n)
			}
		}
	}
}

func attrOf(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func hasToken(list, tok string) bool {
	for _, f := range strings.FieldsFunc(strings.ToLower(list), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if f == tok {
			return true
		}
	}
	return false
}

// naiveLinks extracts the followable links of an HTML page.
func naiveLinks(page *url.URL, body []byte) []*url.URL {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	var elems []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			elems = append(elems, n)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(doc)
	base := page
	baseSet := false
	for _, n := range elems {
		switch n.Data {
		case "base":
			if href, ok := attrOf(n, "href"); ok && !baseSet {
				if b, err := page.Parse(strings.TrimSpace(href)); err == nil {
					base, baseSet = b, true
				}
			}
		case "meta":
			name, _ := attrOf(n, "name")
			content, _ := attrOf(n, "content")
			if strings.EqualFold(name, "robots") && hasToken(content, "nofollow") {
				return nil
			}
		}
	}
	var out []*url.URL
	for _, n := range elems {
		key := ""
		switch n.Data {
		case "a", "area":
			key = "href"
		case "frame", "iframe":
			key = "src"
		default:
			continue
		}
		ref, ok := attrOf(n, key)
		if !ok {
			continue
		}
		if rel, _ := attrOf(n, "rel"); hasToken(rel, "nofollow") {
			continue
		}
		if u, ok := naiveNormalize(base, ref); ok {
			out = append(out, u)
		}
	}
	return out
}

// naiveRobots is a small robots.txt reader: plain prefix rules, longest
// match, group by user-agent prefix else "*".
type naiveRobots struct {
	disallowAll bool
	rules       []robotsRule
	delay       time.Duration
}

func parseNaiveRobots(text, ua string) *naiveRobots {
	type group struct {
		agents []string
		rules  []robotsRule
		delay  time.Duration
	}
	var groups []*group
	var cur *group
	inAgents := false
	for _, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		switch k {
		case "user-agent":
			if !inAgents {
				cur = &group{}
				groups = append(groups, cur)
			}
			cur.agents = append(cur.agents, strings.ToLower(v))
			inAgents = true
			continue
		case "allow", "disallow":
			if cur != nil && v != "" {
				cur.rules = append(cur.rules, robotsRule{path: v, allow: k == "allow"})
			}
		case "crawl-delay":
			if f, err := strconv.ParseFloat(v, 64); err == nil && cur != nil {
				cur.delay = time.Duration(f * float64(time.Second))
			}
		}
		inAgents = false
	}
	ua = strings.ToLower(ua)
	var best *group
	bestLen := 0
	for _, g := range groups {
		for _, a := range g.agents {
			if a == "*" && bestLen == 0 {
				best, bestLen = g, 1
			} else if a != "*" && strings.HasPrefix(ua, a) && len(a) > bestLen {
				best, bestLen = g, len(a)
			}
		}
	}
	if best == nil {
		return &naiveRobots{}
	}
	return &naiveRobots{rules: best.rules, delay: best.delay}
}

func (r *naiveRobots) allowed(uri string) bool {
	if r.disallowAll {
		return false
	}
	allow, best := true, -1
	for _, rule := range r.rules {
		if strings.HasPrefix(uri, rule.path) && len(rule.path) > best {
			allow, best = rule.allow, len(rule.path)
		}
	}
	return allow
}

// TestNaiveCrawlerPassesCheck crawls small webs over real HTTP with the
// reference crawler and requires zero violations: the oracle (Expected)
// and what the server serves agree exactly.
func TestNaiveCrawlerPassesCheck(t *testing.T) {
	cfg := smallConfig()
	cfg.CrawlDelayMaxPages = 25
	quiet := smallConfig()
	quiet.Seed, quiet.CrawlDelayHosts, quiet.SlowHosts = 7, 0, 0
	tests := []struct {
		name    string
		cfg     Config
		ua      string
		domains []string
		cap     int
		delay   time.Duration
	}{
		{"phasecrawl all domains", cfg, testUA, []string{"synth.test"}, 200, 0},
		{"other agent", quiet, "OtherBot/2.0", []string{"SYNTH.test"}, 150, 0},
		{"seed hosts only", quiet, "somebot", nil, 0, 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web := mustNew(t, tt.cfg)
			srv := httptest.NewServer(web)
			defer srv.Close()
			exp := web.Expected(Scope{Domains: tt.domains, MaxPagesPerHost: tt.cap, UserAgent: tt.ua})
			c := newNaiveCrawler(t, srv.Listener.Addr().String(), tt.ua, lower(tt.domains), tt.cap)
			c.minDelay = tt.delay
			c.crawl(web.Seeds())
			if v := web.Check(exp, tt.delay); len(v) > 0 {
				t.Fatalf("%d violations:\n%s", len(v), strings.Join(v, "\n"))
			}
			if c.fetches != exp.Fetches {
				t.Fatalf("crawler fetched %d pages, expectation says %d", c.fetches, exp.Fetches)
			}
			rep := web.Report()
			t.Logf("pages=%d disallowed=%d hosts=%d trap=%v requests=%d", len(exp.Pages), len(exp.Disallowed), exp.Hosts, exp.TrapHosts, rep.Requests)
			if len(exp.Pages) < 50 || exp.Hosts < 1 {
				t.Fatalf("degenerate crawl: %d pages on %d hosts", len(exp.Pages), exp.Hosts)
			}
		})
	}
}

func lower(ss []string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, strings.ToLower(s))
	}
	return out
}
