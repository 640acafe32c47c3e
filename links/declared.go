package links

import (
	"net/http"
	"net/url"
	"strings"
)

// Attribute slots an element's links are read from. Both extractors fill
// them (Extract from the DOM, ExtractFast from the scanner) and
// hand them to elementItems, so the two agree on what an element declares.
const (
	attrHref = iota
	attrSrc
	attrRel
	attrName
	attrContent
	attrOther // type (input, link), encoding (annotation-xml), or a font color/face/size marker
	attrSrcset
	attrHTTPEquiv
	attrPoster
	attrData
	nAttrs
)

// attrKeys are the attribute names of the slots (attrOther: "type"; the
// fast parser also reads "encoding" and font markers into it).
var attrKeys = [nAttrs]string{"href", "src", "rel", "name", "content", "type", "srcset", "http-equiv", "poster", "data"}

// documentRels are the <link rel> and Link-header rel values that name
// another document, followed like <a href>: the HTML link types and the
// IANA link relations a reader navigates to (HTML 4's navigation rels
// included, as documentation generators such as Sphinx write them).
var documentRels = map[string]bool{
	"alternate": true, "index": true, "next": true, "prev": true, "previous": true, "search": true,
	"contents": true, "toc": true, "help": true, "first": true, "last": true, "up": true,
	"start": true, "begin": true, "end": true, "home": true, "top": true, "author": true,
	"license": true, "copyright": true, "glossary": true, "chapter": true, "section": true,
	"subsection": true, "appendix": true, "bookmark": true, "archives": true, "related": true,
	"sitemap": true, "collection": true, "item": true, "about": true, "edit": true,
	"predecessor-version": true, "successor-version": true, "latest-version": true,
	"memento": true, "original": true, "timegate": true, "timemap": true,
}

// requisiteRels are the rel values whose target a page needs to render:
// fetched only with fetch.requisites (see Link.Requisite).
var requisiteRels = map[string]bool{
	"stylesheet": true, "icon": true, "apple-touch-icon": true, "apple-touch-icon-precomposed": true,
	"mask-icon": true, "preload": true, "modulepreload": true, "manifest": true, "prefetch": true,
}

// relKind classifies a rel attribute (tokens between HTML spaces, any
// case): a requisite token wins ("alternate stylesheet" is a style sheet),
// then a document token; canonical is reported on its own. ok is false
// when the rel names neither (dns-prefetch, preconnect, pingback, ...).
func relKind(rel string) (kind uint8, canonical, ok bool) {
	doc, req, nf := false, false, false
	for f := range fields(rel, false) {
		f = strings.ToLower(f)
		switch {
		case f == "canonical":
			canonical = true
		case f == "nofollow":
			nf = true
		case requisiteRels[f]:
			req = true
		case documentRels[f]:
			doc = true
		}
	}
	switch {
	case req:
		return itemRequisite, canonical, true
	case doc && nf:
		return itemNoFollowLink, canonical, true
	case doc:
		return itemLink, canonical, true
	}
	return 0, canonical, false
}

// elementItems appends the links an HTML element declares to items. attr
// returns an attribute of the element by slot, and whether it is present.
// Rules:
//
//   - <a href>, <area href>: a link (nofollow with rel=nofollow);
//   - <frame src>, <iframe src>: a link;
//   - <link href rel=…>: a link when a rel names a document (relKind:
//     index, next, prev, alternate, search, …), a requisite when it names
//     a style sheet, icon, preload, …; rel=canonical sets Page.Canonical;
//   - srcset of <img> and <source>: every candidate URL is a link;
//   - <meta http-equiv=refresh content="N; url=…">: a link;
//   - requisites: src of <img>, <script>, <source>, <audio>, <video>,
//     <embed>, <track>, <input type=image>; poster of <video>; data of <object>.
func elementItems(items []pageItem, name string, attr func(slot int) (string, bool)) []pageItem {
	add := func(kind uint8, slot int) {
		if v, ok := attr(slot); ok {
			items = append(items, pageItem{kind: kind, val: v})
		}
	}
	srcset := func() {
		if v, ok := attr(attrSrcset); ok {
			for _, u := range srcsetURLs(v) {
				items = append(items, pageItem{kind: itemLink, val: u})
			}
		}
	}
	switch name {
	case "a", "area":
		if v, ok := attr(attrHref); ok {
			kind := uint8(itemLink)
			if rel, _ := attr(attrRel); relNoFollow(rel) {
				kind = itemNoFollowLink
			}
			items = append(items, pageItem{kind: kind, val: v})
		}
	case "frame", "iframe":
		add(itemLink, attrSrc)
	case "link":
		href, ok := attr(attrHref)
		if !ok {
			break
		}
		rel, _ := attr(attrRel)
		kind, canonical, ok := relKind(rel)
		if canonical {
			items = append(items, pageItem{kind: itemCanonical, val: href})
		}
		if ok {
			items = append(items, pageItem{kind: kind, val: href})
		}
	case "img", "image":
		add(itemRequisite, attrSrc)
		srcset()
	case "source":
		add(itemRequisite, attrSrc)
		srcset()
	case "script", "audio", "embed", "track":
		add(itemRequisite, attrSrc)
	case "input":
		if t, _ := attr(attrOther); strings.EqualFold(t, "image") {
			add(itemRequisite, attrSrc)
		}
	case "video":
		add(itemRequisite, attrSrc)
		add(itemRequisite, attrPoster)
	case "object":
		add(itemRequisite, attrData)
	case "meta":
		if eq, _ := attr(attrHTTPEquiv); strings.EqualFold(strings.TrimFunc(eq, isHTMLSpace), "refresh") {
			content, _ := attr(attrContent)
			if u, ok := refreshURL(content); ok {
				items = append(items, pageItem{kind: itemLink, val: u})
			}
		}
	}
	return items
}

