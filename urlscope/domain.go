package urlscope

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/net/publicsuffix"
)

// Domains maps a host name to its registered domain: its public suffix
// (golang.org/x/net/publicsuffix, ICANN and private sections) plus one
// label. Private suffixes add to the list, the way its private section
// holds github.io or blogspot.com: with "synth.test" added,
// a.b.synth.test's registered domain is b.synth.test instead of
// synth.test. The zero value and nil use the list alone. A Domains is
// immutable and safe for concurrent use.
type Domains struct {
	private []string // normalized, longest first
}

// NewDomains validates and normalizes the private suffixes
// (scope.private_suffixes): host names without port, scheme or path; a
// leading "*." or "." is dropped. Errors name the key.
func NewDomains(private []string) (*Domains, error) {
	d := &Domains{}
	for i, s := range private {
		s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "*"), ".")
		n, err := normalizeHostEntry(s, false)
		if err != nil || strings.HasPrefix(n, "[") || net.ParseIP(n) != nil {
			if err == nil {
				err = fmt.Errorf("must be a domain name, not an address")
			}
			return nil, fmt.Errorf("scope.private_suffixes[%d]=%q: %w", i, private[i], err)
		}
		if !slices.Contains(d.private, n) {
			d.private = append(d.private, n)
		}
	}
	slices.SortFunc(d.private, func(a, b string) int { return len(b) - len(a) })
	return d, nil
}

// Suffixes returns the private suffixes, normalized, longest first.
func (d *Domains) Suffixes() []string {
	if d == nil {
		return nil
	}
	return slices.Clone(d.private)
}

// Registered returns the registered domain of host (a normalized URL host,
// with or without a port): its public suffix plus one label, lower case,
// without the port. A host that is a public suffix itself, an IP address
// and a single-label name are their own registered domain.
func (d *Domains) Registered(host string) string {
	host = strings.ToLower(stripPort(host))
	if host == "" || strings.HasPrefix(host, "[") || strings.IndexByte(host, '.') < 0 || net.ParseIP(host) != nil {
		return host
	}
	host = strings.TrimSuffix(host, ".")
	if d != nil {
		for _, s := range d.private {
			if host == s {
				return host
			}
			if len(host) > len(s) && strings.HasSuffix(host, s) && host[len(host)-len(s)-1] == '.' {
				rest := host[:len(host)-len(s)-1]
				return rest[strings.LastIndexByte(rest, '.')+1:] + "." + s
			}
		}
	}
	rd, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil { // the host is a public suffix itself (or malformed)
		return host
	}
	return rd
}

// stripPort removes a ":port" from a URL host ("[::1]:80" -> "[::1]").
func stripPort(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i >= 0 {
			return host[:i+1]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		return host[:i]
	}
	return host
}

// HostCap bounds the host names admitted per registered domain
// (scope.max_hosts_per_domain): a discovered URL whose host is not admitted
// yet is refused once its registered domain has max names admitted.
// Exempt hosts (seeds, scope.allow_hosts) pass and do not count. It keeps
// a 64-bit hash of each name it admitted (at most max per registered domain
// seen, about 40 bytes each) and is
// safe for concurrent use; a name admitted before costs one read-locked
// map lookup. A nil *HostCap or max 0 admits everything.
type HostCap struct {
	dom *Domains
	max int

	mu    sync.RWMutex
	known map[uint64]bool // xxhash of the host name -> admitted (false: exempt, not counted)
	count map[string]int  // registered domain -> names admitted
}

// NewHostCap returns a cap of max names per registered domain (0:
// unlimited), registered domains as dom gives them.
func NewHostCap(dom *Domains, max int) *HostCap {
	return &HostCap{dom: dom, max: max, known: map[uint64]bool{}, count: map[string]int{}}
}

// Exempt makes host (a URL host; its port is ignored) pass without
// counting: a seed's host, an allowed host.
func (c *HostCap) Exempt(host string) {
	if c == nil || c.max <= 0 {
		return
	}
	name := strings.ToLower(stripPort(host))
	key := xxhash.Sum64String(name)
	c.mu.RLock()
	_, ok := c.known[key]
	c.mu.RUnlock()
	if ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[key]; !ok {
		c.known[key] = false
	}
}

// Admit reports whether host (a URL host; its port is ignored) may be
// crawled: it is exempt, it was admitted before, or its registered domain
// has fewer than max names.
func (c *HostCap) Admit(host string) bool {
	if c == nil || c.max <= 0 {
		return true
	}
	name := strings.ToLower(stripPort(host))
	key := xxhash.Sum64String(name)
	c.mu.RLock()
	_, ok := c.known[key]
	c.mu.RUnlock()
	if ok {
		return true
	}
	rd := c.dom.Registered(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[key]; ok {
		return true
	}
	if c.count[rd] >= c.max {
		return false
	}
	c.count[rd]++
	c.known[key] = true
	return true
}

// PolitenessUnit returns what politeness.key names a politeness unit by:
// for "host" (or ""), nil and "host" (each host name is its own unit); for
// "domain", the registered domain (private suffixes added) and a name that
// identifies the mapping ("domain", then the private suffixes). Errors name
// the key.
func PolitenessUnit(key string, private []string) (func(host string) string, string, error) {
	switch key {
	case "", "host":
		return nil, "host", nil
	case "domain":
		d, err := NewDomains(private)
		if err != nil {
			return nil, "", err
		}
		name := "domain"
		if len(d.private) > 0 {
			name += " " + strings.Join(d.private, " ")
		}
		return d.Registered, name, nil
	}
	return nil, "", fmt.Errorf("politeness.key=%q: must be host or domain", key)
}
