// Package dnscache resolves host names for the fetcher with a cache that
// keeps every answer for its TTL. It asks DNS servers itself
// (github.com/miekg/dns), because the system resolver does not say how
// long an answer may be kept: A and AAAA records are cached separately,
// each for the least TTL of its answer (the CNAME chain included), and a
// name that does not exist (NXDOMAIN) or has no record of a type (NODATA)
// is cached for its zone's negative TTL (RFC 2308: the SOA's minimum,
// capped by the SOA record's own TTL); every TTL is bounded by MinTTL and
// MaxTTL. Names in the hosts file are answered from it, as the system
// resolver does first. Concurrent lookups of one name share one query.
package dnscache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/miekg/dns"
)

// Config configures a Cache.
type Config struct {
	// Servers are the DNS servers asked, HOST:PORT, in order (the next
	// one when a server fails or does not answer). Required.
	Servers []string
	// MinTTL and MaxTTL bound how long an answer is kept.
	MinTTL, MaxTTL time.Duration
	// Timeout bounds one query to one server. Default 2s.
	Timeout time.Duration
	// Size is the most names (per record type) kept. Default 65536.
	Size int
	// HostsFile is read once at New; "" reads none. Names it lists are
	// answered from it, never cached or asked.
	HostsFile string
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Cache is a caching resolver. Safe for concurrent use.
type Cache struct {
	cfg    Config
	client *dns.Client
	hosts  map[string][]netip.Addr
	cache  *lru.Cache[key, entry]

	mu       sync.Mutex
	inflight map[key]*call

	hits, misses, queries atomic.Uint64
}

type key struct {
	name  string // lower case, fully qualified
	qtype uint16
}

// entry is one cached answer: addresses, or a negative answer (notFound
// for NXDOMAIN; no addresses and !notFound for NODATA).
type entry struct {
	addrs    []netip.Addr
	notFound bool
	expires  time.Time
}

type call struct {
	done chan struct{}
	e    entry
	err  error
}

// New returns a cache asking cfg.Servers.
func New(cfg Config) (*Cache, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("dnscache: no DNS server")
	}
	if cfg.MinTTL < 0 || cfg.MaxTTL < cfg.MinTTL {
		return nil, fmt.Errorf("dnscache: TTL bounds %s..%s: want 0 <= min <= max", cfg.MinTTL, cfg.MaxTTL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Size <= 0 {
		cfg.Size = 1 << 16
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{cfg: cfg, client: &dns.Client{Net: "udp", Timeout: cfg.Timeout}, inflight: map[key]*call{}}
	var err error
	if c.cache, err = lru.New[key, entry](cfg.Size); err != nil {
		return nil, fmt.Errorf("dnscache: %w", err)
	}
	if cfg.HostsFile != "" {
		if c.hosts, err = readHosts(cfg.HostsFile); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// SystemServers returns the nameservers of a resolv.conf file as HOST:PORT.
func SystemServers(resolvConf string) ([]string, error) {
	cc, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return nil, fmt.Errorf("dnscache: %w", err)
	}
	var out []string
	for _, s := range cc.Servers {
		out = append(out, net.JoinHostPort(s, cc.Port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dnscache: %s lists no nameserver", resolvConf)
	}
	return out, nil
}

// Hits, Misses and Queries count the lookups answered from the cache, those
// that were not, and the queries sent to servers.
func (c *Cache) Hits() uint64    { return c.hits.Load() }
func (c *Cache) Misses() uint64  { return c.misses.Load() }
func (c *Cache) Queries() uint64 { return c.queries.Load() }

// LookupNetIP resolves host ("ip": A then AAAA records, "ip4", "ip6") as
// net.Resolver.LookupNetIP does; the error of a name that does not exist
// is a *net.DNSError with IsNotFound.
func (c *Cache) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if addrs, ok := c.hosts[name]; ok {
		return filter(addrs, network), nil
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return filter([]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}, network), nil
	}
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		return nil, &net.DNSError{Err: "invalid host name", Name: host, IsNotFound: true}
	}
	var types []uint16
	switch network {
	case "ip":
		types = []uint16{dns.TypeA, dns.TypeAAAA}
	case "ip4":
		types = []uint16{dns.TypeA}
	case "ip6":
		types = []uint16{dns.TypeAAAA}
	default:
		return nil, &net.DNSError{Err: "unknown network " + network, Name: host}
	}
	results := make([]entry, len(types))
	errs := make([]error, len(types))
	var wg sync.WaitGroup
	for i, t := range types {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.lookup(ctx, key{dns.Fqdn(name), t})
		}()
	}
	wg.Wait()
	var addrs []netip.Addr
	notFound := true
	var firstErr error
	for i := range types {
		if errs[i] != nil {
			if firstErr == nil {
				firstErr = errs[i]
			}
			notFound = false
			continue
		}
		addrs = append(addrs, results[i].addrs...)
		notFound = notFound && results[i].notFound
	}
	if len(addrs) > 0 {
		return addrs, nil
	}
	if firstErr != nil {
		return nil, &net.DNSError{Err: firstErr.Error(), Name: host, IsTemporary: true}
	}
	if notFound {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return nil, &net.DNSError{Err: "no address of the asked type", Name: host, IsNotFound: true}
}

// lookup answers one (name, type) from the cache, or asks once for all
// the callers that want it now.
func (c *Cache) lookup(ctx context.Context, k key) (entry, error) {
	now := c.cfg.Now()
	if e, ok := c.cache.Get(k); ok {
		if now.Before(e.expires) {
			c.hits.Add(1)
			return e, nil
		}
		c.cache.Remove(k)
	}
	c.misses.Add(1)
	c.mu.Lock()
	if cl, ok := c.inflight[k]; ok {
		c.mu.Unlock()
		select {
		case <-cl.done:
			return cl.e, cl.err
		case <-ctx.Done():
			return entry{}, ctx.Err()
		}
	}
	cl := &call{done: make(chan struct{})}
	c.inflight[k] = cl
	c.mu.Unlock()

	cl.e, cl.err = c.query(ctx, k)
	if cl.err == nil {
		c.cache.Add(k, cl.e)
	}
	c.mu.Lock()
	delete(c.inflight, k)
	c.mu.Unlock()
	close(cl.done)
	return cl.e, cl.err
}

// query asks the servers in turn until one answers.
func (c *Cache) query(ctx context.Context, k key) (entry, error) {
	m := new(dns.Msg)
	m.SetQuestion(k.name, k.qtype)
	m.RecursionDesired = true
	var lastErr error
	for _, srv := range c.cfg.Servers {
		if err := ctx.Err(); err != nil {
			return entry{}, err
		}
		c.queries.Add(1)
		r, _, err := c.client.ExchangeContext(ctx, m, srv)
		if err == nil && r.Truncated {
			tcp := &dns.Client{Net: "tcp", Timeout: c.cfg.Timeout}
			r, _, err = tcp.ExchangeContext(ctx, m, srv)
		}
		if err != nil {
			lastErr = fmt.Errorf("dns %s: %w", srv, err)
			continue
		}
		switch r.Rcode {
		case dns.RcodeSuccess:
			return c.answer(k, r), nil
		case dns.RcodeNameError:
			return entry{notFound: true, expires: c.cfg.Now().Add(c.bound(negativeTTL(r)))}, nil
		default:
			lastErr = fmt.Errorf("dns %s: %s", srv, dns.RcodeToString[r.Rcode])
		}
	}
	return entry{}, lastErr
}

// answer reads the addresses of k.name from a NOERROR answer, following
// its CNAME chain; TTL: the least of the records used (the negative TTL
// when there are none).
func (c *Cache) answer(k key, r *dns.Msg) entry {
	names := map[string]bool{k.name: true}
	for changed := true; changed; { // CNAMEs may come in any order
		changed = false
		for _, rr := range r.Answer {
			if cn, ok := rr.(*dns.CNAME); ok && names[strings.ToLower(cn.Hdr.Name)] && !names[strings.ToLower(cn.Target)] {
				names[strings.ToLower(cn.Target)] = true
				changed = true
			}
		}
	}
	var addrs []netip.Addr
	ttl := uint32(0)
	first := true
	use := func(h *dns.RR_Header) {
		if first || h.Ttl < ttl {
			ttl, first = h.Ttl, false
		}
	}
	for _, rr := range r.Answer {
		h := rr.Header()
		if !names[strings.ToLower(h.Name)] {
			continue
		}
		switch v := rr.(type) {
		case *dns.A:
			if k.qtype == dns.TypeA {
				if ip, ok := netip.AddrFromSlice(v.A.To4()); ok {
					addrs = append(addrs, ip)
					use(h)
				}
			}
		case *dns.AAAA:
			if k.qtype == dns.TypeAAAA {
				if ip, ok := netip.AddrFromSlice(v.AAAA.To16()); ok {
					addrs = append(addrs, ip)
					use(h)
				}
			}
		case *dns.CNAME:
			use(h)
		}
	}
	if len(addrs) == 0 {
		return entry{expires: c.cfg.Now().Add(c.bound(negativeTTL(r)))}
	}
	return entry{addrs: addrs, expires: c.cfg.Now().Add(c.bound(time.Duration(ttl) * time.Second))}
}

// negativeTTL is how long a negative answer may be kept (RFC 2308 §5): the
// SOA of the authority section's minimum, at most the SOA's own TTL; 0
// without a SOA.
func negativeTTL(r *dns.Msg) time.Duration {
	for _, rr := range r.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return time.Duration(min(soa.Minttl, soa.Hdr.Ttl)) * time.Second
		}
	}
	return 0
}

func (c *Cache) bound(d time.Duration) time.Duration {
	return min(max(d, c.cfg.MinTTL), c.cfg.MaxTTL)
}

// filter keeps the addresses of network's family.
func filter(addrs []netip.Addr, network string) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if network == "ip" || (network == "ip4") == a.Unmap().Is4() {
			out = append(out, a)
		}
	}
	return out
}

// readHosts reads a hosts(5) file: address, then names.
func readHosts(path string) (map[string][]netip.Addr, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dnscache: hosts file: %w", err)
	}
	defer f.Close()
	hosts := map[string][]netip.Addr{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		ip, err := netip.ParseAddr(fields[0])
		if err != nil {
			continue
		}
		ip = ip.WithZone("")
		for _, name := range fields[1:] {
			name = strings.ToLower(strings.TrimSuffix(name, "."))
			hosts[name] = append(hosts[name], ip)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dnscache: hosts file %s: %w", path, err)
	}
	return hosts, nil
}
