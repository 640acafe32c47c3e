package fetch

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// testProxy is a loopback HTTP proxy (CONNECT and forward requests) that
// sends every request, whatever its target, to one loopback backend, and
// records the targets it was asked for.
type testProxy struct {
	URL     string
	backend string // HOST:PORT every request goes to
	auth    string // wanted Proxy-Authorization ("" = none wanted)
	refuse  bool   // answer 403 to every CONNECT

	mu      sync.Mutex
	targets []string // "CONNECT host:port" or "GET absolute-URL"
	conns   []net.Conn
	wg      sync.WaitGroup
	srv     *httptest.Server
}

func newTestProxy(t *testing.T, backend, auth string) *testProxy {
	p := &testProxy{backend: backend, auth: auth}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(func() {
		p.srv.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *testProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func (p *testProxy) serve(w http.ResponseWriter, r *http.Request) {
	target := r.Method + " " + r.RequestURI
	p.mu.Lock()
	p.targets = append(p.targets, target)
	p.mu.Unlock()
	if p.auth != "" && r.Header.Get("Proxy-Authorization") != p.auth {
		w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
		http.Error(w, "proxy auth", http.StatusProxyAuthRequired)
		return
	}
	if r.Method == http.MethodConnect {
		if p.refuse {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		up, err := net.Dial("tcp", p.backend)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, conn, up)
		p.mu.Unlock()
		_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, brw); up.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(conn, up); conn.Close() }()
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", p.backend)
	}}
	defer tr.CloseIdleConnections()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	resp, err := tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// proxyClient is a client that resolves names with the table names (no
// real DNS), goes through proxy and trusts tlsSrv's certificate.
func proxyClient(t *testing.T, proxy string, names map[string][]string, tlsSrv *httptest.Server) *Client {
	t.Helper()
	cfg := DefaultClientConfig()
	pf, err := NewProxyFunc(proxy, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.Proxy = pf
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range names[host] {
			out = append(out, netip.MustParseAddr(s))
		}
		if len(out) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return out, nil
	}
	if tlsSrv != nil {
		pool := x509.NewCertPool()
		pool.AddCert(tlsSrv.Certificate())
		c.tlsConf.RootCAs = pool
	}
	return c
}

// The addresses the fake names resolve to: documentation and private
// ranges. Nothing is ever sent to them: the proxy sends every request to
// its loopback backend.
var proxyNames = map[string][]string{
	"site.test":         {"203.0.113.7"},
	"evil.test":         {"127.0.0.1"},
	"meta.test":         {"169.254.169.254"},
	"mixed.test":        {"10.0.0.1", "203.0.113.8"},
	"www.example.com":   {"203.0.113.9"}, // names httptest's certificate is valid for
	"mixed.example.com": {"10.0.0.1", "203.0.113.8"},
}

func TestProxyForward(t *testing.T) {
	var gotHost, gotURI, gotAuth string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHost, gotURI, gotAuth = r.Host, r.RequestURI, r.Header.Get("Proxy-Authorization")
		fmt.Fprint(w, "hello from the origin")
	}))
	defer backend.Close()
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("crawler:s3cret"))
	p := newTestProxy(t, strings.TrimPrefix(backend.URL, "http://"), wantAuth)
	pu, _ := url.Parse(p.URL)
	pu.User = url.UserPassword("crawler", "s3cret")
	c := proxyClient(t, pu.String(), proxyNames, nil)

	resp, err := c.Fetch(t.Context(), "http://site.test/page?q=1")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || string(resp.Body) != "hello from the origin" {
		t.Fatalf("got %d %q", resp.Status, resp.Body)
	}
	if seen := p.seen(); len(seen) != 1 || seen[0] != "GET http://site.test/page?q=1" {
		t.Fatalf("proxy saw %q", seen)
	}
	if gotHost != "site.test" || gotURI != "/page?q=1" || gotAuth != "" {
		t.Fatalf("origin saw Host %q, URI %q, Proxy-Authorization %q", gotHost, gotURI, gotAuth)
	}
	if !strings.HasPrefix(string(resp.RequestDump), "GET /page?q=1 HTTP/1.1\r\nHost: site.test\r\n") || strings.Contains(string(resp.RequestDump), "Proxy-") {
		t.Fatalf("the archived request is not the origin's: %q", resp.RequestDump)
	}
	// The connection to the proxy is kept for the host's next request.
	if _, err := c.Fetch(t.Context(), "http://site.test/next"); err != nil {
		t.Fatal(err)
	}
	if seen := p.seen(); len(seen) != 2 || seen[1] != "GET http://site.test/next" {
		t.Fatalf("proxy saw %q", seen)
	}
}

