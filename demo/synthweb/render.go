package synthweb

import (
	"bytes"
	"hash/fnv"
	"html"
	"strconv"
	"strings"
)

// rng is a tiny deterministic generator (splitmix64) for rendering: page
// bodies are generated on demand, never stored.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// n returns a number in 0..k-1 (k > 0).
func (r *rng) n(k int) int { return int(r.next() % uint64(k)) }

func (w *Web) pageRng(id int32) rng {
	return rng{s: uint64(w.cfg.Seed)*0x2545F4914F6CDD1D ^ uint64(id+1)*0x9E3779B97F4A7C15}
}

func (w *Web) stringRng(s string) rng {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatInt(w.cfg.Seed, 10)))
	h.Write([]byte(s))
	return rng{s: h.Sum64()}
}

var words = strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod
tempor incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation
ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate velit
esse cillum fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui
officia deserunt mollit anim id est laborum crawler spider frontier bucket phase host page link
robots delay politeness archive index search engine harvest fetch queue column element element
network latency bandwidth storage record state completed stalled progress list window scheduler
synthetic web oracle deterministic zipf calendar trap redirect gzip header body anchor paragraph`)

// response is the status line and headers of a rendered response.
type response struct {
	status   int
	ctype    string
	location string
}

const ctHTML = "text/html; charset=utf-8"

// pageCtx renders one HTML document.
type pageCtx struct {
	w       *Web
	b       *bytes.Buffer
	r       *rng
	s       *site  // site of the page
	baseDir string // directory relative links are written against
}

func (c *pageCtx) words(n int) {
	for i := 0; i < n; i++ {
		if i > 0 {
			c.b.WriteByte(' ')
		}
		c.b.WriteString(words[c.r.n(len(words))])
	}
}

// href writes how a page links to tpath on site t: one of many forms that
// all normalize to "http://" + t.name + tpath.
func (c *pageCtx) href(t *site, tpath string) string {
	same := t == c.s
	var u string
	switch x := c.r.n(100); {
	case same && x < 22:
		u = tpath
	case same && x < 42:
		u = relRef(c.baseDir, tpath)
		if !strings.HasPrefix(u, "../") && c.r.n(3) == 0 {
			u = "./" + u
		}
	case x < 55:
		u = "http://" + t.name + tpath
	case x < 61:
		u = "http://" + strings.ToUpper(t.name) + tpath
	case x < 66:
		u = "http://" + t.name + ":80" + tpath
	case x < 71:
		u = "//" + t.name + tpath
	case x < 75:
		u = []string{"HTTP://", "Http://"}[c.r.n(2)] + t.name + tpath
	case x < 85:
		if same && c.r.n(2) == 0 {
			u = encodeSome(c.r, tpath)
		} else {
			u = "http://" + t.name + encodeSome(c.r, tpath)
		}
	case x < 92:
		switch {
		case same && c.r.n(2) == 0:
			u = "/./" + tpath[1:]
		case c.r.n(2) == 0:
			u = "http://" + t.name + "/x/y/../../" + tpath[1:]
		default:
			u = "http://" + t.name + "/" + sectionPool[c.r.n(len(sectionPool))] + "/../." + tpath
		}
	default:
		u = "http://" + t.name + tpath
	}
	if c.r.n(10) == 0 {
		u += "#" + words[c.r.n(len(words))]
	}
	if c.r.n(40) == 0 {
		u = " " + u + "\n"
	}
	return u
}

// relRef returns a relative reference from directory baseDir ("/a/b/") to
// the request URI target ("/a/c/page.html?q").
func relRef(baseDir, target string) string {
	path, query := target, ""
	if i := strings.IndexByte(target, '?'); i >= 0 {
		path, query = target[:i], target[i:]
	}
	var bsegs []string
	if t := strings.Trim(baseDir, "/"); t != "" {
		bsegs = strings.Split(t, "/")
	}
	tsegs := strings.Split(path[1:], "/")
	tdir, file := tsegs[:len(tsegs)-1], tsegs[len(tsegs)-1]
	common := 0
	for common < len(bsegs) && common < len(tdir) && bsegs[common] == tdir[common] {
		common++
	}
	var sb strings.Builder
	for i := common; i < len(bsegs); i++ {
		sb.WriteString("../")
	}
	for _, d := range tdir[common:] {
		sb.WriteString(d)
		sb.WriteByte('/')
	}
	sb.WriteString(file)
	if sb.Len() == 0 {
		sb.WriteString("./")
	}
	return sb.String() + query
}

// encodeSome percent-encodes one or two unreserved characters of the path
// part of uri (upper- or lower-case hex); normalizers decode them again.
func encodeSome(r *rng, uri string) string {
	path, query := uri, ""
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		path, query = uri[:i], uri[i:]
	}
	var pos []int
	for i := 0; i < len(path); i++ {
		if ch := path[i]; ch != '/' && isUnreserved(ch) {
			pos = append(pos, i)
		}
	}
	if len(pos) == 0 {
		return uri
	}
	first := pos[r.n(len(pos))]
	if i := strings.IndexByte(path, '~'); i >= 0 && r.n(2) == 0 {
		first = i // the classic %7E
	}
	pick := map[int]bool{first: true}
	if r.n(2) == 0 {
		pick[pos[r.n(len(pos))]] = true
	}
	const upper, lower = "0123456789ABCDEF", "0123456789abcdef"
	var sb strings.Builder
	for i := 0; i < len(path); i++ {
		if pick[i] {
			hex := upper
			if r.n(3) == 0 {
				hex = lower
			}
			sb.WriteByte('%')
			sb.WriteByte(hex[path[i]>>4])
			sb.WriteByte(hex[path[i]&15])
		} else {
			sb.WriteByte(path[i])
		}
	}
	return sb.String() + query
}

func isUnreserved(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' ||
		ch == '-' || ch == '.' || ch == '_' || ch == '~'
}

func dirOf(uri string) string {
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	return uri[:strings.LastIndexByte(uri, '/')+1]
}

func attr(s string) string { return html.EscapeString(s) }

// writeLink writes one link of the model.
func (c *pageCtx) writeLink(l link, mapN *int) {
	var u string
	if l.to < 0 {
		u = l.ext
	} else {
		p := &c.w.pages[l.to]
		u = c.href(c.w.sites[p.site], p.path)
	}
	b := c.b
	switch l.how {
	case howA:
		b.WriteString(`<a href="` + attr(u) + `"`)
		switch c.r.n(6) {
		case 0:
			b.WriteString(` rel="noopener"`)
		case 1:
			b.WriteString(` title="more"`)
		}
		b.WriteString(">")
		c.words(2 + c.r.n(3))
		b.WriteString("</a>")
	case howArea:
		*mapN++
		n := strconv.Itoa(*mapN)
		b.WriteString(`<map name="m` + n + `"><area shape="rect" coords="0,0,10,10" href="` + attr(u) + `" alt="area ` + n + `"></map>`)
	case howIframe:
		b.WriteString(`<iframe src="` + attr(u) + `" title="embedded" width="300" height="100"></iframe>`)
	case howFrame:
		b.WriteString(`<frame src="` + attr(u) + `">`)
	case howNofollow:
		rel := []string{"nofollow", "nofollow", "external nofollow", "NoFollow noopener"}[c.r.n(4)]
		b.WriteString(`<a rel="` + rel + `" href="` + attr(u) + `">`)
		c.words(2)
		b.WriteString("</a>")
	case howComment:
		b.WriteString(`<!-- old navigation: <a href="` + attr(u) + `">archive</a> -->`)
	case howScript:
		b.WriteString(`<script>var next = "` + u + `"; document.write('<a href="` + u + `">next<\/a>');</script>`)
	case howTextarea:
		b.WriteString(`<textarea rows="2" cols="40"><a href="` + u + `">copy me</a></textarea>`)
	case howNoframes:
		b.WriteString(`<a href="` + attr(u) + `">no frames</a>`)
	}
}

func (c *pageCtx) head(title, base, meta string, static bool) {
	b := c.b
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>")
	b.WriteString(attr(title))
	b.WriteString("</title>\n")
	if base != "" {
		b.WriteString(`<base href="` + attr(base) + "\">\n")
	}
	if meta != "" {
		b.WriteString(`<meta name="robots" content="` + meta + "\">\n")
	}
	if static {
		b.WriteString("<link rel=\"stylesheet\" href=\"/static/site.css\">\n<script src=\"/static/app.js\"></script>\n")
	}
	b.WriteString("</head>\n")
}

