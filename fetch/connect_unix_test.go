//go:build unix

package fetch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// silentAddr is a loopback address that accepts nothing: a listen queue of
// one place, taken by a connection never accepted, so the kernel drops
// every further SYN.
func silentAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	filler, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	return addr
}

// blockingResolver answers no lookup before its context ends, then fails
// it as a resolver does (not as a timeout).
type blockingResolver struct{}

func (blockingResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	<-ctx.Done()
	return nil, &net.DNSError{Err: "lookup gave up", Name: host, IsTemporary: true}
}

// InConnect tells a failure to open the connection (a connect timeout, a
// refusal) from one after it (a header timeout); a shortened connect
// timeout that runs out in the lookup is a timeout too; ConnectTime is set
// on a new connection and 0 on a reused one.
func TestInConnect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	cl := newTestClient(t, testClientConfig())
	slowDNS := testClientConfig()
	slowDNS.Resolver = blockingResolver{}
	slowCl := newTestClient(t, slowDNS)
	tests := []struct {
		cl        *Client
		name, url string
		to        Timeouts
		wantKind  string
		inConnect bool
	}{
		{cl, "connect timeout", "http://" + silentAddr(t) + "/", Timeouts{Connect: 100 * time.Millisecond}, "timeout", true},
		{slowCl, "connect timeout in the lookup", "http://slow.invalid/", Timeouts{Connect: 100 * time.Millisecond}, "timeout", true},
		{cl, "refused", "http://" + refused + "/", Timeouts{}, "conn_refused", true},
		{cl, "header timeout", srv.URL + "/hang", Timeouts{Header: 50 * time.Millisecond}, "timeout", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds the test, never reached
			defer cancel()
			_, err := tc.cl.Fetch(WithTimeouts(ctx, tc.to), tc.url)
			if got := ErrorKind(err); got != tc.wantKind {
				t.Fatalf("error kind %q (%v), want %q", got, err, tc.wantKind)
			}
			if got := InConnect(err); got != tc.inConnect {
				t.Errorf("InConnect(%v) = %v, want %v", err, got, tc.inConnect)
			}
		})
	}
	if InConnect(nil) {
		t.Error("InConnect(nil)")
	}
	r1, err := cl.Fetch(context.Background(), srv.URL+"/a")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := cl.Fetch(context.Background(), srv.URL+"/b")
	if err != nil {
		t.Fatal(err)
	}
	if r1.ConnectTime <= 0 || r2.ConnectTime != 0 {
		t.Errorf("connect times %s (new connection) and %s (reused), want > 0 and 0", r1.ConnectTime, r2.ConnectTime)
	}
}
