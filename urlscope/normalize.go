package urlscope

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// MaxURLLength is the longest normalized URL Normalize and Resolve accept.
const MaxURLLength = 2048

// Errors of Normalize and Resolve; test them with errors.Is.
var (
	// ErrScheme: the URL is not http or https (javascript:, mailto:, data:, tel:, ftp:, ...).
	ErrScheme = errors.New("fetch: URL scheme is not http or https")
	// ErrTooLong: the normalized URL is longer than MaxURLLength.
	ErrTooLong = errors.New("fetch: URL longer than 2048 bytes")
	// ErrHost: the host is missing or not a DNS name (control characters,
	// an empty label as in "a..b", a label over 63 octets or starting or
	// ending with "-", a name over 253 octets, failed IDNA) nor an IP literal.
	ErrHost = errors.New("fetch: invalid URL host")
	// ErrPort: the port is not a number in 1..65535.
	ErrPort = errors.New("fetch: invalid URL port")
	// ErrRelative: a relative reference without a usable base URL.
	ErrRelative = errors.New("fetch: relative URL without an http(s) base")
)

// idnaProfile maps internationalized host names to punycode the way browsers
// do (UTS 46 non-transitional, no STD3 rules so "_" stays valid, Bidi and
// joiner checks on).
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.StrictDomainName(false),
	idna.CheckHyphens(false),
	idna.CheckJoiners(true),
	idna.BidiRule(),
)

// Normalize returns the canonical form of an absolute http or https URL, used
// for de-duplication (frontier.Fingerprint) and for fetching:
//
//   - surrounding spaces and control characters trimmed, tabs and newlines
//     removed anywhere, "\" read as "/" before the query (as browsers do);
//   - scheme and host lower-cased; internationalized hosts converted to
//     punycode (IDNA); IPv6 literals kept in brackets, in RFC 5952 form;
//   - userinfo ("user:pass@") dropped: credentials never enter the frontier;
//   - default port (:80 for http, :443 for https) and an empty port dropped,
//     leading zeros of a port removed;
//   - percent-encoding normalized: hex digits upper-cased, escapes of
//     unreserved characters (A-Z a-z 0-9 - . _ ~) decoded, and every byte
//     outside RFC 3986's allowed set (spaces, controls, non-ASCII, "|", ...)
//     encoded; a "%" not followed by two hex digits becomes "%25";
//   - dot segments removed (after decoding, so "%2E%2E" counts), empty path
//     -> "/";
//   - canonicalization (SetCanonical, scope.canonical): the session-id and
//     tracking parameters of the strip list removed from the query and from
//     path segments (";jsessionid=..."), empty parameters ("a=1&&b=2")
//     dropped, and the query parameters sorted by name (a stable sort:
//     repeated names keep their order); a query left empty and "?" alone
//     dropped; fragment dropped.
//
// Errors: ErrScheme (not http/https or no scheme), ErrHost, ErrPort,
// ErrTooLong (longer than MaxURLLength after normalization). Normalize is
// idempotent and never panics.
func Normalize(raw string) (string, error) {
	ref, err := splitRef(raw, "")
	if err != nil {
		return "", fmt.Errorf("normalize %s: %w", quoteShort(raw), err)
	}
	if ref.scheme == "" {
		return "", fmt.Errorf("normalize %s: %w", quoteShort(raw), ErrScheme)
	}
	s, err := assemble(ref.scheme, ref.auth, ref.path, ref.query, ref.hasQuery)
	if err != nil {
		return "", fmt.Errorf("normalize %s: %w", quoteShort(raw), err)
	}
	return s, nil
}

// Resolve resolves the reference ref (an href as found in a page, already
// HTML-unescaped) against base and normalizes the result. Surrounding
// whitespace is trimmed; an empty ref or a fragment-only ref yields the base
// itself. References with another scheme (javascript:, mailto:, data:, tel:,
// ...) return ErrScheme. base must be an absolute http(s) URL unless ref is
// absolute. The returned errors are the bare sentinels of Normalize (no
// wrapping: Resolve is on the link-extraction hot path).
func Resolve(base *url.URL, ref string) (string, error) {
	var b Base
	if base != nil {
		var err error
		if b, err = NewBase(base.String()); err != nil {
			b = Base{}
		}
	}
	return b.Resolve(ref)
}

// Base is a normalized base URL split into parts, made once and reused for
// every link of a page (the function Resolve splits its base at each call).
// The zero Base has no URL: it resolves absolute references only.
type Base struct {
	scheme, auth, path, query string // scheme == "": no usable base
	hasQuery                  bool
}

// NewBase normalizes raw (as Normalize) and splits it into a Base.
func NewBase(raw string) (Base, error) {
	n, err := Normalize(raw)
	if err != nil {
		return Base{}, err
	}
	r, err := splitRef(n, "")
	if err != nil {
		return Base{}, err
	}
	return Base{scheme: r.scheme, auth: r.auth, path: r.path, query: r.query, hasQuery: r.hasQuery}, nil
}

