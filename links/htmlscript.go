package links

import (
	"bytes"
)

// readScript reads script data up to its </script>, through the escape
// states of the HTML5 tokenizer (Tokenizer.readScript, state by state).
func (z *scanner) readScript() {
	defer func() { z.dataEnd = z.pos }()
	var c byte

scriptData:
	if i := bytes.IndexByte(z.b[z.pos:], '<'); i >= 0 {
		z.pos += i + 1
	} else {
		z.toEOF()
		return
	}
	// scriptDataLessThanSign
	c = z.readByte()
	if z.eof {
		return
	}
	switch c {
	case '/':
		goto scriptDataEndTagOpen
	case '!':
		goto scriptDataEscapeStart
	}
	z.pos--
	goto scriptData

scriptDataEndTagOpen:
	if z.readRawEndTag() || z.eof {
		return
	}
	goto scriptData

scriptDataEscapeStart:
	c = z.readByte()
	if z.eof {
		return
	}
	if c == '-' {
		goto scriptDataEscapeStartDash
	}
	z.pos--
	goto scriptData

scriptDataEscapeStartDash:
	c = z.readByte()
	if z.eof {
		return
	}
	if c == '-' {
		goto scriptDataEscapedDashDash
	}
	z.pos--
	goto scriptData

scriptDataEscaped:
	c = z.readByte()
	if z.eof {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDash:
	c = z.readByte()
	if z.eof {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDashDash:
	c = z.readByte()
	if z.eof {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataEscaped

scriptDataEscapedLessThanSign:
	c = z.readByte()
	if z.eof {
		return
	}
	if c == '/' {
		goto scriptDataEscapedEndTagOpen
	}
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
		goto scriptDataDoubleEscapeStart
	}
	z.pos--
	goto scriptData

scriptDataEscapedEndTagOpen:
	if z.readRawEndTag() || z.eof {
		return
	}
	goto scriptDataEscaped

scriptDataDoubleEscapeStart:
	z.pos--
	for i := 0; i < len("script"); i++ {
		c = z.readByte()
		if z.eof {
			return
		}
		if c != "script"[i] && c != "SCRIPT"[i] {
			z.pos--
			goto scriptDataEscaped
		}
	}
	c = z.readByte()
	if z.eof {
		return
	}
	switch c {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		goto scriptDataDoubleEscaped
	}
	z.pos--
	goto scriptDataEscaped

scriptDataDoubleEscaped:
	c = z.readByte()
	if z.eof {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDash:
	c = z.readByte()
	if z.eof {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDashDash:
	c = z.readByte()
	if z.eof {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedLessThanSign:
	c = z.readByte()
	if z.eof {
		return
	}
	if c == '/' {
		goto scriptDataDoubleEscapeEnd
	}
	z.pos--
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapeEnd:
	if z.readRawEndTag() {
		z.pos += len("</script>")
		goto scriptDataEscaped
	}
	if z.eof {
		return
	}
	goto scriptDataDoubleEscaped
}
