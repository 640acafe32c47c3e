package links

import (
	"bytes"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// scanner splits an HTML document held in memory into the tokens
// golang.org/x/net/html's Tokenizer returns for it: the same token types
// and the same raw boundaries (so the same tags, with the same names and
// attributes), with the same treatment of comments (<!-->, --!>), doctypes,
// CDATA sections (when allowCDATA), raw text and RCDATA (script with its
// escape states, style, textarea, title, xmp, iframe, noembed, noframes,
// noscript), <plaintext>, a tag cut by the end of the input (an error
// token: the tag and the rest are dropped). It is a port of the
// Tokenizer's state machine that reads the slice directly, skips runs of
// plain bytes with bytes.IndexByte, keeps attributes as offsets and
// decodes only the values asked for. TestScannerTokens and FuzzScanTokens
// compare it with the Tokenizer token by token.
type scanner struct {
	b     []byte
	start int  // start of the current token
	pos   int  // end of the current token (the next byte to read)
	eof   bool // a read past the end happened: the next token is an error token
	tt    html.TokenType

	dataStart, dataEnd int // the tag name of a tag token, the text of a text token

	rawTag     string // the raw-text element whose end tag ends the next token ("" none)
	cdata      bool   // the current text token is a CDATA section
	allowCDATA bool   // <![CDATA[ starts a CDATA section (foreign content)

	attrs    []attrSpan // the current start tag's attributes with a non-empty name, in order (duplicates kept)
	attrsBuf [attrsInline]attrSpan
	nameBuf  []byte // scratch for tag names
	valueBuf []byte // scratch for decoding attribute values
}

// attrSpan holds the offsets of an attribute's name [k0,k1) and raw value [v0,v1).
type attrSpan struct{ k0, k1, v0, v1 int }

func newScanner(b []byte) *scanner {
	z := new(scanner)
	z.init(b)
	return z
}

// attrsInline is how many attributes a scanner holds without allocating.
const attrsInline = 8

func (z *scanner) init(b []byte) {
	*z = scanner{b: b}
	z.attrs = z.attrsBuf[:0]
}

// raw returns the bytes of the current token.
func (z *scanner) raw() []byte { return z.b[z.start:z.pos] }

// readByte returns the next byte; past the end it sets eof and returns 0.
func (z *scanner) readByte() byte {
	if z.pos >= len(z.b) {
		z.eof = true
		return 0
	}
	c := z.b[z.pos]
	z.pos++
	return c
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f'
}

func (z *scanner) skipWhiteSpace() {
	if z.eof {
		return
	}
	for z.pos < len(z.b) {
		if !isSpaceByte(z.b[z.pos]) {
			return
		}
		z.pos++
	}
	z.eof = true
}

// toEOF makes the rest of the input part of the current token.
func (z *scanner) toEOF() {
	z.pos = len(z.b)
	z.eof = true
}

// next scans the next token and returns its type (Tokenizer.Next).
func (z *scanner) next() html.TokenType {
	z.start = z.pos
	z.dataStart, z.dataEnd = z.pos, z.pos
	z.cdata = false
	if z.eof {
		z.tt = html.ErrorToken
		return z.tt
	}
	if z.rawTag != "" {
		if z.rawTag == "plaintext" {
			z.toEOF()
			z.dataEnd = z.pos
		} else {
			z.readRawOrRCDATA()
		}
		if z.dataEnd > z.dataStart {
			z.tt = html.TextToken
			return z.tt
		}
	}
	for {
		i := bytes.IndexByte(z.b[z.pos:], '<')
		if i < 0 {
			z.toEOF()
			break
		}
		z.pos += i + 1
		if z.pos >= len(z.b) {
			z.eof = true
			break
		}
		c := z.b[z.pos]
		z.pos++
		var tt html.TokenType
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			tt = html.StartTagToken
		case c == '/':
			tt = html.EndTagToken
		case c == '!' || c == '?':
			tt = html.CommentToken
		default:
			z.pos-- // reconsume
			continue
		}
		// Text before the tag is a token of its own.
		if x := z.pos - len("<a"); z.start < x {
			z.pos, z.dataEnd = x, x
			z.tt = html.TextToken
			return z.tt
		}
		switch tt {
		case html.StartTagToken:
			z.tt = z.readStartTag()
			return z.tt
		case html.EndTagToken:
			c = z.readByte()
			if z.eof {
				// "</" at the end: text
				z.dataEnd = z.pos
				z.tt = html.TextToken
				return z.tt
			}
			if c == '>' { // "</>": an empty comment
				z.tt = html.CommentToken
				return z.tt
			}
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
				z.readTag(false)
				if z.eof {
					z.tt = html.ErrorToken
				} else {
					z.tt = html.EndTagToken
				}
				return z.tt
			}
			z.pos--
			z.readUntilCloseAngle()
			z.tt = html.CommentToken
			return z.tt
		default: // "<!" or "<?"
			if c == '!' {
				z.tt = z.readMarkupDeclaration()
				return z.tt
			}
			z.pos--
			z.readUntilCloseAngle()
			z.tt = html.CommentToken
			return z.tt
		}
	}
	if z.start < z.pos {
		z.dataEnd = z.pos
		z.tt = html.TextToken
		return z.tt
	}
	z.tt = html.ErrorToken
	return z.tt
}

