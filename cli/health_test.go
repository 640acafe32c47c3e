package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/phasecrawl/phasecrawl/test/harness"
)

func TestHealthAddr(t *testing.T) {
	for _, tc := range []struct {
		env  string
		set  bool
		want string
	}{
		{set: false, want: "127.0.0.1:7070"},
		{env: "0.0.0.0:7070", set: true, want: "127.0.0.1:7070"},
		{env: "[::]:9000", set: true, want: "127.0.0.1:9000"},
		{env: ":8080", set: true, want: "127.0.0.1:8080"},
		{env: "10.1.2.3:7070", set: true, want: "10.1.2.3:7070"},
		{env: "api.internal:7070", set: true, want: "api.internal:7070"},
		{env: "garbage", set: true, want: "127.0.0.1:7070"},
	} {
		got := healthAddr(func(k string) (string, bool) {
			if k != "PHASECRAWL_HTTP" {
				t.Errorf("looked up %s, want PHASECRAWL_HTTP", k)
			}
			return tc.env, tc.set
		})
		if got != tc.want {
			t.Errorf("PHASECRAWL_HTTP=%q (set %v): health address %s, want %s", tc.env, tc.set, got, tc.want)
		}
	}
}

// TestHealthCommand runs `phasecrawl health` against a stand-in API whose
// /readyz can be switched off, and against a closed port.
func TestHealthCommand(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte("ok\n"))
		case "/readyz":
			if !ready.Load() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte("ready\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	closed := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t, "127.0.0.1"))

	for _, tc := range []struct {
		name  string
		ready bool
		args  []string
		code  int
		out   string
	}{
		{"healthz", false, []string{"--node", addr}, 0, "ok"},
		{"readyz not ready", false, []string{"--node", addr, "--ready"}, 1, "503 Service Unavailable: not ready"},
		{"readyz ready", true, []string{"--node", addr, "--ready"}, 0, "ready"},
		{"url form", true, []string{"--node", srv.URL}, 0, "ok"},
		{"nothing listening", true, []string{"--node", closed, "--timeout", "2s"}, 1, "connection refused"},
		{"stray argument", true, []string{"--node", addr, "extra"}, 1, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready.Store(tc.ready)
			var out, errOut bytes.Buffer
			code := Run(append([]string{"health"}, tc.args...), nil, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errOut.String())
			}
			if got := out.String() + errOut.String(); !strings.Contains(got, tc.out) {
				t.Errorf("output %q does not contain %q", got, tc.out)
			}
		})
	}
}
