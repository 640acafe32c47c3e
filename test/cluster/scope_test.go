package cluster_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
)

// TestProcDefaultScope: three nodes with the shipped scope (no
// allow_domains: the seeds' hosts), the seeds posted to one node's API:
// every node judges links by the same seed hosts, so every page reachable
// on them is fetched exactly once, and nothing else.
func TestProcDefaultScope(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	web, webAddr, _ := clusterWeb(t)
	exp := web.Expected(synthweb.Scope{MaxPagesPerHost: webnode.MaxPagesPerHost, UserAgent: config.Default().UserAgent, PatternDepth: config.Default().Scope.MaxPatternDepth})
	if exp.Fetches < 100 || exp.Hosts < 2 {
		t.Fatalf("the seeds' hosts have %d reachable pages on %d hosts: too few for the test", exp.Fetches, exp.Hosts)
	}
	c := newProcCluster(t, web, webAddr)
	c.defaultScope = true
	ps := startCluster(t, c, 3)
	if err := ps[1].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ps, 3*time.Minute)
	checkCrawl(t, webAddr, exp, c.delay, 1, 0, ps)
	for _, p := range ps {
		m, err := p.metrics()
		if err != nil {
			t.Fatal(err)
		}
		if n := metricSum(m, `phasecrawl_pages_fetched_total`); n == 0 {
			t.Errorf("%s fetched no page: its share of the seed hosts was dropped", p.name)
		}
	}
}

// site is one site of the fixture: directories with an index.html, pages
// linked by relative links, served by its own address.
type site struct {
	dir   string
	addr  string
	pages []string // every page's path ("/", "/guide/", "/guide/intro.html", ...)
}

// writeSites writes n sites of about perSite pages each under dir: a home
// page, sections (directories with an index.html), chapters linked from
// their section with relative links ("intro.html", "../", "../api/"),
// "next" and "prev" links between chapters, and links to the other sites.
func writeSites(t *testing.T, dir string, n, perSite int) []*site {
	t.Helper()
	var sites []*site
	for i := range n {
		s := &site{dir: filepath.Join(dir, fmt.Sprintf("site%d", i))}
		sites = append(sites, s)
	}
	sections := []string{"guide", "reference", "tutorial", "api"}
	for i, s := range sites {
		var secPages [][]string
		per := max(1, (perSite-1-len(sections))/len(sections))
		for si := range sections {
			var chapters []string
			for k := range per + si { // sections of different sizes
				chapters = append(chapters, fmt.Sprintf("ch%02d.html", k))
			}
			secPages = append(secPages, chapters)
		}
		write := func(path, title string, links []string) {
			if path != "/" { // each site its own pages: no two sites serve the same bytes (warc.dedup)
				title = fmt.Sprintf("%s (site %d)", title, i)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>%s</title><link rel=\"stylesheet\" href=\"/static/style.css\"></head><body>\n<h1>%s</h1>\n<ul>\n", title, title)
			for _, l := range links {
				fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", l, l)
			}
			b.WriteString("</ul></body></html>\n")
			full := filepath.Join(s.dir, filepath.FromSlash(path))
			if strings.HasSuffix(path, "/") {
				full = filepath.Join(full, "index.html")
			}
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			s.pages = append(s.pages, path)
		}
		var home []string
		for _, sec := range sections {
			home = append(home, sec+"/")
		}
		write("/", fmt.Sprintf("Site %d", i), home)
		for si, sec := range sections {
			chapters := secPages[si]
			links := append([]string{"../"}, chapters...)
			if si+1 < len(sections) {
				links = append(links, "../"+sections[si+1]+"/")
			}
			write("/"+sec+"/", sec, links)
			for k, ch := range chapters {
				links := []string{"./", "../", "/" + sec + "/" + ch + "#top"}
				if k > 0 {
					links = append(links, chapters[k-1])
				}
				if k+1 < len(chapters) {
					links = append(links, chapters[k+1])
				}
				links = append(links, "../"+sections[(si+1)%len(sections)]+"/")
				write("/"+sec+"/"+ch, sec+" "+ch, links)
			}
		}
	}
	return sites
}

// visit is one request a fixture site served.
type visit struct {
	path       string
	start, end time.Time
}

// siteServer serves one site and records every request.
type siteServer struct {
	mu     sync.Mutex
	visits []visit
}