func TestProxyConnect(t *testing.T) {
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "tls origin %s", r.Host)
	}))
	defer backend.Close()
	p := newTestProxy(t, strings.TrimPrefix(backend.URL, "https://"), "")
	c := proxyClient(t, p.URL, proxyNames, backend)

	resp, err := c.Fetch(t.Context(), "https://www.example.com/secure")
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "tls origin www.example.com" {
		t.Fatalf("body %q", resp.Body)
	}
	// The tunnel goes to the address checked here, not to a name the
	// proxy would resolve again.
	if seen := p.seen(); len(seen) != 1 || seen[0] != "CONNECT 203.0.113.9:443" {
		t.Fatalf("proxy saw %q", seen)
	}
	if resp.IP != "203.0.113.9" {
		t.Fatalf("response IP %q, want the target's", resp.IP)
	}
	// Of a name with a private and a public address, only the public one is tunnelled to.
	if _, err := c.Fetch(t.Context(), "https://mixed.example.com/"); err != nil {
		t.Fatal(err)
	}
	if seen := p.seen(); len(seen) != 2 || seen[1] != "CONNECT 203.0.113.8:443" {
		t.Fatalf("proxy saw %q", seen)
	}

	p.refuse = true
	_, err = c.Fetch(t.Context(), "https://site.test/")
	if !errors.Is(err, ErrProxy) || ErrorKind(err) != "proxy" || !strings.Contains(err.Error(), "403") {
		t.Fatalf("refused CONNECT: %v (kind %q)", err, ErrorKind(err))
	}
}

// TestProxyGuard: the private-address guard applies to the target of a
// proxied request: nothing reaches the proxy for a private target.
func TestProxyGuard(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer backend.Close()
	p := newTestProxy(t, strings.TrimPrefix(backend.URL, "http://"), "")
	c := proxyClient(t, p.URL, proxyNames, nil)
	for _, u := range []string{
		"http://evil.test/", "https://evil.test/", "http://meta.test/latest/meta-data/",
		"http://mixed.test/", // the proxy resolves an http target's name itself: every address must be public
		"http://10.1.2.3/", "https://[fd00::1]/", "http://169.254.169.254/",
	} {
		_, err := c.Fetch(t.Context(), u)
		if !errors.Is(err, ErrPrivateAddress) || ErrorKind(err) != "private_address" {
			t.Errorf("%s: %v, want a private address refusal", u, err)
		}
	}
	if seen := p.seen(); len(seen) != 0 {
		t.Fatalf("the proxy was asked for private targets: %q", seen)
	}
}

func TestNewProxyFunc(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name   string
		proxy  string
		env    map[string]string
		target string
		want   string // "" : direct
	}{
		{"none", "", nil, "http://a.test/", ""},
		{"configured", "http://p.test:3128", nil, "https://a.test/", "http://p.test:3128"},
		{"configured, no_proxy", "http://p.test:3128", map[string]string{"NO_PROXY": "a.test"}, "http://a.test/", ""},
		{"https_proxy", "", map[string]string{"HTTPS_PROXY": "http://s.test:8080"}, "https://a.test/", "http://s.test:8080"},
		{"https_proxy not for http", "", map[string]string{"HTTPS_PROXY": "http://s.test:8080"}, "http://a.test/", ""},
		{"http_proxy lower case", "", map[string]string{"http_proxy": "h.test:8080"}, "http://a.test/", "http://h.test:8080"},
		{"no_proxy domain", "", map[string]string{"HTTP_PROXY": "http://h.test", "NO_PROXY": ".internal.test"}, "http://x.internal.test/", ""},
		{"no_proxy other", "", map[string]string{"HTTP_PROXY": "http://h.test", "NO_PROXY": ".internal.test"}, "http://x.test/", "http://h.test"},
		{"loopback never", "http://p.test:3128", nil, "http://127.0.0.1:8080/", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewProxyFunc(tc.proxy, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if f != nil {
				u, _ := url.Parse(tc.target)
				p, err := f(u)
				if err != nil {
					t.Fatal(err)
				}
				if p != nil {
					got = p.String()
				}
			}
			if got != tc.want {
				t.Fatalf("proxy for %s = %q, want %q", tc.target, got, tc.want)
			}
		})
	}
	for _, bad := range []string{"socks5://p.test:1080", "ftp://p.test", "http://"} {
		if _, err := NewProxyFunc(bad, env(nil)); err == nil {
			t.Errorf("proxy %q accepted", bad)
		}
	}
	if _, err := NewProxyFunc("", env(map[string]string{"HTTPS_PROXY": "socks5://x:1"})); err == nil {
		t.Error("HTTPS_PROXY=socks5://... accepted")
	}
}

// TestProxyResolveRuleDirect: a host a resolve rule sends elsewhere is
// dialled directly, not through the proxy.
func TestProxyResolveRuleDirect(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "direct") }))
	defer backend.Close()
	p := newTestProxy(t, "127.0.0.1:1", "")
	cfg := DefaultClientConfig()
	cfg.AllowPrivate = true
	rule, err := ParseResolve("direct.test=" + strings.TrimPrefix(backend.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Resolve = []ResolveRule{rule}
	if cfg.Proxy, err = NewProxyFunc(p.URL, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Fetch(t.Context(), "http://direct.test/")
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != "direct" {
		t.Fatalf("body %q", resp.Body)
	}
	if seen := p.seen(); len(seen) != 0 {
		t.Fatalf("proxy saw %q", seen)
	}
}
