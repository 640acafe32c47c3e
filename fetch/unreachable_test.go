package fetch

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// rawListener serves every connection with answer, after reading the request's headers
// (at once when the scheme is https: a TLS client speaks first).
func rawListener(t *testing.T, answer func(c net.Conn), https bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil && !https {
					return
				}
				answer(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestHostUnreachable: only a failure to reach the host (refused, DNS, TLS handshake) says the
// host is unreachable; a failure inside one response is that URL's own.
func TestHostUnreachable(t *testing.T) {
	write := func(s string) func(c net.Conn) { return func(c net.Conn) { io.WriteString(c, s) } }
	tests := []struct {
		name        string
		answer      func(c net.Conn) // nil: no server (a closed port)
		scheme      string
		lookupFails bool
		// connectTimeout: the dial times out, as a net.Dialer's does (no packet is sent)
		connectTimeout bool
		headerTimeout  time.Duration // 0: 500ms
		kind           string
		unreachable    bool
	}{
		{name: "connection refused", kind: "conn_refused", unreachable: true},
		{name: "connect timeout", connectTimeout: true, kind: "timeout", unreachable: true},
		{name: "DNS failure", lookupFails: true, kind: "dns", unreachable: true},
		{name: "TLS handshake", scheme: "https", answer: write("HTTP/1.1 400 Bad Request\r\n\r\n"), kind: "tls", unreachable: true},
		{name: "short body", answer: write("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly this"), kind: "conn_reset"},
		{name: "bad chunking", answer: write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n"), kind: "other"},
		{name: "reset after the headers", answer: func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npartial")
			time.Sleep(50 * time.Millisecond) // the reset comes a moment after the part, as from a peer that died mid-body
			c.(*net.TCPConn).SetLinger(0)     // RST on close
		}, kind: "conn_reset"},
		{name: "body too slow", answer: func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
			for i := 0; i < 40; i++ {
				if _, err := io.WriteString(c, "x"); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond) // the drip: a byte every 50 ms
			}
		}, kind: "too_slow"},
		{name: "endless 100 Continue", answer: func(c net.Conn) {
			for i := 0; i < 400; i++ {
				if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
					return
				}
				time.Sleep(5 * time.Millisecond) // the pace of a peer that stalls with 100s
			}
		}, kind: "timeout"},
		{name: "huge headers", answer: func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Filler: " + strings.Repeat("h", 1<<20) + "\r\n"
			for i := 0; i < 12; i++ {
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		}, kind: "other", headerTimeout: 10 * time.Second},
		{name: "HTTP/0.9", answer: write("<html>no status line, no headers</html>\n"), kind: "other"},
		{name: "slow headers", answer: func(c net.Conn) {
			for _, b := range []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok") {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // the drip: a header byte every 20 ms
			}
		}, kind: "timeout"},
		{name: "silent after accept", answer: func(c net.Conn) { time.Sleep(2 * time.Second) /* a peer that says nothing */ }, kind: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testClientConfig()
			cfg.HeaderTimeout = cmp.Or(tt.headerTimeout, 500*time.Millisecond)
			cfg.BodyTimeout = time.Second
			cfg.MinRate = 1000
			cfg.RateWindow = 200 * time.Millisecond
			c := newTestClient(t, cfg)
			var addr string
			if tt.answer != nil {
				addr = rawListener(t, tt.answer, tt.scheme == "https")
			} else {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr = ln.Addr().String()
				ln.Close()
			}
			_, port, _ := net.SplitHostPort(addr)
			c.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				if tt.lookupFails {
					return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
				}
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			c.cfg.Resolver = resolverFunc(c.lookup) // take the lookup path with AllowPrivate too
			if tt.connectTimeout {
				c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
					return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
				}
			}
			scheme := tt.scheme
			if scheme == "" {
				scheme = "http"
			}
			_, err := c.Fetch(clientTestCtx(t), scheme+"://case.example:"+port+"/")
			if err == nil {
				t.Fatal("fetch succeeded")
			}
			if k := ErrorKind(err); k != tt.kind {
				t.Errorf("kind %q, want %q (%v)", k, tt.kind, err)
			}
			if got := HostUnreachable(err); got != tt.unreachable {
				t.Errorf("HostUnreachable = %v, want %v (%v)", got, tt.unreachable, err)
			}
		})
	}
	for _, err := range []error{nil, errors.New("x"), context.Canceled,
		connectError{&PrivateAddressError{Host: "h", IP: netip.MustParseAddr("127.0.0.1")}}} {
		if HostUnreachable(err) {
			t.Errorf("HostUnreachable(%v) = true", err)
		}
	}
}

type resolverFunc func(ctx context.Context, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	return f(ctx, host)
}
