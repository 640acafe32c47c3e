package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/phasecrawl/phasecrawl/node"
)

// TestSeedClientToken: `phasecrawl seed` sends the token of --token-file, else of
// $PHASECRAWL_API_TOKEN_FILE, and says what to do on 401.
func TestSeedClientToken(t *testing.T) {
	const tok = "client-token-0123456789abcdef"
	var mu sync.Mutex
	var gotAuth []string
	var gotBody []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		gotBody = append(gotBody, string(b))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+tok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(node.SeedResult{Given: strings.Count(string(b), "\n"), Added: 1})
	}))
	defer srv.Close()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	seeds := filepath.Join(dir, "seeds")
	if err := os.WriteFile(seeds, []byte("http://b.example/\nhttp://c.example/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.URL, "http://")

	var out, errOut bytes.Buffer
	if code := Run([]string{"seed", "--node", addr, "--token-file", tokFile, "-f", seeds, "http://a.example/"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("with --token-file: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "3 given, 1 new") {
		t.Errorf("output %q", out.String())
	}
	t.Setenv(tokenEnv, tokFile)
	out.Reset()
	if code := Run([]string{"seed", "--node", addr, "http://d.example/"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("with $%s: exit %d: %s", tokenEnv, code, errOut.String())
	}
	t.Setenv(tokenEnv, "")
	errOut.Reset()
	if code := Run([]string{"seed", "--node", addr, "http://e.example/"}, nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "--token-file") {
		t.Errorf("without a token: exit %d, stderr %q; want 1 and a hint", code, errOut.String())
	}
	if strings.Contains(errOut.String(), tok) {
		t.Errorf("stderr shows the token")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gotAuth) != 3 || gotAuth[0] != "Bearer "+tok || gotAuth[1] != "Bearer "+tok || gotAuth[2] != "" {
		t.Errorf("Authorization headers %q", gotAuth)
	}
	if gotBody[0] != "http://a.example/\nhttp://b.example/\nhttp://c.example/\n" {
		t.Errorf("streamed body %q", gotBody[0])
	}
}