// readUntilCloseAngle reads up to and including the next '>' (or to the end).
func (z *scanner) readUntilCloseAngle() {
	if i := bytes.IndexByte(z.b[z.pos:], '>'); i >= 0 {
		z.pos += i + 1
		return
	}
	z.toEOF()
}

// readMarkupDeclaration reads a token starting with "<!": a comment, a
// doctype or a bogus comment (both end at the next '>'), or a CDATA section
// when allowed. Comments and doctypes are not text; only their end matters.
func (z *scanner) readMarkupDeclaration() html.TokenType {
	if len(z.b)-z.pos < 2 {
		z.toEOF()
		return html.CommentToken
	}
	if z.b[z.pos] == '-' && z.b[z.pos+1] == '-' {
		z.pos += 2
		z.readComment()
		return html.CommentToken
	}
	if z.allowCDATA && bytes.HasPrefix(z.b[z.pos:], []byte("[CDATA[")) {
		z.pos += len("[CDATA[")
		z.dataStart = z.pos
		if i := bytes.Index(z.b[z.pos:], []byte("]]>")); i >= 0 {
			z.dataEnd = z.pos + i
			z.pos += i + len("]]>")
		} else {
			z.toEOF()
			z.dataEnd = z.pos
		}
		z.cdata = true
		return html.TextToken
	}
	tt := html.CommentToken // a bogus comment
	if len(z.b)-z.pos >= len("doctype") && asciiEqualFold(z.b[z.pos:z.pos+len("doctype")], "doctype") {
		tt = html.DoctypeToken
	}
	z.readUntilCloseAngle()
	return tt
}

// readComment reads the rest of a comment after "<!--": up to the first
// '>' that follows "--" (the opening dashes count for "<!-->" and
// "<!--->") or a "--!" inside the comment.
func (z *scanner) readComment() {
	s := z.pos
	for j := s; ; {
		i := bytes.IndexByte(z.b[j:], '>')
		if i < 0 {
			z.toEOF()
			return
		}
		j += i
		if z.b[j-1] == '-' && z.b[j-2] == '-' || j-3 >= s && z.b[j-1] == '!' && z.b[j-2] == '-' && z.b[j-3] == '-' {
			z.pos = j + 1
			return
		}
		j++
	}
}

// readRawOrRCDATA reads raw text up to the end tag of z.rawTag.
func (z *scanner) readRawOrRCDATA() {
	if z.rawTag == "script" {
		z.readScript()
		z.rawTag = ""
		return
	}
	for {
		i := bytes.IndexByte(z.b[z.pos:], '<')
		if i < 0 {
			z.toEOF()
			break
		}
		z.pos += i + 1
		c := z.readByte()
		if z.eof {
			break
		}
		if c != '/' {
			z.pos--
			continue
		}
		if z.readRawEndTag() || z.eof {
			break
		}
	}
	z.dataEnd = z.pos
	z.rawTag = ""
}

