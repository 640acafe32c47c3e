package fetch

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestIsPrivateAddr(t *testing.T) {
	tests := []struct {
		ip      string
		private bool
	}{
		{"127.0.0.1", true}, {"127.255.0.9", true}, {"::1", true},
		{"10.0.0.1", true}, {"172.16.0.1", true}, {"172.31.255.255", true}, {"192.168.1.1", true},
		{"100.64.0.1", true}, {"100.127.255.254", true},
		{"169.254.169.254", true}, {"169.254.0.1", true}, {"fe80::1", true},
		{"fc00::1", true}, {"fd12:3456::1", true},
		{"0.0.0.0", true}, {"::", true}, {"0.1.2.3", true},
		{"224.0.0.1", true}, {"239.1.1.1", true}, {"ff02::1", true}, {"255.255.255.255", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"64:ff9b::a9fe:a9fe", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"172.32.0.1", false}, {"100.128.0.1", false},
		{"2606:4700:4700::1111", false}, {"::ffff:8.8.8.8", false}, {"64:ff9b::808:808", false},
		{"93.184.216.34", false},
	}
	for _, tt := range tests {
		if got := IsPrivateAddr(netip.MustParseAddr(tt.ip)); got != tt.private {
			t.Errorf("IsPrivateAddr(%s) = %v, want %v", tt.ip, got, tt.private)
		}
	}
	if !IsPrivateAddr(netip.Addr{}) {
		t.Error("invalid address must count as private")
	}
	err := error(&PrivateAddressError{Host: "h", IP: netip.MustParseAddr("10.0.0.1")})
	if !errors.Is(err, ErrPrivateAddress) {
		t.Error("PrivateAddressError does not match ErrPrivateAddress")
	}
}

func TestDialControlRefusesPrivate(t *testing.T) {
	c := DefaultClientConfig()
	cl, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctl := cl.dialer.ControlContext
	if ctl == nil {
		t.Fatal("no dial-time guard when AllowPrivate is false")
	}
	if err := ctl(t.Context(), "tcp4", "169.254.169.254:80", nil); !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("metadata address: %v", err)
	}
	if err := ctl(t.Context(), "tcp4", "8.8.8.8:80", nil); err != nil {
		t.Fatalf("public address: %v", err)
	}
}

// TestGuardCheck: --allow-private opens loopback and private addresses, never link-local ones
// or the cloud metadata endpoints, which only fetch.allow_link_local opens; a --resolve target
// (given) needs no --allow-private.
func TestGuardCheck(t *testing.T) {
	const (
		none = iota
		priv
		link
	)
	addrs := []struct {
		ip   string
		kind int
	}{
		{"8.8.8.8", none}, {"2606:4700:4700::1111", none},
		{"127.0.0.1", priv}, {"::1", priv}, {"10.1.2.3", priv}, {"fd12:3456::1", priv}, {"::ffff:127.0.0.1", priv},
		{"169.254.169.254", link}, {"169.254.0.1", link}, {"fe80::1", link}, {"fd00:ec2::254", link},
		{"::ffff:169.254.169.254", link}, {"64:ff9b::a9fe:a9fe", link}, {"ff02::1", priv}, {"224.0.0.1", priv},
	}
	for _, a := range addrs {
		ip := netip.MustParseAddr(a.ip)
		if got := IsLinkLocalAddr(ip); got != (a.kind == link) {
			t.Errorf("IsLinkLocalAddr(%s) = %v", a.ip, got)
		}
		for _, g := range []Guard{{}, {AllowPrivate: true}, {AllowLinkLocal: true}, {AllowPrivate: true, AllowLinkLocal: true}} {
			for _, given := range []bool{false, true} {
				want := true // allowed
				switch a.kind {
				case priv:
					want = g.AllowPrivate || given
				case link:
					want = g.AllowLinkLocal
				}
				err := g.Check("h", ip, given)
				if (err != nil) == want {
					t.Errorf("%+v given=%v: Check(%s) = %v, want refused=%v", g, given, a.ip, err, !want)
				}
				var pe *PrivateAddressError
				if err != nil && (!errors.Is(err, ErrPrivateAddress) || !errors.As(err, &pe) || pe.LinkLocal != (a.kind == link) || ErrorKind(err) != "private_address") {
					t.Errorf("%s: refusal %v (%+v) is not a typed private_address one", a.ip, err, pe)
				}
			}
		}
	}
}

