package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestPauseCommand(t *testing.T) {
	const token = "0123456789abcdef0123"
	var mu sync.Mutex
	paused := false
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || (r.URL.Path != "/v1/pause" && r.URL.Path != "/v1/resume") {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"error":"token"}`, http.StatusUnauthorized)
			return
		}
		mu.Lock()
		want := r.URL.Path == "/v1/pause"
		changed := paused != want
		paused = want
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"paused":` + map[bool]string{true: "true", false: "false"}[want] + `,"changed":` + map[bool]string{true: "true", false: "false"}[changed] + `}`))
	}))
	defer api.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(tokenEnv, "")
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"pause", "--node", api.URL}, 1, "refused (401)"},
		{[]string{"pause", "--node", api.URL, "--token-file", tokFile}, 0, ": paused\n"},
		{[]string{"pause", "--node", api.URL, "--token-file", tokFile}, 0, "paused (it was already)"},
		{[]string{"resume", "--node", api.URL, "--token-file", tokFile}, 0, ": running\n"},
		{[]string{"resume", "--node", api.URL, "--token-file", tokFile, "extra"}, 1, "unexpected arguments"},
	} {
		var out, errOut bytes.Buffer
		code := Run(tc.args, nil, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.out) {
			t.Errorf("%v: exit %d, %q %q; want %d and %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if paused {
		t.Fatal("the node is still paused after resume")
	}
}
