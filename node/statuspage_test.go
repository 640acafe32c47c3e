package node

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTailCrawlLog(t *testing.T) {
	long := `{"url":"` + strings.Repeat("x", 70<<10) + `"}`
	tests := []struct {
		name string
		file string // "" : no file
		k    int
		want []string
	}{
		{"missing file", "", 5, nil},
		{"empty", "\n", 5, nil},
		{"last k", `{"a":1}` + "\n" + `{"a":2}` + "\n" + `{"a":3}` + "\n", 2, []string{`{"a":2}`, `{"a":3}`}},
		{"fewer than k", `{"a":1}` + "\n", 10, []string{`{"a":1}`}},
		{"torn last line dropped", `{"a":1}` + "\n" + `{"a":2`, 5, []string{`{"a":1}`}},
		{"not JSON skipped", `{"a":1}` + "\n" + "garbage\n\n" + `{"a":3}` + "\n", 5, []string{`{"a":1}`, `{"a":3}`}},
		{"line longer than a read chunk", `{"a":1}` + "\n" + long + "\n" + `{"a":3}` + "\n", 3, []string{`{"a":1}`, long, `{"a":3}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crawl.log")
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := TailCrawlLog(path, tc.k)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d lines, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if string(got[i]) != tc.want[i] {
					t.Errorf("line %d = %.40q, want %.40q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestStatusPageAPI: GET / is the status page with its policy, the crawl
// log and members endpoints answer, and a bad n is refused.
func TestStatusPageAPI(t *testing.T) {
	srv, _ := site(t)
	n, stop := start(t, testConfig(t, srv))
	defer stop()
	waitFor(t, "crawl", func() bool { return n.Status().PagesFetched >= 4 })
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

	waitFor(t, "crawl log lines", func() bool {
		lines, err := TailCrawlLog(filepath.Join(n.cfg.Data, crawlLogName), 10)
		return err == nil && len(lines) >= 4
	})
	resp, body = get("/v1/crawl-log?n=2")
	var tail CrawlLogTail
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
	var ms struct{ Members []MemberView }
	if err := json.Unmarshal(body, &ms); err != nil || len(ms.Members) != 1 || !ms.Members[0].Self || ms.Members[0].Status == nil ||
		ms.Members[0].Status.PagesFetched < 4 {
		t.Fatalf("GET /v1/members alone: %s (%v)", body, err)
	}
}

// fakeStatus is a cluster layer's status with a fixed member list.
type fakeStatus struct{ members []MemberStatus }

func (f fakeStatus) ClusterStatus(time.Time) ClusterStatus {
	return ClusterStatus{Members: f.members, Phase: PhaseStatus{NPhase: 3, Current: 0}}
}

// TestMembersView: GET /v1/members asks each alive member for its status
// (its phase), lists the dead ones as they are, and says why a member
// could not be asked.
func TestMembersView(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, 200, Status{Node: "b", Phase: PhaseStatus{NPhase: 3, Current: 2}, PagesFetched: 77, Paused: true})
	}))
	defer peer.Close()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addr().String()
	down.Close() // nothing listens there now

	srv, _ := site(t)
	cfg := testConfig(t, srv)
	cfg.Name = "a"
	members := []MemberStatus{
		{Name: "a", API: "self", State: "alive"},
		{Name: "b", API: strings.TrimPrefix(peer.URL, "http://"), State: "alive"},
		{Name: "c", API: "127.0.0.1:1", State: "dead"},
		{Name: "d", API: downAddr, State: "alive"},
	}
	n, stop := startWith(t, cfg, Options{StartCluster: func(ClusterEnv) (Cluster, error) {
		return Cluster{Status: fakeStatus{members}}, nil
	}})
	defer stop()
	resp, err := http.Get("http://" + n.Addr().String() + "/v1/members")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ Members []MemberView }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Members) != 4 {
		t.Fatalf("%d members, want 4", len(got.Members))
	}
	a, b, c, d := got.Members[0], got.Members[1], got.Members[2], got.Members[3]
	if !a.Self || a.Status == nil || a.Status.Node != "a" || a.Status.Phase.NPhase != 3 {
		t.Errorf("self: %+v", a)
	}
	if b.Status == nil || b.Status.Phase.Current != 2 || b.Status.PagesFetched != 77 || !b.Status.Paused || b.Error != "" {
		t.Errorf("peer: %+v (status %+v)", b, b.Status)
	}
	if c.Status != nil || c.Error != "" || c.State != "dead" {
		t.Errorf("dead member asked: %+v", c)
	}
	if d.Status != nil || d.Error == "" {
		t.Errorf("unreachable member: %+v", d)
	}
}

// TestAPIRefusesCrossOriginWrites: a web page in the operator's browser
// cannot post to a loopback API without a token (the browser sends
// Sec-Fetch-Site or Origin); a client that sends neither can.
func TestAPIRefusesCrossOriginWrites(t *testing.T) {
	srv, _ := site(t)
	n, stop := start(t, testConfig(t, srv))
	defer stop()
	base := "http://" + n.Addr().String()
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"other origin", map[string]string{"Origin": "http://attacker.example"}, http.StatusForbidden},
		{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"no browser headers", nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/pause", "/v1/resume"} {
				req, err := http.NewRequest(http.MethodPost, base+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tc.header {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("POST %s: %d, want %d", path, resp.StatusCode, tc.want)
				}
			}
		})
	}
}
