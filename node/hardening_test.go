package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

const testToken = "s3cret-token-0123456789abcdef"

func writeToken(t *testing.T, tok string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAPIToken(t *testing.T) {
	srv, _ := site(t)
	c := testConfig(t, srv)
	c.Seeds = nil
	c.APITokenFile = writeToken(t, testToken)
	n, stop := start(t, c)
	defer stop()
	base := "http://" + n.Addr().String()
	post := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/seeds", strings.NewReader(srv.URL+"/\n"))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if bytes.Contains(b, []byte(testToken)) {
			t.Errorf("the answer echoes the token: %s", b)
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", 401},
		{"Bearer wrong-token-0123456789abcdef", 401},
		{"Bearer " + testToken[:len(testToken)-1], 401},
		{"Basic " + testToken, 401},
		{testToken, 401},
		{"Bearer " + testToken, 200},
		{"bearer  " + testToken + " ", 200},
	} {
		if got := post(tc.auth); got != tc.want {
			t.Errorf("POST /v1/seeds with Authorization %q: %d, want %d", tc.auth, got, tc.want)
		}
	}
	// Other writes are refused too, before the router says 405/404.
	for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(m, base+"/v1/status", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s without token: %d, want 401", m, resp.StatusCode)
		}
	}
	// Reads stay open.
	var metrics string
	for _, p := range []string{"/metrics", "/healthz", "/readyz", "/v1/status"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 && !(p == "/readyz" && resp.StatusCode == 503) {
			t.Errorf("GET %s: %d", p, resp.StatusCode)
		}
		if bytes.Contains(b, []byte(testToken)) {
			t.Errorf("GET %s shows the token", p)
		}
		if p == "/metrics" {
			metrics = string(b)
		}
	}
	if !strings.Contains(metrics, "phasecrawl_api_unauthorized_total 8") {
		t.Errorf("/metrics lacks phasecrawl_api_unauthorized_total 8")
	}
}

// fakeListener is a listener that claims an address without opening a socket.
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, errors.New("fake") }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }

func TestAPITokenRequiredOffLoopback(t *testing.T) {
	srv, _ := site(t)
	quiet := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	c := testConfig(t, srv)
	c.HTTP = "0.0.0.0:7070"
	if _, err := New(c, quiet); err == nil || !strings.Contains(err.Error(), "api_token_file: required") {
		t.Fatalf("0.0.0.0 without a token: err = %v, want it to name api_token_file", err)
	}

	c = testConfig(t, srv)
	opts := quiet
	opts.Listener = fakeListener{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 7070}}
	if _, err := New(c, opts); err == nil || !strings.Contains(err.Error(), "api_token_file: required") || !strings.Contains(err.Error(), "10.1.2.3:7070") {
		t.Fatalf("non-loopback listener without a token: err = %v", err)
	}
	c = testConfig(t, srv)
	c.APITokenFile = writeToken(t, testToken)
	n, err := New(c, opts)
	if err != nil {
		t.Fatalf("non-loopback listener with a token: %v", err)
	}
	n.closeResources()

	for name, body := range map[string]string{"short": "short\n", "empty": "", "blank line": "\n" + testToken} {
		c = testConfig(t, srv)
		c.APITokenFile = writeToken(t, strings.TrimSuffix(body, "\n"))
		_, err := New(c, quiet)
		if err == nil || !strings.Contains(err.Error(), "api_token_file=") {
			t.Errorf("%s token file: err = %v, want it to name api_token_file", name, err)
		} else if strings.Contains(err.Error(), testToken) {
			t.Errorf("%s token file: the error shows the file's content", name)
		}
	}
	c = testConfig(t, srv)
	c.APITokenFile = filepath.Join(t.TempDir(), "missing")
	if _, err := New(c, quiet); err == nil || !strings.Contains(err.Error(), "api_token_file=") {
		t.Errorf("missing token file: err = %v", err)
	}
}

// TestRedirectLimit follows a chain one hop at a time up to fetch.max_redirects.
func TestRedirectLimit(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		var k int
		if _, err := fmt.Sscanf(r.URL.Path, "/r/%d", &k); err == nil {
			http.Redirect(w, r, fmt.Sprintf("/r/%d", k+1), http.StatusFound)
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c := testConfig(t, srv)
	c.Seeds = []string{srv.URL + "/r/0"}
	c.Fetch.MaxRedirects = 3
	n, stop := start(t, c)
	wait.For(t, 30*time.Second, "chain", func() bool { return n.Done() })
	last, ok, err := n.Frontier().Get(frontier.RefOf(srv.URL + "/r/3"))
	stop()
	if err != nil || !ok || last.State != frontier.Completed || last.Reason != "redirect_limit" {
		t.Fatalf("/r/3: %+v %v %v, want COMPLETED redirect_limit", last, ok, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for k := 0; k <= 3; k++ {
		if hits[fmt.Sprintf("/r/%d", k)] != 1 {
			t.Errorf("/r/%d fetched %d times, want 1", k, hits[fmt.Sprintf("/r/%d", k)])
		}
	}
	if hits["/r/4"] != 0 {
		t.Errorf("/r/4 fetched: the chain went past max_redirects")
	}
}

func TestHostSetAddAll(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	hs, err := openHostSet(p)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := hs.AddSeedHosts([]string{"a", "b", "a", ""})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fresh, []string{"a", "b"}) {
		t.Fatalf("new hosts = %q, want [a b]", fresh)
	}
	if fresh, err = hs.AddSeedHosts([]string{"b", "c"}); err != nil || !slices.Equal(fresh, []string{"c"}) {
		t.Fatalf("new hosts = %q, %v; want [c]", fresh, err)
	}
	hs.Close()
	hs, err = openHostSet(p)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	for _, h := range []string{"a", "b", "c"} {
		if !hs.Has(h) {
			t.Errorf("%s lost on reopen", h)
		}
	}
	if b, _ := os.ReadFile(p); string(b) != "a\nb\nc\n" {
		t.Errorf("file = %q", b)
	}
}

// TestIdleConns: fetch.max_idle_conns is kept under half the open-file limit.
func TestIdleConns(t *testing.T) {
	for _, tc := range []struct {
		want    int
		fdLimit uint64
		got     int
	}{
		{4096, 0, 4096}, // limit unknown
		{4096, 1 << 20, 4096},
		{4096, 8192, 4096},
		{4096, 1024, 512},
		{1, 1, 1},
	} {
		if got := idleConns(tc.want, tc.fdLimit, slog.New(slog.DiscardHandler)); got != tc.got {
			t.Errorf("idleConns(%d, limit %d) = %d, want %d", tc.want, tc.fdLimit, got, tc.got)
		}
	}
}