// String returns the base URL (normalized), "" when there is none.
func (b Base) String() string {
	if b.scheme == "" {
		return ""
	}
	s := b.scheme + "://" + b.auth + b.path
	if b.hasQuery {
		s += "?" + b.query
	}
	return s
}

// Resolve resolves the reference raw against b and normalizes the result,
// as the function Resolve does: RFC 3986 §5.2.2 with the browsers'
// leniencies of splitRef.
func (b Base) Resolve(raw string) (string, error) {
	r, err := splitRef(raw, b.scheme)
	if err != nil {
		return "", err
	}
	if r.scheme != "" { // absolute
		return assemble(r.scheme, r.auth, r.path, r.query, r.hasQuery)
	}
	if b.scheme == "" {
		return "", ErrRelative
	}
	if r.hasAuth {
		return assemble(b.scheme, r.auth, r.path, r.query, r.hasQuery)
	}
	path, query, hasQuery := r.path, r.query, r.hasQuery
	switch {
	case path == "":
		path = b.path
		if !hasQuery {
			query, hasQuery = b.query, b.hasQuery
		}
	case path[0] == '/':
	default:
		if i := strings.LastIndexByte(b.path, '/'); i >= 0 {
			path = b.path[:i+1] + path
		} else {
			path = "/" + path
		}
	}
	return assemble(b.scheme, b.auth, path, query, hasQuery)
}

// refParts is a reference split into its components (fragment dropped).
type refParts struct {
	scheme   string // lower-cased; "" for a relative reference
	hasAuth  bool
	auth     string
	path     string
	query    string
	hasQuery bool
}