// renderHTML renders an HTML page of the model (any kind with an HTML body
// except redirects and framesets).
func (w *Web) renderHTML(b *bytes.Buffer, s *site, id int32) {
	p := &w.pages[id]
	r := w.pageRng(id)
	c := &pageCtx{w: w, b: b, r: &r, s: s, baseDir: dirOf(p.path)}
	title := s.name + " " + p.path
	switch p.kind {
	case kMissing, kGone:
		code := int(p.status)
		c.head(strconv.Itoa(code)+" "+statusText(code), "", "", false)
		b.WriteString("<body>\n<h1>" + statusText(code) + "</h1>\n<p>")
		mapN := 0
		for i, l := range p.links {
			if i > 0 {
				b.WriteString(" or ")
			}
			c.writeLink(l, &mapN)
		}
		b.WriteString("</p>\n</body>\n</html>\n")
		return
	case kFrameset:
		w.renderFrameset(c, p, title)
		return
	}
	base := ""
	if (p.kind == kContent && p.path != "/" || p.kind == kPrivate) && r.n(8) == 0 {
		sec := s.secs[r.n(len(s.secs))]
		switch r.n(4) {
		case 0:
			base = "http://" + s.name + c.baseDir
		case 1:
			c.baseDir = "/" + sec + "/"
			base = "http://" + s.name + c.baseDir
		case 2:
			c.baseDir = "/" + sec + "/more/"
			base = "http://" + strings.ToUpper(s.name) + c.baseDir
		default:
			c.baseDir = "/" + sec + "/"
			base = c.baseDir
		}
	}
	c.head(title, base, p.meta, true)
	b.WriteString("<body>\n<a name=\"top\"></a><img src=\"/static/logo.png\" alt=\"logo\">\n<h1>")
	b.WriteString(attr(title))
	b.WriteString("</h1>\n")
	target := w.cfg.MinBody + r.n(w.cfg.MaxBody-w.cfg.MinBody+1)
	mapN := 0
	for _, l := range p.links {
		b.WriteString("<p>")
		c.words(3 + r.n(25))
		b.WriteByte(' ')
		c.writeLink(l, &mapN)
		b.WriteByte(' ')
		c.words(1 + r.n(10))
		b.WriteString(".</p>\n")
	}
	// Decorations that resolve to the page itself or to no http URL at all.
	if base == "" && r.n(3) == 0 {
		b.WriteString(`<p><a href="#top">top</a> <a href="">reload</a></p>` + "\n")
	}
	if r.n(4) == 0 {
		b.WriteString(`<p><a href="javascript:history.back()">back</a> <a>no href</a> <a href="mailto:info@` + s.name + `">mail</a></p>` + "\n")
	}
	for b.Len() < target {
		b.WriteString("<p>")
		c.words(20 + r.n(60))
		b.WriteString(".</p>\n")
	}
	b.WriteString("<footer><a href=\"#top\" rel=\"nofollow\">top</a></footer>\n</body>\n</html>\n")
}

