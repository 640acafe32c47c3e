// Package links finds the URLs a fetched document points to: the links and
// page requisites of an HTML page (Extract over a DOM, ExtractFast over the
// token scanner of htmlscan.go, with the same result), those a Link header,
// a style sheet, a srcset or a meta refresh declares (declared.go), and the
// URLs of a sitemap and of a robots.txt's Sitemap lines (sitemap.go). Every
// URL comes out resolved and normalized by urlscope; whether it is kept is
// the caller's choice.
package links

import (
	"bytes"
	"errors"
	"net/url"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"github.com/phasecrawl/phasecrawl/urlscope"
	"golang.org/x/net/html"
)

// Page is what link extraction found in an HTML document.
type Page struct {
	// Links: absolute, normalized http(s) URLs in document order,
	// de-duplicated (first occurrence kept).
	Links []Link
	// NoFollow, NoIndex: from <meta name="robots" content="..."> (nofollow,
	// noindex, none = both), case-insensitive, any number of such tags.
	NoFollow, NoIndex bool
	// Base: the URL links were resolved against (the first <base href> if it
	// resolves, else the document URL), normalized; "" if there is none.
	Base string
	// Canonical: the first <link rel=canonical href> that resolves (or a
	// Link header's, see FromHeader), normalized; "" if there is none. It
	// is not in Links.
	Canonical string
	// Dropped counts the hrefs/srcs that did not make a link, by why.
	Dropped Dropped
}

// Dropped counts a page's distinct hrefs that urlscope.Resolve refused: another scheme
// (mailto:, javascript:, ftp:, ...), longer than urlscope.MaxURLLength, an invalid host
// or port, or otherwise unusable.
type Dropped struct {
	Scheme, TooLong, BadHost, BadPort, Invalid int
}

// count adds one refusal of urlscope.Resolve.
func (d *Dropped) count(err error) {
	switch {
	case errors.Is(err, urlscope.ErrScheme):
		d.Scheme++
	case errors.Is(err, urlscope.ErrTooLong):
		d.TooLong++
	case errors.Is(err, urlscope.ErrHost):
		d.BadHost++
	case errors.Is(err, urlscope.ErrPort):
		d.BadPort++
	default:
		d.Invalid++
	}
}

// Link is one outlink of a page.
type Link struct {
	URL string // absolute, normalized by urlscope.Normalize
	// NoFollow: rel contains "nofollow" on every <a>/<area>/<link> of the
	// page that links to URL (one followed occurrence makes the link
	// followed), and no requisite occurrence.
	NoFollow bool
	// Requisite: URL is only a page requisite (a style sheet, script,
	// image, font, media, icon: <img src>, <link rel=stylesheet>, ...; see
	// elementItems), fetched only with fetch.requisites. One followed
	// link occurrence makes it a link.
	Requisite bool
}

// Kinds of pageItem.
const (
	itemLink = iota
	itemNoFollowLink
	itemBase
	itemRequisite
	itemCanonical
)

// pageItem is a link or <base> found in a page, in DOM order.
type pageItem struct {
	kind   uint8
	inBody bool // dropped if a <frameset> replaces the body
	val    string
}

// finishPage resolves the collected items (in DOM order) into a Page;
// requisite items are dropped unless requisites.
func finishPage(docURL *url.URL, items []pageItem, noFollow, noIndex, requisites bool) Page {
	var base urlscope.Base
	if docURL != nil {
		base, _ = urlscope.NewBase(docURL.String())
	}
	for _, it := range items {
		if it.kind != itemBase {
			continue
		}
		if s, err := base.Resolve(it.val); err == nil {
			if b, err := urlscope.NewBase(s); err == nil {
				base = b
			}
		}
		break
	}
	p := Page{NoFollow: noFollow, NoIndex: noIndex, Base: base.String()}
	n := 0
	for _, it := range items {
		if it.kind != itemBase && it.kind != itemCanonical && (requisites || it.kind != itemRequisite) {
			n++
		}
	}
	// first canonical that resolves
	for _, it := range items {
		if it.kind != itemCanonical {
			continue
		}
		if u, err := base.Resolve(it.val); err == nil {
			p.Canonical = u
			break
		}
	}
	if n == 0 {
		return p
	}
	p.Links = make([]Link, 0, n)
	seen := make(map[string]int, n)
	var bad map[string]bool
	occ := make([]uint8, 0, n)
	for _, it := range items {
		if it.kind == itemBase || it.kind == itemCanonical || !requisites && it.kind == itemRequisite {
			continue
		}
		u, err := base.Resolve(it.val)
		if err != nil {
			if !bad[it.val] { // counted once per distinct value, like links
				if bad == nil {
					bad = map[string]bool{}
				}
				bad[it.val] = true
				p.Dropped.count(err)
			}
			continue
		}
		i, ok := seen[u]
		if !ok {
			i = len(p.Links)
			seen[u] = i
			p.Links = append(p.Links, Link{URL: u})
			occ = append(occ, 0)
		}
		switch it.kind {
		case itemLink:
			occ[i] |= occFollowed
		case itemRequisite:
			occ[i] |= occRequisite
		}
	}
	for i := range p.Links {
		followed, req := occ[i]&occFollowed != 0, occ[i]&occRequisite != 0
		p.Links[i].NoFollow = !followed && !req
		p.Links[i].Requisite = !followed && req
	}
	return p
}

