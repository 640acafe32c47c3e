package crash

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNoSecretsInLogsOrStatus runs a node with a cluster key file and an API token file, at
// debug level, drives it (seeds with and without the token, status, metrics) and looks for
// the secrets' bytes in everything it said.
func TestNoSecretsInLogsOrStatus(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	keyB64 := base64.StdEncoding.EncodeToString(key)
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte(keyB64+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokRaw := make([]byte, 24)
	if _, err := rand.Read(tokRaw); err != nil {
		t.Fatal(err)
	}
	token := hex.EncodeToString(tokRaw)
	tokenFile := filepath.Join(dir, "api.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	c := start(t, bin, addr, nil, "run", "--data", filepath.Join(dir, "data"), "--http", addr,
		"--api-token-file", tokenFile, "--gossip", "127.0.0.1:0", "--cluster-key-file", keyFile,
		"--log-level", "debug", "--log-format", "json", "--seed", "http://site.secrets.test/",
		"--resolve", "*.secrets.test="+freeAddr(t), "--allow-private")
	c.waitReady(t, 30*time.Second)

	var said bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, p := range []string{"/v1/status", "/metrics", "/healthz", "/readyz"} {
		code, body, err := c.get(ctx, p)
		if err != nil || code != 200 {
			t.Fatalf("GET %s: %d %v", p, code, err)
		}
		said.Write(body)
	}
	// Seeds: refused without the token, taken with it (through the seed client).
	resp, err := http.Post("http://"+addr+"/v1/seeds", "text/plain", strings.NewReader("http://site.secrets.test/a\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /v1/seeds without the token: %d, want 401", resp.StatusCode)
	}
	out, err := exec.Command(bin, "seed", "--node", addr, "--token-file", tokenFile, "http://site.secrets.test/b").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 given, 1 new") {
		t.Errorf("seed with --token-file: %v: %s", err, out)
	}
	said.Write(out)
	cmd := exec.Command(bin, "seed", "--node", addr, "http://site.secrets.test/c")
	cmd.Env = append(os.Environ(), "PHASECRAWL_API_TOKEN_FILE="+tokenFile)
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 given, 1 new") {
		t.Errorf("seed with $PHASECRAWL_API_TOKEN_FILE: %v: %s", err, out)
	}
	said.Write(out)
	out, _ = exec.Command(bin, "status", "--node", addr, "--json").CombinedOutput()
	said.Write(out)
	c.stop(t, 30*time.Second)
	said.WriteString(c.logs.String())
	said.WriteString(c.stdout.String())
	if !strings.Contains(c.logs.String(), `"level":"DEBUG"`) && !strings.Contains(c.logs.String(), "cluster") {
		t.Logf("note: the node logged no debug or cluster lines")
	}

	for name, secret := range map[string]string{
		"API token": token, "cluster key (base64)": keyB64, "cluster key (raw)": string(key),
		"cluster key (hex)": hex.EncodeToString(key), "cluster key (base64, no padding)": base64.RawStdEncoding.EncodeToString(key),
		"cluster key (URL base64)": base64.URLEncoding.EncodeToString(key),
	} {
		if bytes.Contains(said.Bytes(), []byte(secret)) {
			t.Errorf("the %s appears in the node's logs, status or answers", name)
		}
	}
	if said.Len() < 1000 {
		t.Fatalf("captured only %d bytes: the check saw too little", said.Len())
	}
	t.Logf("searched %d bytes of logs, status, metrics and client output", said.Len())
}