// readRawEndTag reads "foo" and a terminator after "</", where foo is
// z.rawTag (any case): on a match it backs up to the '<' and returns true.
func (z *scanner) readRawEndTag() bool {
	for i := 0; i < len(z.rawTag); i++ {
		c := z.readByte()
		if z.eof {
			return false
		}
		if c != z.rawTag[i] && c != z.rawTag[i]-('a'-'A') {
			z.pos--
			return false
		}
	}
	c := z.readByte()
	if z.eof {
		return false
	}
	switch c {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		z.pos -= 3 + len(z.rawTag)
		return true
	}
	z.pos--
	return false
}

// rawTextTags are the elements whose start tag makes the next token raw
// text or RCDATA.
var rawTextTags = [...]string{"iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp"}

// readStartTag reads a start tag after "<a" (a: any ASCII letter).
func (z *scanner) readStartTag() html.TokenType {
	z.readTag(true)
	if z.eof {
		return html.ErrorToken
	}
	name := z.b[z.dataStart:z.dataEnd]
	if n := len(name); n >= 3 && n <= 9 {
		for _, t := range rawTextTags {
			if len(t) == n && asciiEqualFold(name, t) {
				z.rawTag = t
				break
			}
		}
	}
	// Self-closing: '/' just before the '>', unless it is the last byte of
	// the last kept attribute's value (<a href=x/>).
	if z.b[z.pos-2] == '/' {
		if v1, ok := z.lastKeptValueEnd(); !ok || z.pos-2 != v1-1 {
			return html.SelfClosingTagToken
		}
	}
	return html.StartTagToken
}

// lastKeptValueEnd returns the end of the value of the last attribute the
// Tokenizer keeps (the last whose name, lower-cased, is not a repeat).
func (z *scanner) lastKeptValueEnd() (int, bool) {
	n := len(z.attrs)
	if n == 0 {
		return 0, false
	}
	if n > 64 { // many attributes: a set of names instead of pairwise comparisons
		seen := make(map[string]bool, n)
		last := -1
		for i, a := range z.attrs {
			k := []byte(string(z.b[a.k0:a.k1]))
			for j, c := range k {
				if 'A' <= c && c <= 'Z' {
					k[j] = c + 'a' - 'A'
				}
			}
			if !seen[string(k)] {
				seen[string(k)] = true
				last = i
			}
		}
		return z.attrs[last].v1, true
	}
outer:
	for i := n - 1; i >= 0; i-- {
		k := z.b[z.attrs[i].k0:z.attrs[i].k1]
		for _, a := range z.attrs[:i] {
			if bytesEqualFold(k, z.b[a.k0:a.k1]) {
				continue outer
			}
		}
		return z.attrs[i].v1, true
	}
	return 0, false // unreachable: the first attribute is always kept
}

// readTag reads a tag's name and attributes after "<a" or "</a".
// Attributes with an empty name are not kept (nor are any of an end tag).
func (z *scanner) readTag(saveAttr bool) {
	z.attrs = z.attrs[:0]
	z.readTagName()
	if z.skipWhiteSpace(); z.eof {
		return
	}
	for {
		c := z.readByte()
		if z.eof || c == '>' {
			break
		}
		z.pos--
		var a attrSpan
		a.k0, a.k1 = z.readTagAttrKey()
		a.v0, a.v1 = z.readTagAttrVal()
		if saveAttr && a.k0 != a.k1 {
			z.attrs = append(z.attrs, a)
		}
		if z.skipWhiteSpace(); z.eof {
			break
		}
	}
}

// readTagName sets the data span to the tag name; the first byte of the
// name is already read.
func (z *scanner) readTagName() {
	z.dataStart = z.pos - 1
	for i := z.pos; i < len(z.b); i++ {
		switch z.b[i] {
		case ' ', '\n', '\r', '\t', '\f':
			z.dataEnd, z.pos = i, i+1
			return
		case '/', '>':
			z.dataEnd, z.pos = i, i
			return
		}
	}
	z.toEOF()
	z.dataEnd = z.pos
}

func (z *scanner) readTagAttrKey() (k0, k1 int) {
	k0 = z.pos
	for i := z.pos; i < len(z.b); i++ {
		switch z.b[i] {
		case '=':
			if i == k0 {
				continue // a '=' that starts a name is part of it
			}
			fallthrough
		case ' ', '\n', '\r', '\t', '\f', '/', '>':
			z.pos = i
			return k0, i
		}
	}
	z.toEOF()
	return k0, z.pos
}