// Occurrences of a link in a page (finishPage).
const (
	occFollowed  = 1 << iota // a followed link (<a> without nofollow, <frame>, <link rel=next>, ...)
	occRequisite             // a page requisite
)

// relNoFollow reports whether a rel attribute has the token "nofollow".
func relNoFollow(rel string) bool {
	for f := range fields(rel, false) {
		if strings.EqualFold(f, "nofollow") {
			return true
		}
	}
	return false
}

// fields yields the fields of s between HTML spaces (and commas if
// comma), like strings.FieldsFunc without building a slice.
func fields(s string, comma bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		start := -1
		for i := 0; i <= len(s); i++ {
			sep := i == len(s) || isHTMLSpace(rune(s[i])) || comma && s[i] == ','
			switch {
			case !sep && start < 0:
				start = i
			case sep && start >= 0:
				if !yield(s[start:i]) {
					return
				}
				start = -1
			}
		}
	}
}

// metaRobots reads <meta name=robots content=...>.
func metaRobots(name, content string) (noFollow, noIndex bool) {
	if !strings.EqualFold(strings.TrimFunc(name, isHTMLSpace), "robots") {
		return false, false
	}
	for f := range fields(content, true) {
		switch strings.ToLower(f) {
		case "nofollow":
			noFollow = true
		case "noindex":
			noIndex = true
		case "none":
			noFollow, noIndex = true, true
		}
	}
	return noFollow, noIndex
}

func isHTMLSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r'
}

// Extract extracts the links of an HTML page with goquery (a DOM built
// by the HTML5 tree builder of golang.org/x/net/html); base is the page's URL
// (nil: only absolute links and a <base href> count). It never fails. Rules,
// shared with ExtractFast:
//
//   - links: what elementItems reads (href of <a>, <area> and of <link>
//     whose rel names a document, src of <frame> and <iframe>, srcset
//     candidates, <meta http-equiv=refresh>; requisites: <img src>,
//     <script src>, <link rel=stylesheet>, media, ...; rel=canonical); HTML
//     elements only (not SVG/MathML ones), and only those the tree builder
//     keeps (a <frame> outside a <frameset> is dropped, content before an
//     accepted <frameset> is dropped, text of <script>, <style>, <textarea>,
//     <title>, <noscript>, <iframe>, comments, ... is not markup);
//   - the first of several attributes with one name counts;
//   - order: DOM order (content misplaced in a <table> comes before the
//     table, as the tree builder's foster parenting puts it);
//   - the first <base href> in DOM order is the base of all links, even
//     earlier ones; if it does not resolve, the page URL is;
//   - each href/src goes through urlscope.Resolve (whitespace trimmed; entities were
//     decoded by the tokenizer); non-http(s) and invalid links are dropped;
//   - duplicates (after normalization) are merged at their first position;
//     the merged link is followed if one occurrence is (a <frame>/<iframe>
//     occurrence counts as followed), else a requisite if one occurrence
//     is, else NoFollow (every occurrence rel=nofollow);
//   - the first rel=canonical that resolves is Page.Canonical;
//   - <meta name=robots content="nofollow|noindex|none"> anywhere sets
//     Page.NoFollow / Page.NoIndex.
func Extract(base *url.URL, body []byte) Page {
	return ExtractRequisites(base, body, true)
}

// ExtractRequisites is Extract with the page's requisites
// (Link.Requisite) left out, unresolved, unless requisites.
func ExtractRequisites(base *url.URL, body []byte, requisites bool) Page {
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err != nil {
		return finishPage(base, nil, false, false, requisites)
	}
	var items []pageItem
	var noFollow, noIndex bool
	doc.Find(linkSelector).Each(func(_ int, s *goquery.Selection) {
		n := s.Get(0)
		if n.Namespace != "" {
			return
		}
		switch n.Data {
		case "base":
			items = append(items, pageItem{kind: itemBase, val: domAttr(n, "href")})
		case "meta":
			if _, ok := domAttrOK(n, "name"); ok {
				nf, ni := metaRobots(domAttr(n, "name"), domAttr(n, "content"))
				noFollow, noIndex = noFollow || nf, noIndex || ni
			}
		}
		items = elementItems(items, n.Data, func(slot int) (string, bool) { return domAttrOK(n, attrKeys[slot]) })
	})
	return finishPage(base, items, noFollow, noIndex, requisites)
}

// linkSelector selects the elements elementItems reads (and <base>).
const linkSelector = "a[href], area[href], frame[src], iframe[src], base[href], meta, link[href], " +
	"img, source, script[src], audio[src], video, embed[src], track[src], input[src], object[data]"

func domAttr(n *html.Node, key string) string {
	v, _ := domAttrOK(n, key)
	return v
}

// domAttrOK returns the first attribute named key (no namespace) of n, and whether there is one.
func domAttrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}
