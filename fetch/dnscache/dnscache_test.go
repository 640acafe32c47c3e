package dnscache

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// zone is the test server's data: name -> records of the answer.
var zone = map[string][]string{
	"a.test.":      {"a.test. 30 IN A 203.0.113.1", "a.test. 30 IN A 203.0.113.11"},
	"v6.test.":     {"v6.test. 40 IN AAAA 2001:db8::1"},
	"cname.test.":  {"cname.test. 10 IN CNAME target.test.", "target.test. 100 IN A 203.0.113.2"},
	"zero.test.":   {"zero.test. 0 IN A 203.0.113.3"},
	"long.test.":   {"long.test. 86400 IN A 203.0.113.4"},
	"target.test.": {"target.test. 100 IN A 203.0.113.2"},
}

// soa is the negative answers' SOA: minimum 20s.
const soa = "test. 300 IN SOA ns.test. admin.test. 1 3600 600 86400 20"

// dnsServer is a loopback DNS server that counts the queries it gets.
type dnsServer struct {
	addr string
	mu   sync.Mutex
	n    map[string]int // "name type" -> queries
}

func (s *dnsServer) count(name string, qtype uint16) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name+" "+dns.TypeToString[qtype]]
}

func startDNS(t *testing.T) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{addr: pc.LocalAddr().String(), n: map[string]int{}}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		s.mu.Lock()
		s.n[q.Name+" "+dns.TypeToString[q.Qtype]]++
		s.mu.Unlock()
		m := new(dns.Msg)
		m.SetReply(req)
		switch {
		case q.Name == "fail.test.":
			m.Rcode = dns.RcodeServerFailure
		case zone[q.Name] == nil:
			m.Rcode = dns.RcodeNameError
			rr, _ := dns.NewRR(soa)
			m.Ns = append(m.Ns, rr)
		default:
			for _, s := range zone[q.Name] {
				rr, _ := dns.NewRR(s)
				if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
					m.Answer = append(m.Answer, rr)
				}
			}
			if len(m.Answer) == 0 {
				rr, _ := dns.NewRR(soa)
				m.Ns = append(m.Ns, rr) // NODATA
			}
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newCache(t *testing.T, servers ...string) (*Cache, *clock) {
	t.Helper()
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	c, err := New(Config{Servers: servers, MinTTL: 5 * time.Second, MaxTTL: time.Hour, Timeout: time.Second, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// TestTTL: each answer is kept for its TTL, bounded by min_ttl and max_ttl,
// and asked again once it has passed.
func TestTTL(t *testing.T) {
	srv := startDNS(t)
	for _, tc := range []struct {
		host  string
		qtype uint16
		net   string
		want  []netip.Addr
		ttl   time.Duration // how long the answer is kept
	}{
		{"a.test", dns.TypeA, "ip4", addrs("203.0.113.1", "203.0.113.11"), 30 * time.Second},
		{"v6.test", dns.TypeAAAA, "ip6", addrs("2001:db8::1"), 40 * time.Second},
		{"cname.test", dns.TypeA, "ip4", addrs("203.0.113.2"), 10 * time.Second}, // the chain's least TTL
		{"zero.test", dns.TypeA, "ip4", addrs("203.0.113.3"), 5 * time.Second},   // raised to min_ttl
		{"long.test", dns.TypeA, "ip4", addrs("203.0.113.4"), time.Hour},         // cut to max_ttl
	} {
		t.Run(tc.host, func(t *testing.T) {
			c, clk := newCache(t, srv.addr)
			lookup := func() {
				t.Helper()
				got, err := c.LookupNetIP(t.Context(), tc.net, tc.host)
				if err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("LookupNetIP(%s) = %v, %v; want %v", tc.host, got, err, tc.want)
				}
			}
			base := srv.count(tc.host+".", tc.qtype)
			lookup()
			lookup()
			clk.add(tc.ttl - time.Second)
			lookup()
			if n := srv.count(tc.host+".", tc.qtype) - base; n != 1 {
				t.Fatalf("%d queries within the TTL, want 1", n)
			}
			clk.add(time.Second)
			lookup()
			if n := srv.count(tc.host+".", tc.qtype) - base; n != 2 {
				t.Fatalf("%d queries once the TTL passed, want 2", n)
			}
			if c.Hits() != 2 || c.Misses() != 2 {
				t.Fatalf("hits %d misses %d, want 2 and 2", c.Hits(), c.Misses())
			}
		})
	}
}

// TestBothFamilies: "ip" asks A and AAAA, each cached for its own TTL
// (a NODATA answer for the negative TTL).
func TestBothFamilies(t *testing.T) {
	srv := startDNS(t)
	c, clk := newCache(t, srv.addr)
	for i := 0; i < 3; i++ {
		got, err := c.LookupNetIP(t.Context(), "ip", "A.Test.")
		if err != nil || !slices.Equal(got, addrs("203.0.113.1", "203.0.113.11")) {
			t.Fatalf("%v %v", got, err)
		}
	}
	if a, aaaa := srv.count("a.test.", dns.TypeA), srv.count("a.test.", dns.TypeAAAA); a != 1 || aaaa != 1 {
		t.Fatalf("queries A %d AAAA %d, want 1 each", a, aaaa)
	}
	clk.add(20 * time.Second) // the NODATA's negative TTL (SOA minimum 20s) passed, the A's 30s not
	if _, err := c.LookupNetIP(t.Context(), "ip", "a.test"); err != nil {
		t.Fatal(err)
	}
	if a, aaaa := srv.count("a.test.", dns.TypeA), srv.count("a.test.", dns.TypeAAAA); a != 1 || aaaa != 2 {
		t.Fatalf("queries A %d AAAA %d, want 1 and 2", a, aaaa)
	}
}

// TestNegative: NXDOMAIN is cached for the SOA's minimum; SERVFAIL is not
// cached.
func TestNegative(t *testing.T) {
	srv := startDNS(t)
	c, clk := newCache(t, srv.addr)
	for i := 0; i < 2; i++ {
		_, err := c.LookupNetIP(t.Context(), "ip4", "nx.test")
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Fatalf("nx.test: %v, want not found", err)
		}
	}
	clk.add(19 * time.Second)
	_, _ = c.LookupNetIP(t.Context(), "ip4", "nx.test")
	if n := srv.count("nx.test.", dns.TypeA); n != 1 {
		t.Fatalf("NXDOMAIN asked %d times within its negative TTL, want 1", n)
	}
	clk.add(time.Second)
	_, _ = c.LookupNetIP(t.Context(), "ip4", "nx.test")
	if n := srv.count("nx.test.", dns.TypeA); n != 2 {
		t.Fatalf("NXDOMAIN asked %d times after its negative TTL, want 2", n)
	}

	for i := 0; i < 2; i++ {
		_, err := c.LookupNetIP(t.Context(), "ip4", "fail.test")
		var de *net.DNSError
		if !errors.As(err, &de) || de.IsNotFound || !de.IsTemporary {
			t.Fatalf("fail.test: %v, want a temporary error", err)
		}
	}
	if n := srv.count("fail.test.", dns.TypeA); n != 2 {
		t.Fatalf("SERVFAIL asked %d times, want 2 (not cached)", n)
	}
}

// TestConcurrentOneQuery: many lookups of one name at once send one query.
func TestConcurrentOneQuery(t *testing.T) {
	srv := startDNS(t)
	c, _ := newCache(t, srv.addr)
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.LookupNetIP(context.Background(), "ip4", "a.test"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := srv.count("a.test.", dns.TypeA); n != 1 {
		t.Fatalf("%d queries for 32 lookups at once, want 1", n)
	}
}

// TestServersAndHosts: a server that does not answer is passed over; names
// of the hosts file and IP literals are answered without a query.
func TestServersAndHosts(t *testing.T) {
	srv := startDNS(t)
	dead, err := net.ListenPacket("udp", "127.0.0.1:0") // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("# comment\n127.0.0.1 localhost\n203.0.113.50 Pinned.Test alias.test # x\n::1 ip6-localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Servers: []string{dead.LocalAddr().String(), srv.addr}, MinTTL: time.Second, MaxTTL: time.Hour,
		Timeout: 200 * time.Millisecond, HostsFile: hosts})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.LookupNetIP(t.Context(), "ip4", "a.test"); err != nil || len(got) != 2 {
		t.Fatalf("a.test through the second server: %v %v", got, err)
	}
	for host, want := range map[string][]netip.Addr{
		"pinned.test": addrs("203.0.113.50"), "alias.test.": addrs("203.0.113.50"),
		"localhost": addrs("127.0.0.1"), "198.51.100.7": addrs("198.51.100.7"),
	} {
		got, err := c.LookupNetIP(t.Context(), "ip4", host)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v %v, want %v", host, got, err, want)
		}
	}
	if n := srv.count("pinned.test.", dns.TypeA); n != 0 {
		t.Fatalf("a hosts-file name was asked %d times", n)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Config{MinTTL: 0, MaxTTL: time.Hour}); err == nil {
		t.Error("no server accepted")
	}
	if _, err := New(Config{Servers: []string{"127.0.0.1:53"}, MinTTL: time.Hour, MaxTTL: time.Second}); err == nil {
		t.Error("min_ttl > max_ttl accepted")
	}
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("search example\nnameserver 192.0.2.53\nnameserver ::1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := SystemServers(conf)
	if err != nil || !slices.Equal(got, []string{"192.0.2.53:53", "[::1]:53"}) {
		t.Fatalf("SystemServers = %v, %v", got, err)
	}
}