// splitRef splits a URL reference. baseScheme is the scheme of the base the
// reference will be resolved against ("" when none): like browsers, "http:foo"
// against an http base is relative.
func splitRef(s, baseScheme string) (refParts, error) {
	var r refParts
	s = cleanInput(s)
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	if n := schemeLen(s); n > 0 {
		scheme := strings.ToLower(s[:n])
		if scheme != "http" && scheme != "https" {
			return r, ErrScheme
		}
		s = s[n+1:]
		if scheme == baseScheme && !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, `\`) {
			// relative reference in the base's scheme
		} else {
			r.scheme = scheme
		}
	}
	rest := s
	if i := strings.IndexByte(s, '?'); i >= 0 {
		rest, r.query, r.hasQuery = s[:i], s[i+1:], true
	}
	if strings.IndexByte(rest, '\\') >= 0 {
		rest = strings.ReplaceAll(rest, `\`, "/")
	}
	if r.scheme != "" || strings.HasPrefix(rest, "//") {
		rest = strings.TrimLeft(rest, "/")
		r.hasAuth = true
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			i = len(rest)
		}
		r.auth, rest = rest[:i], rest[i:]
	}
	r.path = rest
	return r, nil
}

// cleanInput trims C0 controls and spaces at both ends and removes tabs and
// newlines everywhere (WHATWG URL parsing).
func cleanInput(s string) string {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	s = s[i:j]
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
	}
	return s
}

// schemeLen returns the length of s's scheme (before ":"), 0 if it has none.
func schemeLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i
		default:
			return 0
		}
	}
	return 0
}

// assemble builds the normalized URL from its parts.
func assemble(scheme, auth, path, query string, hasQuery bool) (string, error) {
	host, err := normalizeAuthority(scheme, auth)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(len(scheme) + 3 + len(host) + len(path) + len(query) + 8)
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(host)
	start := b.Len()
	if path == "" || path[0] != '/' {
		b.WriteByte('/')
	}
	appendPct(&b, path, pathChar)
	rules := canonical.Load()
	if p := b.String()[start:]; needsDotRemoval(p) || strings.IndexByte(p, ';') >= 0 {
		q := p
		if needsDotRemoval(q) {
			q = removeDotSegments(q)
		}
		if c := rules.canonPath(q); c != q {
			q = c
			if needsDotRemoval(q) { // "/.;jsessionid=1/x" left a dot segment
				q = removeDotSegments(q)
			}
		}
		if q != p {
			s := b.String()[:start] + q
			b.Reset()
			b.WriteString(s)
		}
	}
	if hasQuery && query != "" {
		var qb strings.Builder
		qb.Grow(len(query) + 8)
		appendPct(&qb, query, queryChar)
		if q := rules.canonQuery(qb.String()); q != "" {
			b.WriteByte('?')
			b.WriteString(q)
		}
	}
	if b.Len() > MaxURLLength {
		return "", ErrTooLong
	}
	return b.String(), nil
}

// normalizeAuthority returns host[:port], normalized, without userinfo.
func normalizeAuthority(scheme, auth string) (string, error) {
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		auth = auth[i+1:]
	}
	host, port := auth, ""
	if strings.HasPrefix(auth, "[") {
		i := strings.IndexByte(auth, ']')
		if i < 0 {
			return "", ErrHost
		}
		host, port = auth[:i+1], auth[i+1:]
		if port != "" {
			if port[0] != ':' {
				return "", ErrHost
			}
			port = port[1:]
		}
	} else if i := strings.IndexByte(auth, ':'); i >= 0 {
		host, port = auth[:i], auth[i+1:]
	}
	h, err := normalizeHost(host)
	if err != nil {
		return "", err
	}
	p, err := normalizePort(port)
	if err != nil {
		return "", err
	}
	if p == "" || (scheme == "http" && p == "80") || (scheme == "https" && p == "443") {
		return h, nil
	}
	return h + ":" + p, nil
}

func normalizePort(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return "", ErrPort
		}
	}
	p = strings.TrimLeft(p, "0")
	if p == "" || len(p) > 5 || (len(p) == 5 && p > "65535") {
		return "", ErrPort // outside 1..65535: port 0 names no server
	}
	return p, nil
}

// normalizeHost lower-cases a host, decodes percent-escapes, converts IDNs to
// punycode and checks the characters ([a-z0-9._-] for names).
func normalizeHost(h string) (string, error) {
	if h == "" {
		return "", ErrHost
	}
	if h[0] == '[' {
		if len(h) < 3 || h[len(h)-1] != ']' {
			return "", ErrHost
		}
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", ErrHost
		}
		return "[" + a.String() + "]", nil
	}
	if strings.IndexByte(h, '%') >= 0 {
		d, err := url.PathUnescape(h)
		if err != nil {
			return "", ErrHost
		}
		h = d
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		if !utf8.ValidString(h) {
			return "", ErrHost
		}
		a, err := idnaProfile.ToASCII(h)
		if err != nil {
			return "", ErrHost
		}
		h = a
	}
	h = strings.ToLower(h)
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return "", ErrHost
		}
	}
	h = strings.TrimSuffix(h, ".") // the root: "example.com." is example.com
	if !dnsName(h) {
		return "", ErrHost
	}
	return h, nil
}

// dnsName reports whether h (lower case, [a-z0-9._-]) is a name DNS can
// hold (RFC 1123 host names, with "_" allowed as browsers do): 1 to 253
// octets, labels of 1 to 63 octets that neither start nor end with "-",
// and "xn--" labels valid punycode (IDNA).
func dnsName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for len(h) > 0 {
		label := h
		if i := strings.IndexByte(h, '.'); i >= 0 {
			label, h = h[:i], h[i+1:]
			if h == "" {
				return false // "a..": an empty last label
			}
		} else {
			h = ""
		}
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		if strings.HasPrefix(label, "xn--") {
			if _, err := idnaProfile.ToUnicode(label); err != nil {
				return false
			}
		}
	}
	return true
}

// byte classes for percent-encoding (RFC 3986).
const (
	unreservedChar = 1 << iota // A-Z a-z 0-9 - . _ ~
	pathChar                   // pchar and "/": unreserved, sub-delims, ":" "@" "/"
	queryChar                  // pathChar and "?"
)

var charClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-._~", b) >= 0 {
			t[c] |= unreservedChar | pathChar | queryChar
		}
		if strings.IndexByte("!$&'()*+,;=:@/", b) >= 0 {
			t[c] |= pathChar | queryChar
		}
		if b == '?' {
			t[c] |= queryChar
		}
	}
	return t
}()

const upperHex = "0123456789ABCDEF"

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// appendPct writes s with normalized percent-encoding: valid escapes of
// unreserved bytes decoded, other escapes upper-cased, "%" without two hex
// digits encoded as "%25", bytes outside class encoded.
func appendPct(b *strings.Builder, s string, class uint8) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				v := hi<<4 | lo
				if charClass[v]&unreservedChar != 0 {
					b.WriteByte(v)
				} else {
					b.WriteByte('%')
					b.WriteByte(upperHex[v>>4])
					b.WriteByte(upperHex[v&15])
				}
				i += 2
				continue
			}
		}
		if charClass[c]&class != 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
}

// NormalizeEscapes returns s, a path with an optional query, with the
// percent-encoding Normalize gives a URL's path and query: valid escapes of
// unreserved bytes decoded, other escapes upper-cased, a "%" without two hex
// digits and every byte outside pchar, "/" and "?" encoded. robots.txt rules
// are written this way so that they compare with normalized URLs.
func NormalizeEscapes(s string) string {
	var b strings.Builder
	appendPct(&b, s, queryChar)
	return b.String()
}

// needsDotRemoval reports whether path has a "." or ".." segment.
func needsDotRemoval(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '.' || (i > 0 && p[i-1] != '/') {
			continue
		}
		j := i + 1
		if j < len(p) && p[j] == '.' {
			j++
		}
		if j == len(p) || p[j] == '/' {
			return true
		}
	}
	return false
}

// removeDotSegments implements RFC 3986 §5.2.4 for a path starting with "/".
func removeDotSegments(p string) string {
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	trailing := false
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			trailing = last
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			trailing = last
		default:
			out = append(out, s)
			trailing = false
		}
	}
	r := "/" + strings.Join(out, "/")
	if trailing && !strings.HasSuffix(r, "/") {
		r += "/"
	}
	return r
}

// quoteShort quotes s for error messages, cut to 120 bytes.
func quoteShort(s string) string {
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return fmt.Sprintf("%q", s)
}
