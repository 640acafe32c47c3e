package fetch

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
)

// ResolveRule is one --resolve 'PATTERN=HOST:PORT' rule: every dial to a host matching Pattern
// (and Port, when set) goes to Addr instead, like curl's --resolve. TLS server name and the Host
// header still come from the URL.
type ResolveRule struct {
	Pattern string // lower-case host glob with path.Match syntax, e.g. "*.synth.test"
	Port    string // optional: the rule applies only to dials to this port ("" = any port)
	Addr    string // HOST:PORT dialed instead
}

// String returns the rule in its flag form.
func (r ResolveRule) String() string {
	p := r.Pattern
	if r.Port != "" {
		if strings.Contains(p, ":") {
			p = "[" + p + "]"
		}
		p += ":" + r.Port
	}
	return p + "=" + r.Addr
}

// Match reports whether a dial to host:port is rewritten by the rule. host is compared
// case-insensitively; IPv6 literals are given without brackets.
func (r ResolveRule) Match(host, port string) bool {
	if r.Port != "" && r.Port != port {
		return false
	}
	ok, err := path.Match(r.Pattern, strings.ToLower(strings.TrimSuffix(host, ".")))
	return err == nil && ok
}

// ParseResolve parses a --resolve value 'PATTERN=HOST:PORT'. PATTERN is a host glob (path.Match
// syntax: *, ?, [a-z]) optionally followed by ':PORT' to restrict the rule to one port; IPv6
// literals in the pattern with a port go in brackets. HOST:PORT is the address dialed instead.
func ParseResolve(s string) (ResolveRule, error) {
	bad := func(why string) (ResolveRule, error) {
		return ResolveRule{}, fmt.Errorf("fetch: --resolve %q: %s (want PATTERN=HOST:PORT, e.g. '*.synth.test=127.0.0.1:8080')", s, why)
	}
	pat, addr, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return bad("missing '='")
	}
	pat, addr = strings.ToLower(strings.TrimSpace(pat)), strings.TrimSpace(addr)
	if pat == "" {
		return bad("empty PATTERN")
	}
	var r ResolveRule
	r.Pattern = pat
	// Optional ":port" at the end of the pattern. A bare IPv6 literal (several colons, no
	// brackets) has no port.
	if i := strings.LastIndexByte(pat, ':'); i >= 0 {
		hostPart, portPart := pat[:i], pat[i+1:]
		switch {
		case strings.HasPrefix(hostPart, "[") && strings.HasSuffix(hostPart, "]") && strings.Contains(hostPart, ":"):
			r.Pattern = hostPart[1 : len(hostPart)-1]
			r.Port = portPart
		case strings.Contains(hostPart, ":"):
			// bare IPv6 literal, no port
		default:
			r.Pattern = hostPart
			r.Port = portPart
		}
		if r.Port != "" || r.Pattern != pat {
			if n, err := strconv.Atoi(r.Port); err != nil || n < 1 || n > 65535 {
				return bad(fmt.Sprintf("pattern port %q: must be in 1..65535", r.Port))
			}
		}
	}
	if r.Pattern == "" {
		return bad("empty PATTERN host")
	}
	if _, err := path.Match(r.Pattern, ""); err != nil {
		return bad("bad glob in PATTERN: " + err.Error())
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return bad("target: " + err.Error())
	}
	if host == "" {
		return bad("empty target HOST")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return bad(fmt.Sprintf("target port %q: must be in 1..65535", port))
	}
	r.Addr = net.JoinHostPort(host, port)
	return r, nil
}

// resolveTarget returns the address to dial for host:port under rules (first match wins).
func resolveTarget(rules []ResolveRule, host, port string) (string, bool) {
	for _, r := range rules {
		if r.Match(host, port) {
			return r.Addr, true
		}
	}
	return "", false
}