func (w *Web) renderFrameset(c *pageCtx, p *page, title string) {
	b := c.b
	c.head(title, "", "", true)
	b.WriteString("<frameset cols=\"25%,*\">\n")
	var hidden []link
	mapN := 0
	for _, l := range p.links {
		if l.how == howFrame {
			c.writeLink(l, &mapN)
			b.WriteByte('\n')
		} else {
			hidden = append(hidden, l)
		}
	}
	b.WriteString("</frameset>\n<noframes><p>")
	for _, l := range hidden {
		c.writeLink(l, &mapN)
		b.WriteByte(' ')
	}
	c.words(100 + c.r.n(200))
	b.WriteString("</p></noframes>\n</html>\n")
}

// renderRedirect renders the Location and a small HTML body.
func (w *Web) renderRedirect(b *bytes.Buffer, s *site, id int32) response {
	p := &w.pages[id]
	r := w.pageRng(id)
	loc := p.ext
	if p.to >= 0 {
		t := &w.pages[p.to]
		ts := w.sites[t.site]
		switch x := r.n(10); {
		case ts == s && x < 3:
			loc = t.path
		case x < 8:
			loc = "http://" + ts.name + t.path
		default:
			loc = "http://" + strings.ToUpper(ts.name) + t.path
		}
	}
	c := &pageCtx{w: w, b: b, r: &r, s: s, baseDir: dirOf(p.path)}
	c.head(statusText(int(p.status)), "", "", false)
	b.WriteString("<body><p>Moved to <a href=\"" + attr(loc) + "\">here</a>. ")
	mapN := 0
	for _, l := range p.links {
		c.writeLink(l, &mapN)
	}
	b.WriteString("</p></body>\n</html>\n")
	return response{status: int(p.status), ctype: ctHTML, location: loc}
}