func (z *scanner) readTagAttrVal() (v0, v1 int) {
	v0, v1 = z.pos, z.pos
	if z.skipWhiteSpace(); z.eof {
		return
	}
	c := z.readByte()
	if z.eof {
		return
	}
	if c == '/' {
		return
	}
	if c != '=' {
		z.pos--
		return
	}
	if z.skipWhiteSpace(); z.eof {
		return
	}
	quote := z.readByte()
	if z.eof {
		return
	}
	switch quote {
	case '>':
		z.pos--
		return
	case '\'', '"':
		v0 = z.pos
		if i := bytes.IndexByte(z.b[z.pos:], quote); i >= 0 {
			z.pos += i + 1
			return v0, z.pos - 1
		}
		z.toEOF()
		return v0, z.pos
	default:
		v0 = z.pos - 1
		for i := z.pos; i < len(z.b); i++ {
			switch z.b[i] {
			case ' ', '\n', '\r', '\t', '\f':
				z.pos = i + 1
				return v0, i
			case '>':
				z.pos = i
				return v0, i
			}
		}
		z.toEOF()
		return v0, z.pos
	}
}

// tagName returns the current tag's name as Tokenizer.TagName gives it
// (lower-cased, NUL as U+FFFD), interned when it is a known atom.
func (z *scanner) tagName() string {
	name := z.b[z.dataStart:z.dataEnd]
	buf := z.nameBuf[:0]
	if bytes.IndexByte(name, 0) >= 0 {
		buf = append(buf, bytes.ReplaceAll(name, []byte{0}, []byte("\ufffd"))...)
	} else {
		buf = append(buf, name...)
	}
	for i, c := range buf {
		if 'A' <= c && c <= 'Z' {
			buf[i] = c + 'a' - 'A'
		}
	}
	z.nameBuf = buf
	return tagString(buf)
}

// attrKeyIs reports whether attribute a's name, lower-cased, is key (lower-case ASCII).
func (z *scanner) attrKeyIs(a attrSpan, key string) bool {
	return asciiEqualFold(z.b[a.k0:a.k1], key)
}

// attrValue returns attribute a's value as Tokenizer.TagAttr gives it (NUL
// as U+FFFD, CR LF and CR as LF, character references decoded as in an
// attribute value). ok is false when the value has a named character
// reference this decoder does not know: then ask the Tokenizer.
func (z *scanner) attrValue(a attrSpan) (v string, ok bool) {
	raw := z.b[a.v0:a.v1]
	if !hasAttrSpecial(raw) {
		return string(raw), true
	}
	buf := z.valueBuf[:0]
	for _, c := range raw {
		if c == 0 {
			buf = append(buf, "\ufffd"...)
		} else {
			buf = append(buf, c)
		}
	}
	buf = convertNewlines(buf)
	out, ok := unescapeAttr(buf)
	z.valueBuf = buf[:0]
	if !ok {
		return "", false
	}
	return out, true
}

// wsText returns bytes with the same whitespace classes (all of
// " \t\r\n\f", all of those or NUL) as the current text token's text as
// the fast parser reads it: the raw token, or Tokenizer.Text when the raw
// token has a '&' or a NUL (entities decoded; NUL as U+FFFD in CDATA).
func (z *scanner) wsText() []byte {
	raw := z.raw()
	amp := bytes.IndexByte(raw, '&') >= 0
	if !amp && (!z.cdata || bytes.IndexByte(raw, 0) < 0) {
		return raw // Text would only convert newlines (and keep NULs): same classes
	}
	if !z.cdata {
		// The first byte that is not whitespace comes before any
		// reference: unless it is '&' or NUL, it is in the text as is.
		for _, c := range raw {
			if isSpaceByte(c) {
				continue
			}
			if c != '&' && c != 0 {
				return raw
			}
			break
		}
	}
	data := z.b[z.dataStart:z.dataEnd]
	if z.cdata {
		data = bytes.ReplaceAll(data, []byte{0}, []byte("\ufffd"))
	}
	return []byte(html.UnescapeString(string(data)))
}

func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func bytesEqualFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i, c := range a {
		d := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// tagString interns a lower-cased tag name that is a known atom.
func tagString(b []byte) string {
	if a := atom.Lookup(b); a != 0 {
		return a.String()
	}
	return string(b)
}
