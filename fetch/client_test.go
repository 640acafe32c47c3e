package fetch

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/robots"
)

func testClientConfig() ClientConfig {
	c := DefaultClientConfig()
	c.AllowPrivate = true
	c.ConnectTimeout = 2 * time.Second
	c.HeaderTimeout = 2 * time.Second
	c.BodyTimeout = 2 * time.Second
	c.MaxBodySize = 1 << 20
	return c
}

func newTestClient(t *testing.T, c ClientConfig) *Client {
	t.Helper()
	cl, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func clientTestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestClientConfigValidate(t *testing.T) {
	mod := func(f func(*ClientConfig)) ClientConfig { c := DefaultClientConfig(); f(&c); return c }
	tests := []struct {
		name string
		c    ClientConfig
		key  string // "" = valid
	}{
		{"default", DefaultClientConfig(), ""},
		{"no ua", mod(func(c *ClientConfig) { c.UserAgent = " " }), "user_agent"},
		{"ua newline", mod(func(c *ClientConfig) { c.UserAgent = "a\r\nX: y" }), "user_agent"},
		{"connect 0", mod(func(c *ClientConfig) { c.ConnectTimeout = 0 }), "connect_timeout"},
		{"header huge", mod(func(c *ClientConfig) { c.HeaderTimeout = time.Hour }), "header_timeout"},
		{"body neg", mod(func(c *ClientConfig) { c.BodyTimeout = -1 }), "body_timeout"},
		{"max body 0", mod(func(c *ClientConfig) { c.MaxBodySize = 0 }), "max_body_size"},
		{"max body huge", mod(func(c *ClientConfig) { c.MaxBodySize = 2 << 30 }), "max_body_size"},
		{"idle neg", mod(func(c *ClientConfig) { c.MaxIdleConns = -1 }), "max_idle_conns"},
		{"bad rule", mod(func(c *ClientConfig) { c.Resolve = []ResolveRule{{Pattern: "a", Addr: "nope"}} }), "resolve[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if tt.key == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("err = %v, want one naming %q", err, tt.key)
			}
			if _, err := NewClient(tt.c); err == nil {
				t.Fatal("NewClient accepted an invalid config")
			}
		})
	}
}

func TestFetchStatusAndHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.Header().Set("Content-Type", "text/HTML; charset=utf-8")
		w.Header().Set("X-UA", r.Header.Get("User-Agent"))
		w.Header().Set("X-AE", r.Header.Get("Accept-Encoding"))
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	}))
	defer srv.Close()
	cfg := testClientConfig()
	cfg.UserAgent = "phasecrawl-test/1"
	c := newTestClient(t, cfg)
	for _, code := range []int{200, 203, 404, 410, 500, 503} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			r, err := c.Fetch(clientTestCtx(t), srv.URL+"/"+strconv.Itoa(code))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != code || string(r.Body) != fmt.Sprintf("status %d", code) || r.Truncated {
				t.Fatalf("status %d body %q truncated %v", r.Status, r.Body, r.Truncated)
			}
			if r.ContentType != "text/html" || r.Proto != "HTTP/1.1" || r.IP != "127.0.0.1" || r.Location != "" {
				t.Fatalf("ct %q proto %q ip %q loc %q", r.ContentType, r.Proto, r.IP, r.Location)
			}
			if r.Header.Get("X-UA") != "phasecrawl-test/1" || r.Header.Get("X-AE") != "gzip, deflate" {
				t.Fatalf("request headers seen by server: %v", r.Header)
			}
			u, _ := url.Parse(srv.URL)
			want := "GET /" + strconv.Itoa(code) + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: phasecrawl-test/1\r\nAccept-Encoding: gzip, deflate\r\n\r\n"
			if string(r.RequestDump) != want {
				t.Fatalf("RequestDump = %q, want %q", r.RequestDump, want)
			}
		})
	}
}