var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// render writes the response for page id into b.
func (w *Web) render(b *bytes.Buffer, s *site, id int32) response {
	p := &w.pages[id]
	switch p.kind {
	case kRedirect:
		return w.renderRedirect(b, s, id)
	case kPDF:
		r := w.pageRng(id)
		b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n")
		for _, l := range p.links { // a PDF is never parsed for links
			b.WriteString("% see <a href=\"" + w.pages[l.to].path + "\">this</a>\n")
		}
		for n := 1000 + r.n(2000); b.Len() < n; {
			b.WriteString("BT /F1 12 Tf 72 712 Td (")
			b.WriteString(words[r.n(len(words))])
			b.WriteString(") Tj ET\n")
		}
		b.WriteString("%%EOF\n")
		return response{status: 200, ctype: "application/pdf"}
	case kPNG:
		b.Write(pngBytes)
		return response{status: 200, ctype: "image/png"}
	case kStatic:
		switch {
		case strings.HasSuffix(p.path, ".css"):
			b.WriteString("body { font-family: sans-serif; max-width: 50em; }\na { color: #036; }\n")
			return response{status: 200, ctype: "text/css; charset=utf-8"}
		case strings.HasSuffix(p.path, ".js"):
			b.WriteString("// <a href=\"/bait/js.html\">not a link</a>\nvar home = \"/\";\n")
			return response{status: 200, ctype: "text/javascript; charset=utf-8"}
		default:
			b.Write(pngBytes)
			return response{status: 200, ctype: "image/png"}
		}
	case kTrapHome:
		w.renderCalendar(b, s, "/", 0, 0, "")
		return response{status: 200, ctype: ctHTML}
	}
	w.renderHTML(b, s, id)
	return response{status: int(p.status), ctype: ctHTML}
}

// robotsResponse writes /robots.txt of s.
func (w *Web) robotsResponse(b *bytes.Buffer, s *site) response {
	if s.robots.status != 200 {
		b.WriteString("<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n")
		return response{status: s.robots.status, ctype: ctHTML}
	}
	b.WriteString(s.robots.text())
	return response{status: 200, ctype: "text/plain; charset=utf-8"}
}

