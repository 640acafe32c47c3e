package urlscope

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ScopeConfig limits which discovered URLs are crawled. The zero value allows
// everything (any host, any depth); the node fills AllowHosts from the seeds
// when both AllowHosts and AllowDomains are empty.
type ScopeConfig struct {
	// AllowHosts: exact hosts (after normalization: lower case, punycode). An
	// entry with a port ("example.com:8080") matches only that port; without
	// one it matches the host on any port. Empty (with empty AllowDomains):
	// any host.
	AllowHosts []string
	// AllowDomains: a domain and all its subdomains ("example.com" allows
	// example.com and www.example.com, not badexample.com), any port.
	AllowDomains []string
	// Include: regular expressions (RE2) on the full normalized URL; if any are
	// set, a URL must match at least one.
	Include []string
	// Exclude: regular expressions (RE2) on the full normalized URL; a URL
	// matching any is out of scope.
	Exclude []string
	// MaxDepth: largest link distance from a seed (seeds have depth 0);
	// 0 = unlimited. Valid 0..1000000.
	MaxDepth int
}

// Scope decides whether a URL is in scope. It is immutable and safe for
// concurrent use.
type Scope struct {
	hosts     map[string]bool // "host" (any port) or "host:port"
	domains   []string
	include   []*regexp.Regexp
	exclude   []*regexp.Regexp
	maxDepth  int
	anyHost   bool
	hostPorts bool // some AllowHosts entry has a port
}

// NewScope validates c and compiles its patterns. Errors name the config key,
// e.g. "scope.exclude[2]=\"(\": error parsing regexp: ...".
func NewScope(c ScopeConfig) (*Scope, error) {
	s := &Scope{hosts: map[string]bool{}, maxDepth: c.MaxDepth}
	if c.MaxDepth < 0 || c.MaxDepth > 1000000 {
		return nil, fmt.Errorf("scope.max_depth=%d: must be in 0..1000000 (0 = unlimited)", c.MaxDepth)
	}
	for i, h := range c.AllowHosts {
		n, err := normalizeHostEntry(h, true)
		if err != nil {
			return nil, fmt.Errorf("scope.allow_hosts[%d]=%q: %w", i, h, err)
		}
		s.hosts[n] = true
		if !strings.HasSuffix(n, "]") && strings.IndexByte(n, ':') >= 0 {
			s.hostPorts = true
		}
	}
	for i, d := range c.AllowDomains {
		d = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(d), "*"), ".")
		n, err := normalizeHostEntry(d, false)
		if err != nil {
			return nil, fmt.Errorf("scope.allow_domains[%d]=%q: %w", i, c.AllowDomains[i], err)
		}
		s.domains = append(s.domains, n)
	}
	s.anyHost = len(s.hosts) == 0 && len(s.domains) == 0
	var err error
	if s.include, err = compileAll("scope.include", c.Include); err != nil {
		return nil, err
	}
	if s.exclude, err = compileAll("scope.exclude", c.Exclude); err != nil {
		return nil, err
	}
	return s, nil
}

func compileAll(key string, pats []string) ([]*regexp.Regexp, error) {
	var res []*regexp.Regexp
	for i, p := range pats {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]=%q: %w", key, i, p, err)
		}
		res = append(res, re)
	}
	return res, nil
}

// normalizeHostEntry normalizes a configured host ("Example.COM",
// "bücher.example", "[::1]:8080") the way Normalize does.
func normalizeHostEntry(h string, portOK bool) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" || strings.ContainsAny(h, "/?#@") {
		return "", fmt.Errorf("must be a host name without scheme, path or user")
	}
	host, port := h, ""
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i >= 0 && strings.HasPrefix(h[i+1:], ":") {
			host, port = h[:i+1], h[i+2:]
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		host, port = h[:i], h[i+1:]
	}
	n, err := normalizeHost(host)
	if err != nil {
		return "", fmt.Errorf("must be a valid host name: %w", err)
	}
	if port != "" {
		if !portOK {
			return "", fmt.Errorf("must not have a port")
		}
		p, err := normalizePort(port)
		if err != nil || p == "0" {
			return "", fmt.Errorf("port must be in 1..65535")
		}
		n += ":" + p
	}
	return n, nil
}

// Allow reports whether u (a normalized URL) at link depth depth is in scope.
// When it is not, reason is "host", "depth", "exclude" or "include" (checked
// in that order).
func (s *Scope) Allow(u *url.URL, depth int) (bool, string) {
	if u == nil {
		return false, "host"
	}
	if !s.anyHost && !s.hostAllowed(u) {
		return false, "host"
	}
	if s.maxDepth > 0 && depth > s.maxDepth {
		return false, "depth"
	}
	if len(s.exclude) > 0 || len(s.include) > 0 {
		full := u.String()
		for _, re := range s.exclude {
			if re.MatchString(full) {
				return false, "exclude"
			}
		}
		if len(s.include) > 0 {
			ok := false
			for _, re := range s.include {
				if re.MatchString(full) {
					ok = true
					break
				}
			}
			if !ok {
				return false, "include"
			}
		}
	}
	return true, ""
}

func (s *Scope) hostAllowed(u *url.URL) bool {
	host := strings.ToLower(u.Hostname())
	if strings.IndexByte(host, ':') >= 0 { // IPv6 literal: Hostname drops the brackets
		host = "[" + host + "]"
	}
	if s.hosts[host] {
		return true
	}
	if s.hostPorts {
		p := u.Port()
		if p == "" {
			p = "80"
			if strings.EqualFold(u.Scheme, "https") {
				p = "443"
			}
		}
		if s.hosts[host+":"+p] {
			return true
		}
	}
	for _, d := range s.domains {
		if host == d || (len(host) > len(d) && strings.HasSuffix(host, d) && host[len(host)-len(d)-1] == '.') {
			return true
		}
	}
	return false
}