func TestFetchRedirectNotFollowed(t *testing.T) {
	var targetHits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a/b":
			w.Header().Set("Location", "../c?x=1#frag")
			w.WriteHeader(http.StatusMovedPermanently)
		case "/abs":
			w.Header().Set("Location", "https://example.org/z")
			w.WriteHeader(http.StatusFound)
		case "/none":
			w.WriteHeader(http.StatusFound)
		default:
			targetHits.Add(1)
		}
	}))
	defer srv.Close()
	c := newTestClient(t, testClientConfig())
	tests := []struct{ path, loc string }{
		{"/a/b", srv.URL + "/c?x=1#frag"},
		{"/abs", "https://example.org/z"},
		{"/none", ""},
	}
	for _, tt := range tests {
		r, err := c.Fetch(clientTestCtx(t), srv.URL+tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status < 300 || r.Status > 399 || r.Location != tt.loc {
			t.Errorf("%s: status %d Location %q, want 3xx %q", tt.path, r.Status, r.Location, tt.loc)
		}
	}
	if n := targetHits.Load(); n != 0 {
		t.Fatalf("redirect target fetched %d times", n)
	}
}

func clientGzip(t testing.TB, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestFetchDecoding(t *testing.T) {
	plain := bytes.Repeat([]byte("<a href=/x>hello</a>\n"), 500)
	var zl, fl bytes.Buffer
	zw := zlib.NewWriter(&zl)
	zw.Write(plain)
	zw.Close()
	fw, _ := flate.NewWriter(&fl, flate.BestSpeed)
	fw.Write(plain)
	fw.Close()
	gz := clientGzip(t, plain)
	tests := []struct {
		name, enc string
		raw, want []byte
	}{
		{"identity", "", plain, plain},
		{"identity explicit", "identity", plain, plain},
		{"gzip", "gzip", gz, plain},
		{"x-gzip", "x-gzip", gz, plain},
		{"deflate zlib", "deflate", zl.Bytes(), plain},
		{"deflate raw", "deflate", fl.Bytes(), plain},
		{"unknown", "br", gz, gz},
		{"corrupt gzip header", "gzip", []byte("not gzip at all"), []byte("not gzip at all")},
		{"truncated gzip keeps prefix", "gzip", gz[:len(gz)/2], nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.enc != "" {
					w.Header().Set("Content-Encoding", tt.enc)
				}
				w.Write(tt.raw)
			}))
			defer srv.Close()
			r, err := newTestClient(t, testClientConfig()).Fetch(clientTestCtx(t), srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.RawBody, tt.raw) {
				t.Fatalf("RawBody differs from the transferred bytes (%d vs %d)", len(r.RawBody), len(tt.raw))
			}
			if tt.want == nil {
				if len(r.Body) == 0 || !bytes.HasPrefix(plain, r.Body) {
					t.Fatalf("partial decode: got %d bytes, not a prefix", len(r.Body))
				}
				return
			}
			if !bytes.Equal(r.Body, tt.want) || r.Truncated {
				t.Fatalf("Body %d bytes (truncated %v), want %d", len(r.Body), r.Truncated, len(tt.want))
			}
		})
	}
}

func TestFetchBodyLimits(t *testing.T) {
	const max = 64 << 10
	bomb := clientGzip(t, make([]byte, 8<<20)) // 8 MiB of zeros, ~8 KiB compressed
	big := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bomb":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb)
		case "/big":
			w.Write(big)
		case "/exact":
			w.Write(big[:max])
		}
	}))
	defer srv.Close()
	cfg := testClientConfig()
	cfg.MaxBodySize = max
	c := newTestClient(t, cfg)

	r, err := c.Fetch(clientTestCtx(t), srv.URL+"/bomb")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Body) != max || !bytes.Equal(r.RawBody, bomb) {
		t.Fatalf("bomb: truncated %v body %d raw %d", r.Truncated, len(r.Body), len(r.RawBody))
	}
	r, err = c.Fetch(clientTestCtx(t), srv.URL+"/big")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.RawBody) != max || !bytes.Equal(r.Body, big[:max]) {
		t.Fatalf("big: truncated %v body %d raw %d", r.Truncated, len(r.Body), len(r.RawBody))
	}
	r, err = c.Fetch(clientTestCtx(t), srv.URL+"/exact")
	if err != nil {
		t.Fatal(err)
	}
	if r.Truncated || len(r.Body) != max {
		t.Fatalf("exact: truncated %v body %d", r.Truncated, len(r.Body))
	}
}

func TestFetchHeaderTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() { // accepts, reads, never answers
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(io.Discard, conn) }()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	cfg := testClientConfig()
	cfg.HeaderTimeout = 150 * time.Millisecond
	_, err = newTestClient(t, cfg).Fetch(clientTestCtx(t), "http://"+ln.Addr().String()+"/")
	if err == nil || ErrorKind(err) != "timeout" {
		t.Fatalf("err = %v (kind %q), want timeout", err, ErrorKind(err))
	}
}

func TestFetchBodyTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 250; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				w.Write([]byte("x"))
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	cfg := testClientConfig()
	cfg.BodyTimeout = 150 * time.Millisecond
	_, err := newTestClient(t, cfg).Fetch(clientTestCtx(t), srv.URL)
	if !errors.Is(err, ErrBodyTimeout) || ErrorKind(err) != "timeout" {
		t.Fatalf("err = %v (kind %q), want ErrBodyTimeout", err, ErrorKind(err))
	}
}

func TestConnectionReuse(t *testing.T) {
	var newConns, active, maxActive atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			m := maxActive.Load()
			if n <= m || maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(clientGzip(t, []byte("page "+r.URL.Path)))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newTestClient(t, testClientConfig())
	for i := 0; i < 20; i++ {
		r, err := c.Fetch(clientTestCtx(t), fmt.Sprintf("%s/p%d", srv.URL, i))
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Body) != fmt.Sprintf("page /p%d", i) {
			t.Fatalf("body %q", r.Body)
		}
	}
	if n := newConns.Load(); n != 1 {
		t.Fatalf("20 sequential requests used %d connections, want 1", n)
	}
	// Concurrent callers to one host share that single connection (MaxConnsPerHost 1).
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				if _, err := c.Fetch(clientTestCtx(t), srv.URL+"/c"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n, m := newConns.Load(), maxActive.Load(); n != 1 || m != 1 {
		t.Fatalf("concurrent callers: %d connections, %d concurrent requests; want 1 and 1", n, m)
	}
}

