package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dripServer answers 200 and then writes chunk bytes every every, up to total bytes, until the
// client goes away.
func dripServer(t *testing.T, chunk int, every time.Duration, total int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(total))
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for sent := 0; sent < total; sent += chunk {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
			if _, err := w.Write([]byte(strings.Repeat("x", min(chunk, total-sent)))); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestFetchMinRate(t *testing.T) {
	tests := []struct {
		name    string
		chunk   int
		every   time.Duration
		total   int
		wantErr bool
	}{
		// 10 bytes every 20ms = 500 B/s, below 4000 B/s: cut after the first window.
		{"slow drip", 10, 20 * time.Millisecond, 100000, true},
		// Nothing at all after the headers: the idle body is cut after one window.
		{"stalled body", 1, time.Hour, 10, true},
		// 800 bytes every 20ms = 40 kB/s: well above the floor, completes.
		{"fast enough", 800, 20 * time.Millisecond, 8000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := dripServer(t, tt.chunk, tt.every, tt.total)
			cfg := testClientConfig()
			cfg.BodyTimeout = 5 * time.Second
			cfg.MinRate = 4000
			cfg.RateWindow = 100 * time.Millisecond
			start := time.Now()
			r, err := newTestClient(t, cfg).Fetch(clientTestCtx(t), srv.URL)
			if !tt.wantErr {
				if err != nil || len(r.Body) != tt.total {
					t.Fatalf("err = %v, body %d bytes; want %d bytes", err, len(r.Body), tt.total)
				}
				return
			}
			if !errors.Is(err, ErrTooSlow) || ErrorKind(err) != "too_slow" {
				t.Fatalf("err = %v (kind %q), want ErrTooSlow", err, ErrorKind(err))
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("cut after %s, want about one rate window (100ms)", d)
			}
		})
	}
	// MinRate 0 turns the guard off: the drip then ends at the body timeout instead.
	srv := dripServer(t, 10, 20*time.Millisecond, 100000)
	cfg := testClientConfig()
	cfg.MinRate = 0
	cfg.BodyTimeout = 300 * time.Millisecond
	if _, err := newTestClient(t, cfg).Fetch(clientTestCtx(t), srv.URL); !errors.Is(err, ErrBodyTimeout) {
		t.Fatalf("guard off: err = %v, want ErrBodyTimeout", err)
	}
}

func TestClientConfigValidateRate(t *testing.T) {
	for _, tt := range []struct {
		rate   int64
		window time.Duration
		key    string
	}{
		{-1, time.Second, "min_rate=-1"},
		{1 << 31, time.Second, "min_rate="},
		{100, time.Millisecond, "rate_window=1ms"},
		{100, time.Hour, "rate_window=1h0m0s"},
		{0, 0, ""}, // off: the window is not looked at
		{100, 10 * time.Millisecond, ""},
	} {
		c := DefaultClientConfig()
		c.MinRate, c.RateWindow = tt.rate, tt.window
		err := c.Validate()
		if tt.key == "" {
			if err != nil {
				t.Errorf("rate %d window %s: %v", tt.rate, tt.window, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("rate %d window %s: err = %v, want it to name %q", tt.rate, tt.window, err, tt.key)
		}
	}
}

// countingServer is a loopback HTTP server that counts its connections.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestGuardRebindingResolver: a resolver that answers a public address for the first lookup
// and 127.0.0.1 for the next (DNS rebinding). Every connection is judged by its own lookup,
// so the second one is refused before any dial. No packet leaves loopback: the dial seam
// refuses to open the public address.
func TestGuardRebindingResolver(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	cfg := testClientConfig()
	cfg.AllowPrivate = false
	c := newTestClient(t, cfg)
	var lookups atomic.Int32
	c.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil // TEST-NET-3, looks public
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	var mu sync.Mutex
	var dialled []string
	c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, addr)
		mu.Unlock()
		if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("test: no traffic off loopback")}
		}
		return c.dialer.DialContext(ctx, network, addr)
	}
	u := "http://rebind.example:" + port + "/"
	if _, err := c.Fetch(clientTestCtx(t), u); err == nil || errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("first fetch (public answer): err = %v, want the test dialer's refusal", err)
	}
	_, err := c.Fetch(clientTestCtx(t), u)
	if !errors.Is(err, ErrPrivateAddress) || ErrorKind(err) != "private_address" {
		t.Fatalf("second fetch (rebound to 127.0.0.1): err = %v (kind %q), want private_address", err, ErrorKind(err))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != 1 || !strings.HasPrefix(dialled[0], "203.0.113.7:") {
		t.Fatalf("dialled %v, want only the public address of the first lookup", dialled)
	}
	if n := lookups.Load(); n != 2 {
		t.Fatalf("%d lookups, want one per connection (2)", n)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the loopback server saw %d connections", n)
	}
}

// TestGuardChecksDialledAddress: the name-level check is fooled (the resolver says public),
// but the dial lands on 127.0.0.1 — as a resolver inside the dial path would make it. The
// dialer's Control hook judges the socket's real address and refuses it.
func TestGuardChecksDialledAddress(t *testing.T) {
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") })
	target := strings.TrimPrefix(srv.URL, "http://")
	cfg := testClientConfig()
	cfg.AllowPrivate = false
	c := newTestClient(t, cfg)
	c.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("203.0.113.8")}, nil
	}
	var dials atomic.Int32
	c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return c.dialer.DialContext(ctx, network, target) // rebound under our feet
	}
	_, err := c.Fetch(clientTestCtx(t), "http://rebind.example/")
	if !errors.Is(err, ErrPrivateAddress) || ErrorKind(err) != "private_address" {
		t.Fatalf("err = %v (kind %q), want private_address from the dial-time check", err, ErrorKind(err))
	}
	var pe *PrivateAddressError
	if !errors.As(err, &pe) || pe.IP != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("refused %v, want the dialled 127.0.0.1", pe)
	}
	if dials.Load() != 1 || conns.Load() != 0 {
		t.Fatalf("dials %d, server connections %d; want 1 and 0", dials.Load(), conns.Load())
	}
}

// TestGuardRedirectToPrivate: a public-looking site answers 302 to a loopback URL. The client
// never follows it; fetching the Location (as the node routes it, as a new URL) goes through the
// dialer again and is refused.
func TestGuardRedirectToPrivate(t *testing.T) {
	var internal atomic.Int32
	inner, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		internal.Add(1)
		io.WriteString(w, "internal")
	})
	outer, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/admin", http.StatusFound)
	})
	outerAddr := strings.TrimPrefix(outer.URL, "http://")
	cfg := testClientConfig()
	cfg.AllowPrivate = false
	c := newTestClient(t, cfg)
	c.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "public.example" {
			return []netip.Addr{netip.MustParseAddr("203.0.113.9")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	// The "internet": the public test address is served by the loopback outer server, reached
	// with a plain dialer (no guard) so the test sees the redirect.
	var plain net.Dialer
	guarded := c.dial
	c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "203.0.113.9:") {
			return plain.DialContext(ctx, network, outerAddr)
		}
		return guarded(ctx, network, addr)
	}
	r, err := c.Fetch(clientTestCtx(t), "http://public.example/")
	if err != nil || r.Status != http.StatusFound || r.Location != inner.URL+"/admin" {
		t.Fatalf("outer fetch: %v, %+v", err, r)
	}
	if _, err := c.Fetch(clientTestCtx(t), r.Location); !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("redirect target: err = %v, want private_address", err)
	}
	if internal.Load() != 0 {
		t.Fatalf("the internal server was reached %d times", internal.Load())
	}
}