// Trap calendar: /cal/<year>/<MM>[?sessionid=<12 hex>] for every year
// 1..9999 and month 01..12; each page links to the previous and next month
// and to a fresh session-id variant of itself, forever.

const calStartYear, calStartMonth = 2026, 11

// parseCal parses a calendar request URI.
func parseCal(uri string) (year, month int, session string, ok bool) {
	path, query := uri, ""
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		path, query = uri[:i], uri[i+1:]
	}
	if query != "" {
		const key = "sessionid="
		if !strings.HasPrefix(query, key) || len(query) != len(key)+12 {
			return 0, 0, "", false
		}
		session = query[len(key):]
		for i := 0; i < len(session); i++ {
			if ch := session[i]; !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f') {
				return 0, 0, "", false
			}
		}
	}
	rest, found := strings.CutPrefix(path, "/cal/")
	if !found {
		return 0, 0, "", false
	}
	ys, ms, found := strings.Cut(rest, "/")
	if !found || len(ms) != 2 || ys == "" || ys[0] == '0' || len(ys) > 4 {
		return 0, 0, "", false
	}
	y, err1 := strconv.Atoi(ys)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || y < 1 || m < 1 || m > 12 || ms[0] < '0' || ms[0] > '1' {
		return 0, 0, "", false
	}
	return y, m, session, true
}

func calPath(y, m int, session string) string {
	p := "/cal/" + strconv.Itoa(y) + "/"
	if m < 10 {
		p += "0"
	}
	p += strconv.Itoa(m)
	if session != "" {
		p += "?sessionid=" + session
	}
	return p
}

func (w *Web) sessionID(uri string) string {
	r := w.stringRng("session " + uri)
	const hex = "0123456789abcdef"
	var out [12]byte
	v := r.next()
	for i := range out {
		out[i] = hex[v&15]
		v >>= 4
	}
	return string(out[:])
}

// renderCalendar renders the trap home ("/", y == 0) or a calendar page.
func (w *Web) renderCalendar(b *bytes.Buffer, s *site, uri string, y, m int, session string) {
	r := w.stringRng(s.name + uri)
	c := &pageCtx{w: w, b: b, r: &r, s: s, baseDir: dirOf(uri)}
	var targets []string
	title := "Calendar"
	if y == 0 {
		targets = []string{calPath(calStartYear, calStartMonth, ""), calPath(calStartYear, calStartMonth, w.sessionID(uri))}
	} else {
		title = "Calendar " + calPath(y, m, "")[5:]
		py, pm := y, m-1
		if pm == 0 {
			py, pm = y-1, 12
		}
		ny, nm := y, m+1
		if nm == 13 {
			ny, nm = y+1, 1
		}
		if py >= 1 {
			targets = append(targets, calPath(py, pm, session))
		}
		if ny <= 9999 {
			targets = append(targets, calPath(ny, nm, session))
		}
		targets = append(targets, calPath(y, m, w.sessionID(uri)), "/")
	}
	c.head(title, "", "", false)
	b.WriteString("<body>\n<h1>" + title + "</h1>\n<table>\n")
	for d := 1; d <= 28; d++ {
		if d%7 == 1 {
			b.WriteString("<tr>")
		}
		b.WriteString("<td>" + strconv.Itoa(d) + " ")
		c.words(1 + r.n(3))
		b.WriteString("</td>")
		if d%7 == 0 {
			b.WriteString("</tr>\n")
		}
	}
	b.WriteString("</table>\n")
	for _, t := range targets {
		b.WriteString("<p>")
		c.words(5 + r.n(20))
		b.WriteString(` <a href="` + attr(c.href(s, t)) + `">`)
		c.words(2)
		b.WriteString("</a></p>\n")
	}
	b.WriteString(`<p><a href="http://elsewhere.invalid/calendar">elsewhere</a></p>` + "\n</body>\n</html>\n")
}
