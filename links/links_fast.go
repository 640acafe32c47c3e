package links

import (
	"bytes"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/html"
)

// ExtractFast extracts links like Extract, without a DOM: a
// scanner (htmlscan.go) splits the page into the tokens
// golang.org/x/net/html's tokenizer gives, reading the bytes in place and
// decoding only the attributes that matter, and a small state machine
// follows the parts of the HTML5 tree builder that decide which links
// exist and in which order: foreign SVG/MathML content and its
// integration points, a <frameset> replacing the body, table foster
// parenting, templates. Two known differences, both with misnested
// formatting elements (<a>, <b>, <i>…) that the tree builder clones: when
// its adoption agency algorithm moves nodes around, the DOM order of links
// can differ from their source order, which this function keeps (the links,
// their flags and the page flags are the same); and when it reopens such an
// element inside an SVG/MathML integration point (<svg><foreignObject>),
// whether the tags after it are HTML or SVG depends on that clone, which
// this function does not model, so a link there can be missed or extra.
// Tests check equality on the corpus in testdata/links, generated
// pages and tree-builder corner cases, and by fuzzing (FuzzExtractLinksEqual;
// FuzzScanTokens compares the scanner with the tokenizer token by token).
func ExtractFast(base *url.URL, body []byte) Page {
	return ExtractFastRequisites(base, body, true)
}

// ExtractFastRequisites is ExtractFast with the page's
// requisites (Link.Requisite) left out, unresolved, unless requisites.
func ExtractFastRequisites(base *url.URL, body []byte, requisites bool) Page {
	p := fastParser{framesetOK: true}
	p.z = &p.scan
	p.scan.init(body)
	p.run()
	return finishPage(base, p.root.flatten(nil), p.headNF || p.bodyNF, p.headNI || p.bodyNI, requisites)
}

const (
	modePreBody = iota // before/in/after head: no body element yet
	modeBody           // in body (and after body)
	modeFrameset
	modeAfterFrameset
)

// fnode is an open element inside foreign content: a foreign element, or an
// HTML element inside an integration point (ns 'h').
type fnode struct {
	name string
	ns   byte // 's' svg, 'm' math, 'h' html
	ip   bool // HTML integration point
}

// segment is a run of page items in DOM order. A table's foster-parented
// content is a child segment placed where the table starts.
type segment struct {
	entries []segEntry
}

type segEntry struct {
	item  pageItem
	child *segment // non-nil: a table's foster segment
}

func (s *segment) flatten(dst []pageItem) []pageItem {
	for _, e := range s.entries {
		if e.child != nil {
			dst = e.child.flatten(dst)
		} else {
			dst = append(dst, e.item)
		}
	}
	return dst
}

// tableCtx is an open <table>, or a <template> (a barrier for the tables
// around it).
type tableCtx struct {
	seg      *segment // where the table is (cell content goes here); a template's content
	foster   *segment // content misplaced in the table (not in a cell)
	fostered []string // open foster-parented elements
	cell     bool     // inside td/th/caption: content stays in place
	template bool
	fsLen    int // len(fs) when the table opened
	cellFs   int // len(fs) when the cell opened
	hsLen    int // len(hs) when the table opened: a generic end tag cannot reach below (table and template are special)
}

type fastParser struct {
	z          *scanner
	scan       scanner // what z points to
	root       segment
	mode       int
	framesetOK bool
	frameDepth int
	templates  int
	fs         []fnode
	hs         []string // open HTML elements outside foreign content (approximate)
	tables     []tableCtx
	rawNext    bool
	stop       bool

	headNF, headNI, bodyNF, bodyNI bool

	// attributes of the current tag
	attrs [nAttrs]string
	name  string
}

const whitespaceOrNUL = " \t\r\n\f\x00"

