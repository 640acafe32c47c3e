package node

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestStatusPageAPI: GET / is the status page with its policy, the crawl
// log and members endpoints answer, and a bad n is refused.
func TestStatusPageAPI(t *testing.T) {
	srv, _ := site(t)
	n, stop := start(t, testConfig(t, srv))
	defer stop()
	wait.For(t, 30*time.Second, "crawl", func() bool { return n.Status().PagesFetched >= 4 })
	base := "http://" + n.Addr().String()
	get := func(path string) (*http.Response, []byte) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, body := get("/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'sha256-") || !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("GET /: Content-Security-Policy %q", csp)
	}
	if !strings.Contains(string(body), `fetch(path`) || strings.Contains(string(body), "src=\"http") {
		t.Fatal("GET /: not the self-contained status page")
	}
	if resp, _ := get("/nothing-here"); resp.StatusCode != 404 {
		t.Fatalf("GET /nothing-here: %d, want 404", resp.StatusCode)
	}

	wait.For(t, 30*time.Second, "crawl log lines", func() bool {
		lines, err := n.out.tail(10)
		return err == nil && len(lines) >= 4
	})
	resp, body = get("/v1/crawl-log?n=2")
	var tail api.CrawlLogTail
	if err := json.Unmarshal(body, &tail); err != nil || resp.StatusCode != 200 || len(tail.Lines) != 2 {
		t.Fatalf("GET /v1/crawl-log?n=2: %d %s (%v)", resp.StatusCode, body, err)
	}
	var line struct{ URL string }
	if err := json.Unmarshal(tail.Lines[1], &line); err != nil || !strings.HasPrefix(line.URL, srv.URL) {
		t.Fatalf("crawl log line %s: %v", tail.Lines[1], err)
	}
	for _, bad := range []string{"0", "1001", "x"} {
		if resp, _ := get("/v1/crawl-log?n=" + bad); resp.StatusCode != 400 {
			t.Errorf("GET /v1/crawl-log?n=%s: %d, want 400", bad, resp.StatusCode)
		}
	}

	resp, body = get("/v1/members")
	var ms struct{ Members []api.MemberView }
	if err := json.Unmarshal(body, &ms); err != nil || len(ms.Members) != 1 || !ms.Members[0].Self || ms.Members[0].Status == nil ||
		ms.Members[0].Status.PagesFetched < 4 {
		t.Fatalf("GET /v1/members alone: %s (%v)", body, err)
	}
}
