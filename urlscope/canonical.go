package urlscope

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// CanonicalConfig is the part of URL normalization that removes parameters
// which do not name a different page (session ids, tracking tags) and puts
// query parameters in one order, so that a page has one URL and one
// fingerprint (scope.canonical). Its zero value keeps every parameter in
// its order.
type CanonicalConfig struct {
	// StripParams: names of the parameters removed from the query
	// ("?PHPSESSID=...") and from path segments (";jsessionid=..."),
	// compared without regard to case; a name ending in "*" is a prefix
	// ("utm_*", "aspsessionid*").
	StripParams []string
	// SortQuery orders the query parameters by name (byte order of the
	// normalized names); parameters with the same name keep their order.
	SortQuery bool
}

// DefaultStripParams are scope.canonical.strip_params by default: the
// session-id parameters of common server frameworks and the tracking tags
// of advertising and mail campaigns.
var DefaultStripParams = []string{
	// session ids: Java servlets (also in path-parameter form), PHP, generic, ASP, ColdFusion
	"jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid*", "cfid", "cftoken",
	// tracking tags: Google Analytics and Ads, Facebook, Microsoft, Yandex, Mailchimp, Instagram, HubSpot, Matomo
	"utm_*", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid", "mc_cid", "mc_eid", "igshid", "_hsenc", "_hsmi", "mtm_*", "pk_campaign", "pk_kwd",
}

// DefaultCanonical is the canonicalization a node uses unless configured:
// DefaultStripParams removed, query parameters sorted.
func DefaultCanonical() CanonicalConfig {
	return CanonicalConfig{StripParams: slices.Clone(DefaultStripParams), SortQuery: true}
}

// canonRules is a compiled CanonicalConfig.
type canonRules struct {
	exact    map[string]bool
	prefixes []string
	sort     bool
}

var canonical atomic.Pointer[canonRules]

func init() {
	r, err := compileCanonical(DefaultCanonical())
	if err != nil {
		panic(err) // the built-in list is valid
	}
	canonical.Store(r)
}

// SetCanonical replaces the canonicalization Normalize, Resolve and link
// extraction apply, for the whole process (every member of a cluster must
// use the same rules: the normalized URL is a URL's identity in frontiers
// and between members). Errors name the key scope.canonical.strip_params.
func SetCanonical(c CanonicalConfig) error {
	r, err := compileCanonical(c)
	if err != nil {
		return err
	}
	canonical.Store(r)
	return nil
}

// Canonical returns the canonicalization in effect.
func Canonical() CanonicalConfig {
	r := canonical.Load()
	c := CanonicalConfig{SortQuery: r.sort}
	for n := range r.exact {
		c.StripParams = append(c.StripParams, n)
	}
	for _, p := range r.prefixes {
		c.StripParams = append(c.StripParams, p+"*")
	}
	slices.Sort(c.StripParams)
	return c
}

func compileCanonical(c CanonicalConfig) (*canonRules, error) {
	r := &canonRules{exact: map[string]bool{}, sort: c.SortQuery}
	for i, p := range c.StripParams {
		p = strings.ToLower(strings.TrimSpace(p))
		name := strings.TrimSuffix(p, "*")
		if name == "" || strings.ContainsAny(name, "*=&;?#/ ") {
			return nil, fmt.Errorf("scope.canonical.strip_params[%d]=%q: must be a parameter name, optionally ending in * (a prefix)", i, c.StripParams[i])
		}
		if name != p {
			r.prefixes = append(r.prefixes, name)
		} else {
			r.exact[name] = true
		}
	}
	return r, nil
}

// strip reports whether the parameter name (percent-normalized) is removed.
func (r *canonRules) strip(name string) bool {
	if len(r.exact) == 0 && len(r.prefixes) == 0 {
		return false
	}
	if strings.IndexByte(name, '%') >= 0 {
		if d, ok := pctDecode(name); ok {
			name = d
		}
	}
	name = strings.ToLower(name)
	if r.exact[name] {
		return true
	}
	for _, p := range r.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// pctDecode decodes the percent-escapes of s (already normalized: valid).
func pctDecode(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", false
			}
			b.WriteByte(hi<<4 | lo)
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String(), true
}

// canonPath removes the stripped path parameters (";jsessionid=...") of
// every segment of a normalized path.
func (r *canonRules) canonPath(p string) string {
	if strings.IndexByte(p, ';') < 0 {
		return p
	}
	segs := strings.Split(p, "/")
	changed := false
	for i, s := range segs {
		if strings.IndexByte(s, ';') < 0 {
			continue
		}
		parts := strings.Split(s, ";")
		kept := parts[:1]
		for _, prm := range parts[1:] {
			name, _, _ := strings.Cut(prm, "=")
			if r.strip(name) {
				changed = true
				continue
			}
			kept = append(kept, prm)
		}
		segs[i] = strings.Join(kept, ";")
	}
	if !changed {
		return p
	}
	return strings.Join(segs, "/")
}

// canonQuery removes the stripped parameters and empty ones ("a=1&&b=2")
// of a normalized query and sorts the rest by name when the rules say so.
// The result is "" when no parameter is left.
func (r *canonRules) canonQuery(q string) string {
	if q == "" {
		return q
	}
	multi := strings.IndexByte(q, '&') >= 0
	if !multi && len(r.exact) == 0 && len(r.prefixes) == 0 {
		return q
	}
	params := strings.Split(q, "&")
	kept := params[:0]
	for _, p := range params {
		if p == "" {
			continue
		}
		name, _, _ := strings.Cut(p, "=")
		if r.strip(name) {
			continue
		}
		kept = append(kept, p)
	}
	if r.sort && len(kept) > 1 {
		slices.SortStableFunc(kept, func(a, b string) int {
			na, _, _ := strings.Cut(a, "=")
			nb, _, _ := strings.Cut(b, "=")
			return strings.Compare(na, nb)
		})
	}
	return strings.Join(kept, "&")
}