// TestDialControlLinkLocal: with --allow-private the dial-time check still refuses link-local
// and metadata addresses; with fetch.allow_link_local as well there is no check at all.
func TestDialControlLinkLocal(t *testing.T) {
	c := DefaultClientConfig()
	c.AllowPrivate = true
	cl, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctl := cl.dialer.ControlContext
	if ctl == nil {
		t.Fatal("no dial-time guard with AllowPrivate but not AllowLinkLocal")
	}
	for _, a := range []string{"169.254.169.254:80", "[fd00:ec2::254]:80", "[fe80::1]:80"} {
		if err := ctl(t.Context(), "tcp", a, nil); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("%s: %v, want refused", a, err)
		}
	}
	if err := ctl(t.Context(), "tcp4", "127.0.0.1:80", nil); err != nil {
		t.Errorf("loopback with AllowPrivate: %v", err)
	}
	c.AllowLinkLocal = true
	open, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if open.dialer.ControlContext != nil {
		t.Error("a dial-time guard with both AllowPrivate and AllowLinkLocal")
	}
}

// TestGuardResolveTargets: a --resolve target on loopback is fetched without AllowPrivate;
// other names stay refused, and a link-local address is refused even with AllowPrivate or as a
// --resolve target, before any dial. The dial seam refuses anything off loopback, so no
// packet leaves the machine whatever the guard does.
func TestGuardResolveTargets(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "given") })
	target := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(target)
	tests := []struct {
		name         string
		allowPrivate bool
		url          string
		linkLocal    bool // the refusal is the link-local one
		fetched      bool
	}{
		{name: "resolve target on loopback", url: "http://given.example/", fetched: true},
		{name: "resolve target at a link-local address", url: "http://meta.example/", linkLocal: true},
		{name: "name resolving to loopback", url: "http://other.example:" + port + "/"},
		{name: "loopback literal", url: "http://127.0.0.1:" + port + "/"},
		{name: "metadata literal, allow private", allowPrivate: true, url: "http://169.254.169.254/latest/meta-data/", linkLocal: true},
		{name: "metadata IPv6 literal, allow private", allowPrivate: true, url: "http://[fd00:ec2::254]/", linkLocal: true},
		{name: "name resolving to link-local, allow private", allowPrivate: true, url: "http://other.example:" + port + "/ll", linkLocal: true},
		{name: "resolve target at a link-local address, allow private", allowPrivate: true, url: "http://meta.example/", linkLocal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testClientConfig()
			cfg.AllowPrivate = tt.allowPrivate
			cfg.Resolve = []ResolveRule{{Pattern: "given.example", Addr: target}, {Pattern: "meta.example", Addr: "169.254.169.254:80"}}
			c := newTestClient(t, cfg)
			ll := strings.HasSuffix(tt.url, "/ll")
			c.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				if ll {
					return []netip.Addr{netip.MustParseAddr("169.254.10.1")}, nil
				}
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			c.cfg.Resolver = resolverFunc(c.lookup) // the guarded path also with AllowPrivate
			var dialled []string
			guarded := c.dial
			c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dialled = append(dialled, addr)
				if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
					return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("test: no traffic off loopback")}
				}
				return guarded(ctx, network, addr)
			}
			before := conns.Load()
			r, err := c.Fetch(clientTestCtx(t), tt.url)
			if tt.fetched {
				if err != nil || r.Status != 200 || string(r.Body) != "given" {
					t.Fatalf("fetch: %v %+v", err, r)
				}
				return
			}
			var pe *PrivateAddressError
			if !errors.As(err, &pe) || pe.LinkLocal != tt.linkLocal || ErrorKind(err) != "private_address" || HostUnreachable(err) {
				t.Fatalf("err = %v (%+v), want a private_address refusal (link-local %v)", err, pe, tt.linkLocal)
			}
			if len(dialled) != 0 || conns.Load() != before {
				t.Fatalf("dialled %v (%d server connections): the guard must refuse before any dial", dialled, conns.Load()-before)
			}
		})
	}
}