func (p *fastParser) run() {
	for !p.stop {
		top := p.fsTop()
		p.z.allowCDATA = top != nil && top.ns != 'h'
		tt := p.z.next()
		raw := p.rawNext
		p.rawNext = false
		switch tt {
		case html.ErrorToken:
			return
		case html.TextToken:
			if raw {
				continue
			}
			// Only whether the text is all whitespace matters.
			p.text(p.z.wsText())
		case html.StartTagToken, html.SelfClosingTagToken:
			p.name = p.z.tagName()
			p.readAttrs()
			if isRawTag(p.name) {
				p.rawNext = true
			}
			p.startTag(tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			p.name = p.z.tagName()
			p.endTag()
		}
	}
}

func isRawTag(name string) bool {
	switch name {
	case "iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp":
		return true
	}
	return false
}

// attrSlot returns the slot of an attribute of the current tag by its name
// (any case; -1: not read), and whether only its presence counts (a font's
// color/face/size).
func (p *fastParser) attrSlot(name []byte) (slot int, marker bool) {
	key := func(s string) bool { return asciiEqualFold(name, s) }
	switch {
	case key("href"):
		return attrHref, false
	case key("src"):
		return attrSrc, false
	case key("rel"):
		return attrRel, false
	case key("name"):
		return attrName, false
	case key("content"):
		return attrContent, false
	case key("type"), key("encoding"):
		return attrOther, false
	case key("srcset"):
		return attrSrcset, false
	case key("http-equiv"):
		return attrHTTPEquiv, false
	case key("poster"):
		return attrPoster, false
	case key("data"):
		return attrData, false
	case p.name == "font" && (key("color") || key("face") || key("size")):
		return attrOther, true
	}
	return -1, false
}

// readAttrs reads the attributes that matter of the current start tag into
// p.attrs: for each slot the first attribute (in source order) that maps
// to it, as Tokenizer.TagAttr gives it.
func (p *fastParser) readAttrs() {
	p.attrs = [nAttrs]string{}
	var seen [nAttrs]bool
	switch p.name {
	case "a", "area", "frame", "iframe", "base", "meta", "input", "font", "annotation-xml",
		"link", "img", "image", "source", "script", "audio", "video", "embed", "track", "object":
		z := p.z
		for _, a := range z.attrs {
			slot, marker := p.attrSlot(z.b[a.k0:a.k1])
			if slot < 0 || seen[slot] {
				continue
			}
			v := "x"
			if !marker {
				var ok bool
				if v, ok = z.attrValue(a); !ok {
					p.readAttrsTokenizer(z.raw())
					return
				}
			}
			seen[slot] = true
			p.attrs[slot] = v
		}
	}
	p.markAbsent(&seen)
}

// readAttrsTokenizer is readAttrs for a tag whose attribute values have a
// named character reference the scanner does not decode: the tag alone,
// given to golang.org/x/net/html's tokenizer, yields the same attributes.
func (p *fastParser) readAttrsTokenizer(tag []byte) {
	p.attrs = [nAttrs]string{}
	var seen [nAttrs]bool
	z := html.NewTokenizer(bytes.NewReader(tag))
	if tt := z.Next(); tt == html.StartTagToken || tt == html.SelfClosingTagToken {
		for more := true; more; {
			var k, v []byte
			k, v, more = z.TagAttr()
			if k == nil {
				break
			}
			slot, marker := p.attrSlot(k)
			if slot < 0 || seen[slot] {
				continue
			}
			seen[slot] = true
			p.attrs[slot] = string(v)
			if marker {
				p.attrs[slot] = "x"
			}
		}
	}
	p.markAbsent(&seen)
}

// markAbsent marks the slots no attribute filled absent.
func (p *fastParser) markAbsent(seen *[nAttrs]bool) {
	for i, ok := range seen {
		if !ok {
			p.attrs[i] = noAttr
		}
	}
}

// attr returns an attribute of the current tag by slot, and whether it is present.
func (p *fastParser) attr(slot int) (string, bool) {
	if v := p.attrs[slot]; v != noAttr {
		return v, true
	}
	return "", false
}

// elementItems inserts the links the current tag declares at the current insertion point.
func (p *fastParser) elementItems(name string) {
	var buf [4]pageItem
	for _, it := range elementItems(buf[:0], name, p.attr) {
		p.insert(it)
	}
}

// noAttr marks an absent attribute (a value the tokenizer cannot produce).
const noAttr = "\x00absent"

func (p *fastParser) text(t []byte) {
	nonWS := !onlyOf(t, whitespaceOrNUL)
	if p.inForeign(false, true) {
		if nonWS {
			p.framesetOK = false
		}
		return
	}
	switch p.mode {
	case modeFrameset, modeAfterFrameset:
		return
	case modePreBody:
		if p.templates == 0 {
			if onlyOf(t, " \t\r\n\f") {
				return
			}
			p.mode = modeBody
		}
	}
	if nonWS {
		p.framesetOK = false
	}
}

func (p *fastParser) startTag(selfClosing bool) {
	if p.inForeign(true, false) {
		if breakoutTags[p.name] || (p.name == "font" && p.attrs[attrOther] != noAttr) {
			p.popForeignToBoundary()
			// processed as HTML below
		} else {
			top := p.fsTop()
			p.z.rawTag = "" // Tokenizer.NextIsNotRawText
			p.rawNext = false
			if !selfClosing {
				n := fnode{name: p.name, ns: top.ns}
				if n.ns == 's' && (n.name == "foreignobject" || n.name == "desc" || n.name == "title") {
					n.ip = true
				}
				if n.ns == 'm' && n.name == "annotation-xml" && p.attrs[attrOther] != noAttr &&
					(strings.EqualFold(p.attrs[attrOther], "text/html") || strings.EqualFold(p.attrs[attrOther], "application/xhtml+xml")) {
					n.ip = true
				}
				p.fs = append(p.fs, n)
			}
			return
		}
	}
	name := p.name
	switch p.mode {
	case modeFrameset:
		switch name {
		case "frameset":
			p.frameDepth++
		case "frame":
			if p.attrs[attrSrc] != noAttr {
				p.root.entries = append(p.root.entries, segEntry{item: pageItem{kind: itemLink, val: p.attrs[attrSrc]}})
			}
		}
		return
	case modeAfterFrameset:
		return
	case modePreBody:
		if p.templates == 0 {
			switch name {
			case "html", "head", "basefont", "bgsound", "style", "title", "noframes", "noscript":
				return
			case "link", "script":
				p.elementItems(name) // in the head
				return
			case "base", "meta":
				p.headItem(name)
				return
			case "template":
				p.openTemplate()
				return
			case "frameset":
				p.mode, p.frameDepth = modeFrameset, 1
				return
			case "body":
				p.mode, p.framesetOK = modeBody, false
				return
			}
			p.mode = modeBody
		}
	}
	p.bodyStart(name, selfClosing)
}

// headItem records a <base> or <meta> that lands in the head.
func (p *fastParser) headItem(name string) {
	if name == "base" {
		if p.attrs[attrHref] != noAttr {
			p.insert(pageItem{kind: itemBase, val: p.attrs[attrHref]})
		}
		return
	}
	p.elementItems(name) // http-equiv=refresh
	if name, ok := p.attr(attrName); ok {
		content, _ := p.attr(attrContent)
		nf, ni := metaRobots(name, content)
		if p.mode == modeBody {
			p.bodyNF, p.bodyNI = p.bodyNF || nf, p.bodyNI || ni
		} else {
			p.headNF, p.headNI = p.headNF || nf, p.headNI || ni
		}
	}
}

// curSeg is where content goes at the current insertion point.
func (p *fastParser) curSeg() *segment {
	n := len(p.tables)
	if n == 0 {
		return &p.root
	}
	if t := &p.tables[n-1]; !t.cell && !t.template {
		return t.foster // foster parenting
	}
	return p.tables[n-1].seg
}

// fosterTable returns the innermost table if content is foster-parented now.
func (p *fastParser) fosterTable() *tableCtx {
	if n := len(p.tables); n > 0 && !p.tables[n-1].cell && !p.tables[n-1].template {
		return &p.tables[n-1]
	}
	return nil
}

// insert adds an item at the current insertion point.
func (p *fastParser) insert(it pageItem) {
	it.inBody = p.mode == modeBody
	s := p.curSeg()
	s.entries = append(s.entries, segEntry{item: it})
}

func (p *fastParser) popTable() tableCtx {
	t := p.tables[len(p.tables)-1]
	p.tables = p.tables[:len(p.tables)-1]
	p.clearToTable(&t)
	return t
}

// clearToTable pops the HTML elements opened since t opened, as the tree
// builder's "clear the stack back to a table context" does.
func (p *fastParser) clearToTable(t *tableCtx) {
	if len(p.hs) > t.hsLen {
		p.hs = p.hs[:t.hsLen]
	}
	t.fostered = nil
}

func (p *fastParser) openTemplate() {
	if len(p.fs) > 0 {
		// the tree builder ignores the rest of the document (x/net/html divergence)
		p.stop = true
		return
	}
	p.templates++
	p.framesetOK = false
	seg := p.curSeg()
	if t := p.fosterTable(); t != nil && len(t.fostered) == 0 {
		seg = t.seg // a template directly in a table is not foster-parented
	}
	p.tables = append(p.tables, tableCtx{template: true, seg: seg, fsLen: len(p.fs), hsLen: len(p.hs)})
}

// bodyStart handles a start tag in the "in body" family of insertion modes.
func (p *fastParser) bodyStart(name string, selfClosing bool) {
	switch name {
	case "pre", "listing", "li", "dd", "dt", "button", "applet", "marquee", "object", "area", "br",
		"embed", "img", "image", "keygen", "wbr", "hr", "textarea", "xmp", "iframe", "select", "body":
		p.framesetOK = false
	case "input":
		if !strings.EqualFold(p.attrs[attrOther], "hidden") {
			p.framesetOK = false
		}
	}
	// tables first: they decide where content goes
	if n := len(p.tables); n > 0 && !p.tables[n-1].template {
		t := &p.tables[n-1]
		if t.cell {
			switch name {
			case "caption", "col", "colgroup", "tbody", "td", "tfoot", "th", "thead", "tr":
				p.closeCell(t)
			}
		}
		if !t.cell {
			switch name {
			case "caption", "td", "th":
				p.clearToTable(t)
				t.cell, t.cellFs = true, len(p.fs)
				return
			case "tr", "tbody", "thead", "tfoot", "col", "colgroup":
				p.clearToTable(t)
				return
			case "table":
				p.closeTable()
				p.openTable()
				return
			case "template":
				p.openTemplate()
				return
			case "script":
				// inserted in the table, not foster-parented
				var buf [2]pageItem
				for _, it := range elementItems(buf[:0], name, p.attr) {
					it.inBody = p.mode == modeBody
					t.seg.entries = append(t.seg.entries, segEntry{item: it})
				}
				return
			case "input":
				if strings.EqualFold(p.attrs[attrOther], "hidden") {
					return // inserted in the table
				}
				// else foster-parented
			case "style", "form":
				return
			}
			// anything else is foster-parented (insert handles the position)
		}
	}
	switch name {
	case "a", "area", "iframe", "link", "img", "image", "source", "script", "audio", "video", "embed", "track", "input", "object":
		p.elementItems(name)
	case "base", "meta":
		p.headItem(name)
	case "frame", "caption", "col", "colgroup", "head", "tbody", "td", "tfoot", "th", "thead", "tr":
		return // ignored in body
	case "frameset":
		if p.mode == modeBody && p.templates == 0 && p.framesetOK {
			kept := p.root.entries[:0]
			for _, e := range p.root.entries {
				if e.child == nil && !e.item.inBody {
					kept = append(kept, e)
				}
			}
			p.root.entries = kept
			p.bodyNF, p.bodyNI = false, false
			p.fs, p.hs, p.tables = nil, nil, nil
			p.mode, p.frameDepth = modeFrameset, 1
		}
		return
	case "template":
		p.openTemplate()
		return
	case "table":
		p.framesetOK = false
		p.openTable()
		return
	case "svg", "math":
		if !selfClosing {
			ns := byte('s')
			if name == "math" {
				ns = 'm'
			}
			p.fs = append(p.fs, fnode{name: name, ns: ns})
		}
		return
	}
	if isVoid(name) {
		return
	}
	if len(p.fs) > 0 {
		p.fs = append(p.fs, fnode{name: name, ns: 'h'})
		return
	}
	if t := p.fosterTable(); t != nil && len(t.fostered) < 512 {
		t.fostered = append(t.fostered, name)
	}
	if name == "a" {
		p.closeOpenA()
	}
	if len(p.hs) < 512 {
		p.hs = append(p.hs, name)
	}
}

// hsFloor is the bottom of the light HTML stack that an end tag or an
// <a> can reach: the innermost table or template (special elements) ends it.
func (p *fastParser) hsFloor() int {
	if n := len(p.tables); n > 0 {
		return p.tables[n-1].hsLen
	}
	return 0
}

// closeOpenA approximates what the tree builder does with an <a> start tag
// while an earlier <a> is open (its adoption agency algorithm): the earlier
// one is closed, with the elements opened in it when none of them is
// special, else alone; a later </a> then finds no <a> to close.
func (p *fastParser) closeOpenA() {
	for i, low := len(p.hs)-1, p.hsFloor(); i >= low; i-- {
		if p.hs[i] != "a" {
			continue
		}
		for _, above := range p.hs[i+1:] {
			if specialTags[above] {
				p.hs = slices.Delete(p.hs, i, i+1)
				return
			}
		}
		p.hs = p.hs[:i]
		return
	}
}

func (p *fastParser) openTable() {
	s := p.curSeg()
	foster := &segment{}
	s.entries = append(s.entries, segEntry{child: foster})
	p.tables = append(p.tables, tableCtx{seg: s, foster: foster, fsLen: len(p.fs), hsLen: len(p.hs)})
}

func (p *fastParser) closeCell(t *tableCtx) {
	t.cell = false
	p.clearToTable(t)
	if len(p.fs) > t.cellFs {
		p.fs = p.fs[:t.cellFs]
	}
}

// closeTable pops the innermost table (not across a template barrier).
func (p *fastParser) closeTable() {
	n := len(p.tables)
	if n == 0 || p.tables[n-1].template {
		return
	}
	if t := p.popTable(); len(p.fs) > t.fsLen {
		p.fs = p.fs[:t.fsLen]
	}
}

func (p *fastParser) endTag() {
	name := p.name
	if p.inForeign(false, false) {
		// foreign end tag: close the matching foreign element, if any above the boundary
		for i := len(p.fs) - 1; i >= 0; i-- {
			if p.fs[i].name == name && p.fs[i].ns != 'h' {
				p.fs = p.fs[:i]
				return
			}
			if i == 0 || p.fs[i-1].ns == 'h' {
				break
			}
		}
		if name == "p" || name == "br" {
			p.popForeignToBoundary()
		}
	}
	switch p.mode {
	case modeFrameset:
		if name == "frameset" {
			p.frameDepth--
			if p.frameDepth == 0 {
				p.mode = modeAfterFrameset
			}
		}
		return
	case modeAfterFrameset:
		return
	case modePreBody:
		if p.templates == 0 {
			switch name {
			case "body", "html", "br":
				p.mode = modeBody
			case "template":
			default:
				return
			}
		}
	}
	if name == "br" {
		p.framesetOK = false
		return
	}
	if name == "template" {
		if p.templates > 0 {
			p.templates--
			for len(p.tables) > 0 {
				if t := p.popTable(); t.template {
					if len(p.fs) > t.fsLen {
						p.fs = p.fs[:t.fsLen]
					}
					break
				}
			}
		}
		return
	}
	if n := len(p.tables); n > 0 && !p.tables[n-1].template {
		t := &p.tables[n-1]
		switch name {
		case "td", "th", "caption", "tr", "tbody", "thead", "tfoot":
			if t.cell {
				p.closeCell(t)
			}
			return
		case "table":
			p.closeTable()
			return
		case "body", "html", "col", "colgroup":
			return
		}
		if !t.cell && len(p.fs) == 0 {
			for i := len(t.fostered) - 1; i >= 0; i-- {
				if t.fostered[i] == name {
					t.fostered = t.fostered[:i]
					break
				}
			}
		}
	}
	// generic end tag: inside integration points, close a matching HTML element
	for i := len(p.fs) - 1; i >= 0; i-- {
		n := &p.fs[i]
		if n.ns == 'h' {
			if n.name == name {
				p.fs = p.fs[:i]
				return
			}
			if specialTags[n.name] {
				return
			}
			continue
		}
		if n.ip || isMathTextIP(n) || (n.ns == 'm' && n.name == "annotation-xml") {
			return
		}
	}
	// outside foreign content (or escaping it): the light HTML stack, down
	// to the innermost table or template
	for i, low := len(p.hs)-1, p.hsFloor(); i >= low; i-- {
		if p.hs[i] == name {
			p.hs = p.hs[:i]
			p.fs = nil
			return
		}
	}
}
