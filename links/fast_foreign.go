package links

import (
	"strings"
)

func (p *fastParser) fsTop() *fnode {
	if len(p.fs) == 0 {
		return nil
	}
	return &p.fs[len(p.fs)-1]
}

func isMathTextIP(n *fnode) bool {
	if n.ns != 'm' {
		return false
	}
	switch n.name {
	case "mi", "mo", "mn", "ms", "mtext":
		return true
	}
	return false
}

// inForeign reports whether the current token is handled by the foreign
// content rules (HTML5 §13.2.6).
func (p *fastParser) inForeign(start, text bool) bool {
	n := p.fsTop()
	if n == nil || n.ns == 'h' {
		return false
	}
	if isMathTextIP(n) {
		if start && p.name != "mglyph" && p.name != "malignmark" {
			return false
		}
		if text {
			return false
		}
	}
	if n.ns == 'm' && n.name == "annotation-xml" && start && p.name == "svg" {
		return false
	}
	if n.ip && (start || text) {
		return false
	}
	return true
}

var breakoutTags = map[string]bool{
	"b": true, "big": true, "blockquote": true, "body": true, "br": true, "center": true, "code": true,
	"dd": true, "div": true, "dl": true, "dt": true, "em": true, "embed": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "head": true, "hr": true, "i": true, "img": true,
	"li": true, "listing": true, "menu": true, "meta": true, "nobr": true, "ol": true, "p": true,
	"pre": true, "ruby": true, "s": true, "small": true, "span": true, "strong": true, "strike": true,
	"sub": true, "sup": true, "table": true, "tt": true, "u": true, "ul": true, "var": true,
}

var specialTags = map[string]bool{
	"address": true, "applet": true, "area": true, "article": true, "aside": true, "base": true,
	"basefont": true, "bgsound": true, "blockquote": true, "body": true, "br": true, "button": true,
	"caption": true, "center": true, "col": true, "colgroup": true, "dd": true, "details": true,
	"dir": true, "div": true, "dl": true, "dt": true, "embed": true, "fieldset": true, "figcaption": true,
	"figure": true, "footer": true, "form": true, "frame": true, "frameset": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "head": true, "header": true, "hgroup": true,
	"hr": true, "html": true, "iframe": true, "img": true, "input": true, "keygen": true, "li": true,
	"link": true, "listing": true, "main": true, "marquee": true, "menu": true, "meta": true,
	"nav": true, "noembed": true, "noframes": true, "noscript": true, "object": true, "ol": true,
	"p": true, "param": true, "plaintext": true, "pre": true, "script": true, "section": true,
	"select": true, "source": true, "style": true, "summary": true, "table": true, "tbody": true,
	"td": true, "template": true, "textarea": true, "tfoot": true, "th": true, "thead": true,
	"title": true, "tr": true, "track": true, "ul": true, "wbr": true, "xmp": true,
}

func isVoid(name string) bool {
	switch name {
	case "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "image", "img",
		"input", "keygen", "link", "meta", "param", "source", "track", "wbr":
		return true
	}
	return false
}

// popForeignToBoundary pops foreign elements until the top is an HTML
// element or an integration point (or foreign content is left).
func (p *fastParser) popForeignToBoundary() {
	for len(p.fs) > 0 {
		n := &p.fs[len(p.fs)-1]
		if n.ns == 'h' || n.ip || isMathTextIP(n) {
			return
		}
		p.fs = p.fs[:len(p.fs)-1]
	}
}

// onlyOf reports whether every byte of t is in set (ASCII), like
// len(bytes.TrimLeft(t, set)) == 0 without building the set on every call.
func onlyOf(t []byte, set string) bool {
	for _, c := range t {
		if strings.IndexByte(set, c) < 0 {
			return false
		}
	}
	return true
}