func TestResolveRulesDial(t *testing.T) {
	var hosts sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts.Store(r.Host, true)
		io.WriteString(w, "host="+r.Host)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	rule, err := ParseResolve("*.synth.test=" + addr)
	if err != nil {
		t.Fatal(err)
	}
	portRule, err := ParseResolve("only.test:8080=" + addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testClientConfig()
	cfg.Resolve = []ResolveRule{rule, portRule}
	c := newTestClient(t, cfg)
	for _, u := range []string{"http://www.synth.test/x", "http://A.Synth.Test:" + port + "/", "http://only.test:8080/"} {
		r, err := c.Fetch(clientTestCtx(t), u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		pu, _ := url.Parse(u)
		if string(r.Body) != "host="+pu.Host || r.IP != "127.0.0.1" {
			t.Fatalf("%s: body %q ip %q", u, r.Body, r.IP)
		}
		if !bytes.Contains(r.RequestDump, []byte("\r\nHost: "+pu.Host+"\r\n")) {
			t.Fatalf("RequestDump %q", r.RequestDump)
		}
	}
	// only.test on another port does not match the port-restricted rule and is not resolvable.
	if _, err := c.Fetch(clientTestCtx(t), "http://only.test:8081/"); err == nil {
		t.Fatal("only.test:8081 should not be rewritten")
	}
}

func TestPrivateAddressGuard(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	cfg := testClientConfig()
	cfg.AllowPrivate = false
	c := newTestClient(t, cfg) // --resolve targets: TestGuardResolveTargets
	for _, u := range []string{
		srv.URL,                          // literal loopback
		"http://localhost:" + port + "/", // a name resolving to loopback
		"http://[::1]:" + port + "/",
		"http://169.254.169.254/latest/meta-data/",
		"http://10.1.2.3/",
	} {
		_, err := c.Fetch(clientTestCtx(t), u)
		if !errors.Is(err, ErrPrivateAddress) || ErrorKind(err) != "private_address" {
			if strings.Contains(u, "localhost") && ErrorKind(err) == "dns" {
				continue // no resolver for localhost in this sandbox
			}
			t.Errorf("%s: err = %v (kind %q), want private_address", u, err, ErrorKind(err))
		}
		var pe *PrivateAddressError
		if err != nil && errors.As(err, &pe) && !IsPrivateAddr(pe.IP) {
			t.Errorf("%s: refused public %s", u, pe.IP)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("server saw %d connections", n)
	}
}

func TestErrorKindLive(t *testing.T) {
	c := newTestClient(t, testClientConfig())
	// conn_refused: a port that was just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, err = c.Fetch(clientTestCtx(t), "http://"+closed+"/")
	if k := ErrorKind(err); k != "conn_refused" {
		t.Errorf("closed port: kind %q (%v)", k, err)
	}
	// tls: a certificate nobody trusts.
	tsrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	tsrv.Config.ErrorLog = nil
	defer tsrv.Close()
	_, err = c.Fetch(clientTestCtx(t), tsrv.URL)
	if k := ErrorKind(err); k != "tls" {
		t.Errorf("untrusted cert: kind %q (%v)", k, err)
	}
	// conn_reset: the server closes without answering.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln2.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1024)
			conn.Read(buf)
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			conn.Close()
		}
	}()
	_, err = c.Fetch(clientTestCtx(t), "http://"+ln2.Addr().String()+"/")
	if k := ErrorKind(err); k != "conn_reset" {
		t.Errorf("reset: kind %q (%v)", k, err)
	}
	ln2.Close()
	<-done
	// canceled and bad_url.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Fetch(ctx, "http://"+closed+"/")
	if k := ErrorKind(err); k != "canceled" {
		t.Errorf("canceled: kind %q (%v)", k, err)
	}
	for _, u := range []string{"ftp://x/", "/relative", "http://", "http://a b/"} {
		if _, err := c.Fetch(clientTestCtx(t), u); ErrorKind(err) != "bad_url" {
			t.Errorf("%q: kind %q (%v)", u, ErrorKind(err), err)
		}
	}
}

type clientFakeTimeout struct{}

func (clientFakeTimeout) Error() string   { return "i/o timeout" }
func (clientFakeTimeout) Timeout() bool   { return true }
func (clientFakeTimeout) Temporary() bool { return true }

func TestErrorKindTable(t *testing.T) {
	wrapURL := func(err error) error {
		return fmt.Errorf("fetch: %w", &url.Error{Op: "Get", URL: "http://x/", Err: err})
	}
	opErr := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{wrapURL(opErr(&PrivateAddressError{Host: "x", IP: netip.MustParseAddr("10.0.0.1")})), "private_address"},
		{wrapURL(opErr(&net.DNSError{Err: "no such host", Name: "x", IsNotFound: true})), "dns"},
		{wrapURL(opErr(&net.DNSError{Err: "timeout", Name: "x", IsTimeout: true})), "dns"},
		{wrapURL(opErr(clientFakeTimeout{})), "timeout"},
		{wrapURL(context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("x: %w", ErrBodyTimeout), "timeout"},
		{wrapURL(context.Canceled), "canceled"},
		{wrapURL(opErr(&net.OpError{Op: "read", Err: syscall.ECONNREFUSED})), "conn_refused"},
		{wrapURL(opErr(syscall.ECONNRESET)), "conn_reset"},
		{wrapURL(io.EOF), "conn_reset"},
		{wrapURL(io.ErrUnexpectedEOF), "conn_reset"},
		{wrapURL(x509.UnknownAuthorityError{}), "tls"},
		{wrapURL(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), "tls"},
		{wrapURL(tls.AlertError(40)), "tls"},
		{fmt.Errorf("a: %w", ErrBadURL), "bad_url"},
		{fmt.Errorf("x: %w", ErrTooSlow), "too_slow"},
		{fmt.Errorf("robots: HTTP 503: %w: %w", robots.ErrUnavailable, robots.ErrStatus), "http_5xx"},
		{errors.New("something else"), "other"},
	}
	for i, tt := range tests {
		if got := ErrorKind(tt.err); got != tt.want {
			t.Errorf("%d: ErrorKind(%v) = %q, want %q", i, tt.err, got, tt.want)
		}
		if tt.err != nil {
			found := false
			for _, k := range ErrorKinds {
				found = found || k == tt.want
			}
			if !found {
				t.Errorf("%q missing from ErrorKinds", tt.want)
			}
		}
	}
}

// chunky returns its data a few bytes at a time, then err.
type chunky struct {
	data []byte
	step int
	err  error
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, c.err
	}
	n := min(len(p), c.step, len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// TestReadBounded: readBounded returns what bytes.Buffer.ReadFrom of an
// io.LimitReader returned, with pooled buffers reused after Release.
func TestReadBounded(t *testing.T) {
	boom := errors.New("boom")
	for _, size := range []int{0, 1, 511, 512, 513, 4096, minPooledBuf + 1, 100000, maxPooledBuf + 5} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		for _, limit := range []int64{1, 512, int64(size), int64(size) + 1, 1 << 20} {
			for _, announced := range []int64{-1, 0, int64(size), 10} {
				for _, rerr := range []error{io.EOF, boom} {
					got, err := readBounded(&chunky{data: data, step: 1000, err: rerr}, limit, announced)
					var want bytes.Buffer
					_, werr := want.ReadFrom(io.LimitReader(&chunky{data: data, step: 1000, err: rerr}, limit))
					if !bytes.Equal(got, want.Bytes()) || !errors.Is(err, werr) && err != werr {
						t.Fatalf("size %d limit %d announced %d err %v: got %d bytes, %v; want %d bytes, %v", size, limit, announced, rerr, len(got), err, want.Len(), werr)
					}
					r := &Response{RawBody: got, bufs: [2][]byte{got}}
					r.Release()
					if r.RawBody != nil {
						t.Fatal("Release kept RawBody")
					}
				}
			}
		}
	}
}

// WithTimeouts shortens the header timeout of one request (never lengthens
// it): a server that hangs is cut at the shorter one, and a request
// without it still waits the client's.
func TestWithTimeouts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	c := testClientConfig()
	c.HeaderTimeout = time.Minute
	cl := newTestClient(t, c)
	tests := []struct {
		name    string
		t       Timeouts
		path    string
		wantErr string
	}{
		{"shorter header timeout cuts a hanging server", Timeouts{Header: 50 * time.Millisecond}, "/hang", "timeout"},
		{"an answer within it", Timeouts{Connect: time.Second, Header: time.Second}, "/", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds the test, never reached
			defer cancel()
			_, err := cl.Fetch(WithTimeouts(ctx, tc.t), srv.URL+tc.path)
			if got := ErrorKind(err); got != tc.wantErr {
				t.Fatalf("error kind %q (%v), want %q", got, err, tc.wantErr)
			}
			if ctx.Err() != nil {
				t.Fatal("cut by the test's bound, not by the request's header timeout")
			}
		})
	}
	if hdr, conn := (&Client{cfg: c}).timeouts(WithTimeouts(context.Background(), Timeouts{Connect: time.Hour, Header: time.Hour})); hdr != c.ConnectTimeout || conn != c.HeaderTimeout {
		t.Errorf("longer timeouts than the client's were taken: %s %s", hdr, conn)
	}
}