// serveSites serves each site on its own loopback address and fills in
// their addresses; the other sites' home pages are linked from each home.
func serveSites(t *testing.T, sites []*site) []*siteServer {
	t.Helper()
	var servers []*siteServer
	for i, s := range sites {
		ip := fmt.Sprintf("127.0.0.%d", 40+i)
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatalf("listen on %s (loopback alias): %v", ip, err)
		}
		s.addr = ln.Addr().String()
		ss := &siteServer{}
		servers = append(servers, ss)
		fs := http.FileServer(http.Dir(s.dir))
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			fs.ServeHTTP(w, r)
			ss.mu.Lock()
			ss.visits = append(ss.visits, visit{r.URL.Path, start, time.Now()})
			ss.mu.Unlock()
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	// Cross-site links on each home page, now that the addresses are known.
	for i, s := range sites {
		other := sites[(i+1)%len(sites)]
		home := filepath.Join(s.dir, "index.html")
		b, err := os.ReadFile(home)
		if err != nil {
			t.Fatal(err)
		}
		link := fmt.Sprintf("<p><a href=\"http://%s/guide/\">the next site</a></p></body>", other.addr)
		if err := os.WriteFile(home, []byte(strings.Replace(string(b), "</body>", link, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return servers
}

// TestProcDefaultScopeSites: three nodes with the shipped scope crawl
// several documentation-like sites (directories with index.html, relative
// links, one site per address), the seeds posted to one node: every page
// of every site is fetched exactly once, and never two requests at once
// to a site.
func TestProcDefaultScopeSites(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	sites := writeSites(t, t.TempDir(), 4, 120)
	servers := serveSites(t, sites)
	web, webAddr, _ := clusterWeb(t) // the harness's web; not seeded here
	c := newProcCluster(t, web, webAddr)
	c.defaultScope = true
	ps := startCluster(t, c, 3)
	var seeds []string
	for _, s := range sites {
		seeds = append(seeds, "http://"+s.addr+"/")
	}
	if err := ps[0].postSeeds(seeds); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ps, 3*time.Minute)
	total := 0
	for i, s := range sites {
		ss := servers[i]
		ss.mu.Lock()
		vs := slices.Clone(ss.visits)
		ss.mu.Unlock()
		count := map[string]int{}
		for _, v := range vs {
			count[v.path]++
		}
		for _, p := range s.pages {
			if count[p] != 1 {
				t.Errorf("site %d (%s): %s fetched %d times, want 1", i, s.addr, p, count[p])
			}
			delete(count, p)
		}
		if count["/robots.txt"] != 1 {
			t.Errorf("site %d (%s): robots.txt fetched %d times by the cluster, want 1", i, s.addr, count["/robots.txt"])
		}
		delete(count, "/robots.txt")
		for p, n := range count {
			t.Errorf("site %d (%s): %s fetched %d times, want never (not a page of the site)", i, s.addr, p, n)
		}
		slices.SortFunc(vs, func(a, b visit) int { return a.start.Compare(b.start) })
		for k := 1; k < len(vs); k++ {
			if vs[k].start.Before(vs[k-1].end) {
				t.Errorf("site %d: %s started at %s while %s was in flight (until %s)", i, vs[k].path,
					vs[k].start.Format("15:04:05.000000"), vs[k-1].path, vs[k-1].end.Format("15:04:05.000000"))
			}
		}
		total += len(s.pages)
	}
	t.Logf("%d sites, %d pages, fetched by %s", len(sites), total, strconv.Itoa(len(ps))+" nodes")
}

// TestProcMaxPagesPerHostClusterWide: scope.max_pages_per_host counts
// across the cluster. Three nodes crawl the synthetic web with its spider
// trap (an endless calendar): the trap host gets about the cap, not three
// times it, and every regular page is still fetched exactly once.
func TestProcMaxPagesPerHostClusterWide(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	web, webAddr, exp := clusterWebWith(t, 1, 1)
	if len(exp.TrapHosts) != 1 {
		t.Fatalf("the web has %d reachable trap hosts, want 1", len(exp.TrapHosts))
	}
	c := newProcCluster(t, web, webAddr)
	c.extra = []string{"--max-pattern-depth", "0"} // the calendar is bounded by the per-host cap alone
	ps := startCluster(t, c, 3)
	if err := ps[0].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ps, 4*time.Minute)
	limit := webnode.MaxPagesPerHost
	trap := map[string]int{}
	for h, n := range exp.TrapHosts {
		trap[h], exp.TrapHosts[h] = n, -1 // counted below, not by the oracle
	}
	rep := checkCrawl(t, webAddr, exp, c.delay, 1, 0, ps)
	most := 3 * cluster.ShareCap(limit, 3)
	for h := range trap {
		n := rep.TrapFetches[h]
		if n < limit || n > most {
			t.Errorf("trap host %s: %d page fetches, want %d..%d (the cap %d counted across 3 nodes)", h, n, limit, most, limit)
		}
		t.Logf("trap host %s: %d page fetches (cap %d, at most %d)", h, n, limit, most)
	}
}

// TestProcRedirectLimitClusterWide: fetch.max_redirects counts a redirect
// chain across the members it crosses (each hop's target is owned by any
// member). Three nodes follow an endless chain /r/1 -> /r/2 -> ...: the
// site sees the chain's start and max_redirects hops, then no more.
func TestProcRedirectLimitClusterWide(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	var mu sync.Mutex
	hops := map[int]int{} // chain position -> requests
	ln, err := net.Listen("tcp", "127.0.0.50:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.50 (loopback alias): %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var i int
		if _, err := fmt.Sscanf(r.URL.Path, "/r/%d", &i); err != nil {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		hops[i]++
		mu.Unlock()
		http.Redirect(w, r, fmt.Sprintf("/r/%d", i+1), http.StatusFound)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	web, webAddr, _ := clusterWeb(t) // the harness's web; not seeded here
	c := newProcCluster(t, web, webAddr)
	c.defaultScope = true
	ps := startCluster(t, c, 3)
	if err := ps[0].postSeeds([]string{"http://" + ln.Addr().String() + "/r/0"}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ps, 2*time.Minute)
	limit := config.Default().Fetch.MaxRedirects
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i <= limit; i++ {
		if hops[i] != 1 {
			t.Errorf("/r/%d requested %d times, want 1 (the chain's start and %d hops are followed)", i, hops[i], limit)
		}
	}
	for i, n := range hops {
		if i > limit {
			t.Errorf("/r/%d requested %d times: the chain was followed past fetch.max_redirects=%d", i, n, limit)
		}
	}
}