// srcsetURLs returns the candidate URLs of a srcset attribute (HTML's
// "parse a srcset attribute": a URL runs to the next space, a comma ending
// it is dropped, descriptors run to the next comma outside parentheses).
func srcsetURLs(s string) []string {
	var urls []string
	i := 0
	for i < len(s) {
		for i < len(s) && (isHTMLSpace(rune(s[i])) || s[i] == ',') {
			i++
		}
		start := i
		for i < len(s) && !isHTMLSpace(rune(s[i])) {
			i++
		}
		u := s[start:i]
		if u == "" {
			break
		}
		if strings.HasSuffix(u, ",") {
			u = strings.TrimRight(u, ",")
		} else {
			// descriptors up to a comma outside parentheses
			depth := 0
			for ; i < len(s); i++ {
				c := s[i]
				if c == '(' {
					depth++
				} else if c == ')' && depth > 0 {
					depth--
				} else if c == ',' && depth == 0 {
					i++
					break
				}
			}
		}
		if u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// refreshURL reads the URL of a <meta http-equiv=refresh> content
// attribute ("5; url=/next", "0;URL='x'", "3, /y"), as HTML's shared
// declarative refresh steps do; ok is false when it names none.
func refreshURL(content string) (string, bool) {
	s := strings.TrimLeft(content, " \t\n\f\r")
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return "", false
	}
	s = strings.TrimLeft(s[i:], " \t\n\f\r")
	if s == "" || (s[0] != ';' && s[0] != ',') {
		return "", false
	}
	s = strings.TrimLeft(s[1:], " \t\n\f\r")
	if len(s) >= 3 && strings.EqualFold(s[:3], "url") {
		if r := strings.TrimLeft(s[3:], " \t\n\f\r"); strings.HasPrefix(r, "=") {
			s = strings.TrimLeft(r[1:], " \t\n\f\r")
		}
	}
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		s = s[1:]
		if j := strings.IndexByte(s, q); j >= 0 {
			s = s[:j]
		}
	}
	if s == "" {
		return "", false
	}
	return s, true
}

// FromHeader reads the HTTP Link headers of a response (RFC 8288:
// `<uri>; rel="next"; …, <uri>; rel=canonical`) with the rel rules of
// <link> (relKind): document rels are links, style sheets, icons and
// preloads requisites, rel=canonical sets Page.Canonical. Targets resolve
// against base (the response's URL). A link with an anchor parameter
// describes another resource and is skipped. At most 1,000 links are read.
func FromHeader(base *url.URL, h http.Header) Page {
	var items []pageItem
	for _, v := range h.Values("Link") {
		items = linkHeaderItems(items, v)
		if len(items) >= maxHeaderLinks {
			items = items[:maxHeaderLinks]
			break
		}
	}
	return finishPage(base, items, false, false, true)
}

const maxHeaderLinks = 1000

