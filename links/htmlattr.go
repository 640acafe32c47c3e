package links

import (
	"bytes"
	"unicode/utf8"
)

func hasAttrSpecial(b []byte) bool {
	for _, c := range b {
		if c == '&' || c == 0 || c == '\r' {
			return true
		}
	}
	return false
}

// convertNewlines converts "\r\n" and "\r" to "\n" in place.
func convertNewlines(s []byte) []byte {
	j := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' {
			c = '\n'
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
		}
		s[j] = c
		j++
	}
	return s[:j]
}

// unescapeAttr decodes the character references of an attribute value as
// the Tokenizer does (numeric ones, and named ones with the rules for
// attributes: no decoding of a name without ';' followed by '='). It knows
// the names amp, lt, gt, quot, nbsp (with or without ';') and apos; and any
// name followed by '=' without ';'; for any other name ok is false.
func unescapeAttr(b []byte) (s string, ok bool) {
	amp := bytes.IndexByte(b, '&')
	if amp < 0 {
		return string(b), true
	}
	out := make([]byte, 0, len(b))
	out = append(out, b[:amp]...)
	for src := amp; src < len(b); {
		c := b[src]
		if c != '&' {
			out = append(out, c)
			src++
			continue
		}
		r, n, known := attrEntity(b[src:])
		if !known {
			return "", false
		}
		if n == 1 && r == '&' {
			out = append(out, '&')
		} else {
			out = utf8.AppendRune(out, r)
		}
		src += n
	}
	return string(out), true
}

// attrEntity decodes the character reference at the start of s (s[0] ==
// '&') in an attribute value: the rune and the bytes consumed ('&', 1: not
// a reference); known is false for a named reference it cannot decide.
func attrEntity(s []byte) (r rune, n int, known bool) {
	i := 1
	if len(s) <= 1 {
		return '&', 1, true
	}
	if s[i] == '#' {
		if len(s) <= 2 {
			return '&', 1, true
		}
		i++
		c := s[i]
		hex := false
		if c == 'x' || c == 'X' {
			hex = true
			i++
		}
		i0 := i
		x := rune(0)
		for i < len(s) {
			c = s[i]
			var d, mult rune
			if hex {
				mult = 16
				switch {
				case '0' <= c && c <= '9':
					d = rune(c) - '0'
				case 'a' <= c && c <= 'f':
					d = rune(c) - 'a' + 10
				case 'A' <= c && c <= 'F':
					d = rune(c) - 'A' + 10
				default:
					goto done
				}
			} else {
				mult = 10
				if '0' <= c && c <= '9' {
					d = rune(c) - '0'
				} else {
					goto done
				}
			}
			if x <= 0x10FFFF {
				x = mult*x + d
			}
			i++
		}
	done:
		if i == i0 {
			return '&', 1, true
		}
		if i < len(s) && s[i] == ';' {
			i++
		}
		switch {
		case 0x80 <= x && x <= 0x9F:
			x = win1252[x-0x80]
		case x == 0 || 0xD800 <= x && x <= 0xDFFF || x > 0x10FFFF:
			x = '\uFFFD'
		}
		return x, i, true
	}
	for i < len(s) {
		c := s[i]
		i++
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if c != ';' {
			i--
		}
		break
	}
	name := s[1:i]
	if len(name) == 0 {
		return '&', 1, true
	}
	semi := name[len(name)-1] == ';'
	if !semi && len(s) > i && s[i] == '=' {
		return '&', 1, true
	}
	switch string(name) {
	case "amp;", "amp":
		return '&', i, true
	case "lt;", "lt":
		return '<', i, true
	case "gt;", "gt":
		return '>', i, true
	case "quot;", "quot":
		return '"', i, true
	case "nbsp;", "nbsp":
		return '\u00a0', i, true
	case "apos;":
		return '\'', i, true
	}
	return 0, 0, false
}

// win1252 replaces numeric references to 0x80..0x9F (HTML5).
var win1252 = [32]rune{
	'\u20AC', '\u0081', '\u201A', '\u0192', '\u201E', '\u2026', '\u2020', '\u2021',
	'\u02C6', '\u2030', '\u0160', '\u2039', '\u0152', '\u008D', '\u017D', '\u008F',
	'\u0090', '\u2018', '\u2019', '\u201C', '\u201D', '\u2022', '\u2013', '\u2014',
	'\u02DC', '\u2122', '\u0161', '\u203A', '\u0153', '\u009D', '\u017E', '\u0178',
}
