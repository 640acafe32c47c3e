package synthweb

import (
	"fmt"
	"math"
	"math/rand"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// kind is what a URL of the synthetic web serves.
type kind uint8

const (
	kContent      kind = iota // regular HTML page (home or deep), 200
	kFrameset                 // HTML frameset page, links in <frame src>, 200
	kPrivate                  // /private/N.html, 200 (robots may disallow it)
	kNofollowOnly             // /nf/..., 200, only linked with rel=nofollow or from a meta-nofollow page
	kMetaNofollow             // /meta/nofollow.html: <meta name="robots" content="nofollow">, 200
	kBait                     // /bait/...: 200 HTML only referenced where a crawler must not look
	kMissing                  // /missing/N.html: 404
	kGone                     // /gone/N.html: 410
	kRedirect                 // /r/N: 301/302/303/307/308
	kPDF                      // /files/report-N.pdf: application/pdf
	kPNG                      // /img/pic-N.png: image/png
	kStatic                   // /static/*: css, js, png referenced by <link>, <script src>, <img> only
	kTrapHome                 // "/" of a trap host (the calendar itself is not stored)
)

// followsLinks reports whether a crawler extracts and follows the links of a
// fetched page of kind k (a 2xx text/html page without meta robots nofollow).
func (k kind) followsLinks() bool {
	switch k {
	case kContent, kFrameset, kPrivate, kNofollowOnly, kBait:
		return true
	}
	return false
}

// linkHow is how a link is written into its page.
type linkHow uint8

const (
	howA        linkHow = iota // <a href>
	howArea                    // <area href> in a <map>
	howIframe                  // <iframe src>
	howFrame                   // <frame src> (frameset pages only)
	howNofollow                // <a href rel="... nofollow ...">: not followed
	howComment                 // <a href> inside an HTML comment: not a link
	howScript                  // URL inside a <script> string: not a link
	howTextarea                // <a href> inside <textarea> (text): not a link
	howNoframes                // <a href> inside <noframes> (raw text): not a link
)

// followed reports whether a crawler follows a link written this way.
func (h linkHow) followed() bool { return h <= howFrame }

// link is one reference from a page.
type link struct {
	to  int32  // target page id, -1 for ext
	ext string // out-of-scope or non-http URL when to == -1
	how linkHow
}

// page is one URL of the synthetic web (trap calendar pages excluded).
type page struct {
	site   int32
	kind   kind
	status int16
	to     int32  // redirect target page id, -1 when ext or not a redirect
	ext    string // redirect target outside the model (out of scope)
	path   string // canonical request URI (path and query)
	meta   string // meta robots content (kMetaNofollow)
	links  []link
}

// site is one virtual host.
type site struct {
	name     string
	idx      int32
	trap     bool
	unlinked bool
	content  []int32 // content page ids; content[0] is the home page "/"
	paths    map[string]int32
	robots   robotsFile
	gzip     bool
	slow     time.Duration
	secs     []string
	nRedir   int
	nBait    int
	st       hostStats
}

// Web is a generated synthetic web. It is an http.Handler safe for
// concurrent use; its structure is immutable after New, only the recorded
// statistics change.
type Web struct {
	cfg    Config
	sites  []*site // regular hosts, then trap hosts
	byName map[string]*site
	pages  []page
	seeds  []int32

	total    atomic.Int64
	unkMu    sync.Mutex
	unknownH map[string]int // requests to unknown hosts, by URL

	epoch time.Time // revision 0 of changing pages (ChangeEvery): New's time, whole seconds

	gzPool  sync.Pool
	bufPool sync.Pool
	cache   pageCache // filled by Prerender; one slot per page
}

// New generates the synthetic web described by c. The same Config always
// gives the same web. It fails only when c is invalid.
func New(c Config) (*Web, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := &Web{cfg: c, byName: make(map[string]*site), unknownH: make(map[string]int), epoch: time.Now().Truncate(time.Second)}
	g := &gen{w: w, r: rand.New(rand.NewSource(c.Seed))}
	g.run()
	w.cache = make(pageCache, len(w.pages))
	return w, nil
}

// Config returns the configuration the web was generated from.
func (w *Web) Config() Config { return w.cfg }

// Seeds returns the seed URLs (home pages of Config.Seeds regular hosts).
func (w *Web) Seeds() []string {
	out := make([]string, len(w.seeds))
	for i, id := range w.seeds {
		out[i] = w.url(id)
	}
	return out
}

// ResolvePattern returns the host glob covering every host of the web, e.g.
// "*.synth.test", for a --resolve 'PATTERN=HOST:PORT' rule.
func (w *Web) ResolvePattern() string { return "*." + w.cfg.Domain }

// HostNames returns every host name, regular hosts first, then trap hosts.
func (w *Web) HostNames() []string {
	out := make([]string, len(w.sites))
	for i, s := range w.sites {
		out[i] = s.name
	}
	return out
}

// url returns the canonical URL of a page.
func (w *Web) url(id int32) string {
	p := &w.pages[id]
	return "http://" + w.sites[p.site].name + p.path
}

// gen holds the generator state.
type gen struct {
	w *Web
	r *rand.Rand
}

var sectionPool = []string{"docs", "blog", "news", "~staff", "products", "wiki", "2026", "team_notes", "a-z", "archive", "help", "forum"}

var redirectCodes = []int16{301, 301, 302, 302, 303, 307, 308}

func (g *gen) run() {
	c, w, r := g.w.cfg, g.w, g.r
	sizes := siteSizes(c.Hosts, c.Pages, c.MaxSitePages, c.ZipfS)
	assign := r.Perm(c.Hosts)
	width := len(strconv.Itoa(c.Hosts))
	if width < 4 {
		width = 4
	}
	for i := 0; i < c.Hosts; i++ {
		s := &site{name: fmt.Sprintf("h%0*d.%s", width, i+1, c.Domain), idx: int32(i), paths: make(map[string]int32)}
		s.st.reset()
		w.sites = append(w.sites, s)
		w.byName[s.name] = s
	}
	size := func(i int) int { return sizes[assign[i]] }

	// Roles: seeds first in a random order of the hosts; a few unlinked hosts.
	order := r.Perm(c.Hosts)
	rest := order[c.Seeds:]
	nUnl := 0
	if c.UnlinkedHosts > 0 {
		nUnl = fracCount(c.UnlinkedHosts, c.Hosts)
	}
	for _, j := range r.Perm(len(rest))[:nUnl] {
		w.sites[rest[j]].unlinked = true
	}
	var linked []*site
	for _, i := range order {
		if !w.sites[i].unlinked {
			linked = append(linked, w.sites[i])
		}
	}

	// Robots, crawl-delay, slowness, gzip.
	delayed := g.pickSmall(c.CrawlDelayHosts, c.CrawlDelayMaxPages, size)
	slow := g.pickSmall(c.SlowHosts, c.SlowMaxPages, size)
	delays := []time.Duration{30 * time.Millisecond, 50 * time.Millisecond, 80 * time.Millisecond}
	for i, s := range w.sites {
		if delayed[i] {
			d := delays[r.Intn(len(delays))]
			if r.Intn(2) == 0 {
				s.robots = robotsFile{status: 200, comment: "polite please", groups: []robotsGroup{
					{agents: []string{"*"}, delay: d, rules: []robotsRule{{path: "/private/"}}}}}
			} else {
				s.robots = robotsFile{status: 200, comment: "phasecrawl gets its own delay", groups: []robotsGroup{
					{agents: []string{"phasecrawl"}, delay: d, rules: []robotsRule{{path: "/private/"}}},
					{agents: []string{"*"}, rules: []robotsRule{{path: "/private/"}}}}}
			}
		} else {
			u := r.Float64()
			switch {
			case u < c.RobotsMissing:
				s.robots = robotsFile{status: 404}
			case u < c.RobotsMissing+c.RobotsDisallow:
				switch r.Intn(4) {
				case 0:
					s.robots = robotsFile{status: 200, groups: []robotsGroup{
						{agents: []string{"*"}, rules: []robotsRule{{path: "/private/"}}}}}
				case 1:
					s.robots = robotsFile{status: 200, comment: "longest match wins", groups: []robotsGroup{
						{agents: []string{"*"}, rules: []robotsRule{{path: "/private/"}, {path: "/private/open/", allow: true}}}}}
				case 2:
					s.robots = robotsFile{status: 200, comment: "only phasecrawl welcome", groups: []robotsGroup{
						{agents: []string{"phasecrawl"}, rules: []robotsRule{{path: "/private/"}}},
						{agents: []string{"*"}, rules: []robotsRule{{path: "/"}}}}}
				default:
					s.robots = robotsFile{status: 200, comment: "otherbot is banned", groups: []robotsGroup{
						{agents: []string{"otherbot"}, rules: []robotsRule{{path: "/"}}},
						{agents: []string{"*"}, rules: []robotsRule{{path: "/private/"}}}}}
				}
			default:
				s.robots = robotsFile{status: 200, comment: "everything allowed", groups: []robotsGroup{
					{agents: []string{"*"}, rules: []robotsRule{{path: ""}}}}}
			}
		}
		if slow[i] {
			s.slow = c.SlowMin
			if c.SlowMax > c.SlowMin {
				s.slow += time.Duration(r.Int63n(int64(c.SlowMax - c.SlowMin + 1)))
			}
		}
		s.gzip = r.Float64() < c.GzipHosts
	}

	for i, s := range w.sites {
		g.buildSite(s, size(i))
	}
	for _, s := range w.sites {
		g.buildExtras(s, linked)
	}

	// Spanning cross-host links: every linked host gets a followable link
	// from a host that is reachable earlier in the order.
	for j := c.Seeds; j < len(linked); j++ {
		src := linked[r.Intn(j)]
		dst := linked[j]
		tgt := dst.content[0]
		if r.Intn(10) < 3 {
			tgt = dst.content[r.Intn(len(dst.content))]
		}
		from := g.pickSource(src)
		if r.Intn(10) == 0 {
			tgt = g.newRedirect(src, tgt, "")
		}
		g.addLink(from, link{to: tgt, how: g.followHow()})
	}
	// Extra cross-host links (from any host, to linked hosts).
	nCross := int(c.CrossLinks*float64(c.Hosts) + 0.5)
	if len(linked) > 1 {
		for k := 0; k < nCross; k++ {
			src := w.sites[r.Intn(c.Hosts)]
			dst := linked[r.Intn(len(linked))]
			if dst == src {
				continue
			}
			tgt := dst.content[0]
			if r.Intn(2) == 0 {
				tgt = dst.content[r.Intn(len(dst.content))]
			}
			g.addLink(g.pickSource(src), link{to: tgt, how: g.followHow()})
		}
	}
	// Unlinked hosts: referenced only in ways a crawler must not follow.
	for _, s := range w.sites {
		if !s.unlinked {
			continue
		}
		a := g.pickSource(linked[r.Intn(len(linked))])
		g.addLink(a, link{to: s.content[0], how: howNofollow})
		b := g.pickSource(linked[r.Intn(len(linked))])
		g.addLink(b, link{to: s.content[r.Intn(len(s.content))], how: howComment})
	}
	// Trap hosts, linked from a few reachable pages.
	for t := 0; t < c.TrapHosts; t++ {
		s := &site{name: fmt.Sprintf("trap%d.%s", t+1, c.Domain), idx: int32(len(w.sites)), trap: true,
			paths: make(map[string]int32), robots: robotsFile{status: 404}}
		s.st.reset()
		w.sites = append(w.sites, s)
		w.byName[s.name] = s
		s.content = []int32{g.newPage(s, "/", kTrapHome, 200)}
		for k := 0; k < 3; k++ {
			g.addLink(g.pickSource(linked[r.Intn(len(linked))]), link{to: s.content[0], how: howA})
		}
	}
	for _, i := range order[:c.Seeds] {
		w.seeds = append(w.seeds, w.sites[i].content[0])
	}
}

// pickSmall marks round(frac*Hosts) hosts of at most maxPages pages.
func (g *gen) pickSmall(frac float64, maxPages int, size func(int) int) []bool {
	n := len(g.w.sites)
	marked := make([]bool, n)
	want := 0
	if frac > 0 {
		want = fracCount(frac, n)
	}
	for _, i := range g.r.Perm(n) {
		if want == 0 {
			break
		}
		if size(i) <= maxPages {
			marked[i] = true
			want--
		}
	}
	return marked
}

func (g *gen) newPage(s *site, path string, k kind, status int16) int32 {
	id := int32(len(g.w.pages))
	g.w.pages = append(g.w.pages, page{site: s.idx, kind: k, status: status, to: -1, path: path})
	if _, dup := s.paths[path]; dup {
		panic("synthweb: duplicate path " + s.name + path) // generator bug, never input-driven
	}
	s.paths[path] = id
	return id
}

func (g *gen) addLink(from int32, l link) {
	p := &g.w.pages[from]
	if p.kind == kFrameset && l.how.followed() {
		l.how = howFrame
	}
	p.links = append(p.links, l)
}

// followHow picks a followable way of writing a link.
func (g *gen) followHow() linkHow {
	switch x := g.r.Intn(100); {
	case x < 85:
		return howA
	case x < 93:
		return howArea
	default:
		return howIframe
	}
}

// pickSource returns a random content page of s that is not a frameset.
func (g *gen) pickSource(s *site) int32 {
	for {
		id := s.content[g.r.Intn(len(s.content))]
		if g.w.pages[id].kind != kFrameset {
			return id
		}
	}
}

func (g *gen) newRedirect(s *site, to int32, ext string) int32 {
	s.nRedir++
	id := g.newPage(s, "/r/"+strconv.Itoa(s.nRedir), kRedirect, redirectCodes[g.r.Intn(len(redirectCodes))])
	p := &g.w.pages[id]
	p.to, p.ext = to, ext
	if to == -2 { // self loop
		p.to = id
	}
	g.addLink(id, link{to: g.newBait(s, "3xx"), how: howA}) // in the 3xx body: never parsed
	return id
}

func (g *gen) newBait(s *site, what string) int32 {
	s.nBait++
	id := g.newPage(s, "/bait/"+what+"-"+strconv.Itoa(s.nBait)+".html", kBait, 200)
	g.addLink(id, link{to: s.content[0], how: howA})
	return id
}

func contentPath(secs []string, k int) string {
	if k == 0 {
		return "/"
	}
	sec := secs[k%len(secs)]
	switch {
	case k%17 == 5:
		return "/" + sec + "/index.php?id=" + strconv.Itoa(k) + "&lang=en"
	case k%7 == 3:
		return "/" + sec + "/more/page-" + strconv.Itoa(k) + ".html"
	default:
		return "/" + sec + "/page-" + strconv.Itoa(k) + ".html"
	}
}

// buildSite creates the n content pages of s: a random recursive spanning
// tree from the home page, a home link on every page, random extra links.
func (g *gen) buildSite(s *site, n int) {
	r := g.r
	nsec := 1 + r.Intn(4)
	for _, j := range r.Perm(len(sectionPool))[:nsec] {
		s.secs = append(s.secs, sectionPool[j])
	}
	for k := 0; k < n; k++ {
		s.content = append(s.content, g.newPage(s, contentPath(s.secs, k), kContent, 200))
	}
	children := make([]int, n)
	for k := 1; k < n; k++ {
		parent := r.Intn(k)
		children[parent]++
		g.addLink(s.content[parent], link{to: s.content[k], how: g.followHow()})
		g.addLink(s.content[k], link{to: s.content[0], how: howA})
	}
	if n >= 5 && r.Float64() < 0.15 {
		for try := 0; try < 5; try++ {
			k := 1 + r.Intn(n-1)
			if children[k] <= 3 {
				p := &g.w.pages[s.content[k]]
				p.kind = kFrameset
				for i := range p.links {
					p.links[i].how = howFrame
				}
				g.addLink(s.content[k], link{to: g.newBait(s, "noframes"), how: howNoframes})
				break
			}
		}
	}
	for _, id := range s.content {
		if g.w.pages[id].kind == kFrameset {
			continue
		}
		for m := r.Intn(4); m > 0; m-- {
			g.addLink(id, link{to: s.content[r.Intn(n)], how: g.followHow()})
		}
	}
	// Static resources: referenced by <link>, <script src>, <img> on every page.
	g.newPage(s, "/static/site.css", kStatic, 200)
	g.newPage(s, "/static/app.js", kStatic, 200)
	g.newPage(s, "/static/logo.png", kStatic, 200)
}

var extLinks = []string{
	"http://elsewhere.invalid/ref/%d",
	"https://cdn.elsewhere.invalid/lib-%d.js",
	"http://%[2]s.invalid/",
	"mailto:webmaster@%[2]s",
	"javascript:void(%d)",
	"tel:+1555555%04d",
	"ftp://files.elsewhere.invalid/pub/%d/",
}

// buildExtras adds private pages, 404/410s, redirects, files, nofollow-only
// pages, a meta-nofollow page, hidden bait links and external links.
func (g *gen) buildExtras(s *site, linked []*site) {
	r := g.r
	src := func() int32 { return g.pickSource(s) }
	for i, n := 1, 1+r.Intn(3); i <= n; i++ {
		path := "/private/" + strconv.Itoa(i) + ".html"
		if i == 1 && r.Intn(2) == 0 {
			path = "/private/open/" + strconv.Itoa(i) + ".html"
		}
		id := g.newPage(s, path, kPrivate, 200)
		g.addLink(id, link{to: s.content[0], how: howA})
		g.addLink(id, link{to: s.content[r.Intn(len(s.content))], how: howA})
		for m := 1 + r.Intn(2); m > 0; m-- {
			g.addLink(src(), link{to: id, how: howA})
		}
	}
	for i, n := 1, 1+r.Intn(2); i <= n; i++ {
		id := g.newPage(s, "/missing/"+strconv.Itoa(i)+".html", kMissing, 404)
		g.addLink(id, link{to: g.newBait(s, "404"), how: howA})
		g.addLink(src(), link{to: id, how: howA})
	}
	if r.Intn(10) < 3 {
		id := g.newPage(s, "/gone/1.html", kGone, 410)
		g.addLink(id, link{to: g.newBait(s, "410"), how: howA})
		g.addLink(src(), link{to: id, how: howA})
	}
	for n := 1 + r.Intn(3); n > 0; n-- {
		var id int32
		switch x := r.Intn(10); {
		case x < 5:
			id = g.newRedirect(s, s.content[r.Intn(len(s.content))], "")
		case x < 7:
			d := linked[r.Intn(len(linked))]
			id = g.newRedirect(s, d.content[r.Intn(len(d.content))], "")
		case x < 8:
			id = g.newRedirect(s, -1, "http://elsewhere.invalid/moved/"+strconv.Itoa(s.nRedir+1))
		case x < 9:
			m := g.newPage(s, "/missing/r"+strconv.Itoa(s.nRedir+1)+".html", kMissing, 404)
			g.addLink(m, link{to: s.content[0], how: howA})
			id = g.newRedirect(s, m, "")
		default:
			id = g.newRedirect(s, -2, "") // redirects to itself
		}
		g.addLink(src(), link{to: id, how: howA})
	}
	for i, n := 1, r.Intn(3); i <= n; i++ {
		id := g.newPage(s, "/files/report-"+strconv.Itoa(i)+".pdf", kPDF, 200)
		g.addLink(id, link{to: g.newBait(s, "pdf"), how: howA})
		g.addLink(src(), link{to: id, how: howA})
	}
	for i, n := 1, r.Intn(3); i <= n; i++ {
		id := g.newPage(s, "/img/pic-"+strconv.Itoa(i)+".png", kPNG, 200)
		g.addLink(src(), link{to: id, how: howA})
	}
	for i, n := 1, 1+r.Intn(2); i <= n; i++ {
		id := g.newPage(s, "/nf/"+strconv.Itoa(i)+".html", kNofollowOnly, 200)
		g.addLink(id, link{to: s.content[0], how: howA})
		g.addLink(src(), link{to: id, how: howNofollow})
	}
	if r.Intn(10) < 3 {
		id := g.newPage(s, "/meta/nofollow.html", kMetaNofollow, 200)
		g.w.pages[id].meta = []string{"nofollow", "noindex, nofollow", "NoFollow"}[r.Intn(3)]
		g.addLink(id, link{to: s.content[0], how: howA})
		for i, n := 1, 1+r.Intn(2); i <= n; i++ {
			nf := g.newPage(s, "/nf/meta-"+strconv.Itoa(i)+".html", kNofollowOnly, 200)
			g.addLink(nf, link{to: s.content[0], how: howA})
			g.addLink(id, link{to: nf, how: howA})
		}
		g.addLink(src(), link{to: id, how: howA})
	}
	g.addLink(src(), link{to: g.newBait(s, "comment"), how: howComment})
	g.addLink(src(), link{to: g.newBait(s, "script"), how: howScript})
	if r.Intn(4) == 0 {
		g.addLink(src(), link{to: g.newBait(s, "textarea"), how: howTextarea})
	}
	for n := r.Intn(3); n > 0; n-- {
		k := r.Intn(len(extLinks))
		how := howA
		if r.Intn(4) == 0 {
			how = howNofollow
		}
		g.addLink(src(), link{to: -1, ext: fmt.Sprintf(extLinks[k], r.Intn(10000), s.name), how: how})
	}
}

// siteSizes spreads pages over hosts by a Zipf law (rank r gets ∝ 1/r^s
// pages), each size clamped to 1..max, summing exactly to pages. Sorted
// largest first.
func siteSizes(hosts, pages, max int, s float64) []int {
	w := make([]float64, hosts)
	for r := range w {
		w[r] = math.Pow(float64(r+1), -s)
	}
	sizesAt := func(scale float64) ([]int, int) {
		out := make([]int, hosts)
		sum := 0
		for r := range w {
			v := int(scale * w[r])
			if v < 1 {
				v = 1
			}
			if v > max {
				v = max
			}
			out[r] = v
			sum += v
		}
		return out, sum
	}
	lo, hi := 0.0, float64(pages)*math.Pow(float64(hosts), s)+1
	for i := 0; i < 200; i++ {
		mid := (lo + hi) / 2
		if _, sum := sizesAt(mid); sum <= pages {
			lo = mid
		} else {
			hi = mid
		}
	}
	out, sum := sizesAt(lo)
	for sum < pages { // rounding leftovers: one more page to the largest non-full sites
		for r := 0; r < hosts && sum < pages; r++ {
			if out[r] < max {
				out[r]++
				sum++
			}
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(out)))
	return out
}

// statusText is used in bodies.
func statusText(code int) string { return http.StatusText(code) }