// linkHeaderItems appends the items of one Link header value.
func linkHeaderItems(items []pageItem, v string) []pageItem {
	for len(v) > 0 && len(items) < maxHeaderLinks {
		v = strings.TrimLeft(v, " \t,")
		if !strings.HasPrefix(v, "<") {
			// not a link-value: skip to the next comma outside quotes
			v = v[headerSkip(v, 0):]
			continue
		}
		end := strings.IndexByte(v, '>')
		if end < 0 {
			return items
		}
		target := v[1:end]
		next := headerSkip(v, end+1)
		params := v[end+1 : next]
		v = v[next:]
		var rel string
		anchor := false
		for _, p := range splitParams(params) {
			k, val, _ := strings.Cut(p, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch k {
			case "rel":
				if rel == "" {
					rel = val
				}
			case "anchor":
				anchor = val != "" && val != "#"
			}
		}
		if anchor {
			continue
		}
		kind, canonical, ok := relKind(rel)
		if canonical {
			items = append(items, pageItem{kind: itemCanonical, val: target})
		}
		if ok {
			items = append(items, pageItem{kind: kind, val: target})
		}
	}
	return items
}

// headerSkip returns the index of the next comma of v at or after i outside
// double quotes (len(v) if none).
func headerSkip(v string, i int) int {
	quoted := false
	for ; i < len(v); i++ {
		switch v[i] {
		case '"':
			quoted = !quoted
		case '\\':
			if quoted {
				i++
			}
		case ',':
			if !quoted {
				return i
			}
		}
	}
	return len(v)
}

// splitParams splits `; a=b; c="d;e"` at semicolons outside quotes.
func splitParams(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ';':
			if !quoted {
				if p := strings.TrimSpace(s[start:i]); p != "" {
					out = append(out, p)
				}
				start = i + 1
			}
		}
	}
	if p := strings.TrimSpace(s[start:]); p != "" {
		out = append(out, p)
	}
	return out
}

// ExtractCSS reads the url(…) and @import targets of a style sheet as
// requisites (fonts, images, other style sheets). Comments are skipped;
// at most 10,000 are read.
func ExtractCSS(base *url.URL, css []byte) Page {
	var items []pageItem
	s := string(css)
	for i := 0; i < len(s) && len(items) < 10000; {
		switch {
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				i = len(s)
			} else {
				i += end + 4
			}
		case hasPrefixFold(s[i:], "url("):
			j := i + 4
			for j < len(s) && isHTMLSpace(rune(s[j])) {
				j++
			}
			var u string
			if j < len(s) && (s[j] == '"' || s[j] == '\'') {
				q := s[j]
				end := strings.IndexByte(s[j+1:], q)
				if end < 0 {
					return finishPage(base, items, false, false, true)
				}
				u, i = s[j+1:j+1+end], j+2+end
			} else {
				end := strings.IndexByte(s[j:], ')')
				if end < 0 {
					return finishPage(base, items, false, false, true)
				}
				u, i = strings.TrimRight(s[j:j+end], " \t\n\r\f"), j+end+1
			}
			if u != "" && !hasPrefixFold(u, "data:") {
				items = append(items, pageItem{kind: itemRequisite, val: u})
			}
		case hasPrefixFold(s[i:], "@import"):
			j := i + 7
			for j < len(s) && isHTMLSpace(rune(s[j])) {
				j++
			}
			i = j
			if j < len(s) && (s[j] == '"' || s[j] == '\'') {
				q := s[j]
				end := strings.IndexByte(s[j+1:], q)
				if end < 0 {
					return finishPage(base, items, false, false, true)
				}
				if u := s[j+1 : j+1+end]; u != "" {
					items = append(items, pageItem{kind: itemRequisite, val: u})
				}
				i = j + 2 + end
			}
		default:
			i++
		}
	}
	return finishPage(base, items, false, false, true)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// Merge adds the links of q (another source of the same page: its Link
// headers) after p's, merging duplicates as one page's occurrences are
// merged; p's canonical wins over q's.
func (p *Page) Merge(q Page) {
	if p.Canonical == "" {
		p.Canonical = q.Canonical
	}
	p.Dropped.Scheme += q.Dropped.Scheme
	p.Dropped.TooLong += q.Dropped.TooLong
	p.Dropped.BadHost += q.Dropped.BadHost
	p.Dropped.BadPort += q.Dropped.BadPort
	p.Dropped.Invalid += q.Dropped.Invalid
	if len(q.Links) == 0 {
		return
	}
	idx := make(map[string]int, len(p.Links))
	for i, l := range p.Links {
		idx[l.URL] = i
	}
	for _, l := range q.Links {
		i, ok := idx[l.URL]
		if !ok {
			idx[l.URL] = len(p.Links)
			p.Links = append(p.Links, l)
			continue
		}
		a := &p.Links[i]
		followed := (!a.NoFollow && !a.Requisite) || (!l.NoFollow && !l.Requisite)
		req := a.Requisite || l.Requisite
		a.NoFollow = !followed && !req
		a.Requisite = !followed && req
	}
}
