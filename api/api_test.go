package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fakeNode is a Node whose answers the test sets. Its plan pages through
// hosts (sorted), its seeds are refused by refuse (nil: none is).
type fakeNode struct {
	status   Status
	ready    bool
	paused   bool
	pausedBy []string
	log      []json.RawMessage
	logErr   error
	logAsked []int
	hosts    []string
	planErr  error
	refuse   func(raw string) string
	routeErr error
	batches  [][]string // what RouteSeeds was given, call by call
	accepted int        // seeds RouteSeeds took
}

func (f *fakeNode) Status() Status { return f.status }
func (f *fakeNode) Ready() bool    { return f.ready }

func (f *fakeNode) SetPaused(p bool, by string) bool {
	f.pausedBy = append(f.pausedBy, by)
	changed := f.paused != p
	f.paused = p
	return changed
}

func (f *fakeNode) CrawlLog(k int) ([]json.RawMessage, error) {
	f.logAsked = append(f.logAsked, k)
	if f.logErr != nil {
		return nil, f.logErr
	}
	return f.log[max(len(f.log)-k, 0):], nil
}

func (f *fakeNode) Plan(after string, limit int) (PlanPage, error) {
	if f.planErr != nil {
		return PlanPage{}, f.planErr
	}
	page := PlanPage{Sites: []PlanSite{}}
	for _, h := range f.hosts {
		if h <= after {
			continue
		}
		if len(page.Sites) == limit {
			page.Next = page.Sites[limit-1].Host
			break
		}
		page.Sites = append(page.Sites, PlanSite{Host: h})
	}
	return page, nil
}

func (f *fakeNode) RouteSeeds(_ context.Context, seeds []string) ([]string, int, error) {
	f.batches = append(f.batches, slices.Clone(seeds))
	refused := make([]string, len(seeds))
	added := 0
	for i, s := range seeds {
		if f.refuse != nil {
			refused[i] = f.refuse(s)
		}
		if refused[i] == "" {
			added++
		}
	}
	if f.routeErr != nil {
		return refused, 0, f.routeErr
	}
	f.accepted += added
	return refused, added, nil
}

// refuseFTP refuses the seeds that do not start with http.
func refuseFTP(raw string) string {
	if !strings.HasPrefix(raw, "http") {
		return "scheme"
	}
	return ""
}

func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// do sends one request to h and returns the answer's code and body.
func do(h http.Handler, method, path, body string, header map[string]string) (int, http.Header, []byte) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// TestEndpoints calls each endpoint of a Server over a fake node: its
// status code and what it answers (or asked of the node).
func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "phasecrawl_test_total", Help: "A test series."}))
	tests := []struct {
		name         string
		node         fakeNode
		method, path string
		body         string
		code         int
		check        func(t *testing.T, f *fakeNode, h http.Header, body []byte)
	}{
		{name: "healthz", method: "GET", path: "/healthz", code: 200, check: bodyIs("ok\n")},
		{name: "readyz not ready", method: "GET", path: "/readyz", code: 503},
		{name: "readyz ready", node: fakeNode{ready: true}, method: "GET", path: "/readyz", code: 200, check: bodyIs("ready\n")},
		{name: "metrics", method: "GET", path: "/metrics", code: 200, check: bodyHas("phasecrawl_test_total 0")},
		{name: "status", node: fakeNode{status: Status{Node: "a", PagesFetched: 7, Frontier: FrontierStatus{InList: 3}, Paused: true}},
			method: "GET", path: "/v1/status", code: 200, check: func(t *testing.T, _ *fakeNode, h http.Header, b []byte) {
				var raw map[string]any
				if err := json.Unmarshal(b, &raw); err != nil || h.Get("Content-Type") != "application/json" {
					t.Fatalf("%v %q: %s", err, h.Get("Content-Type"), b)
				}
				if raw["node"] != "a" || raw["pages_fetched"] != 7.0 || raw["paused"] != true || raw["frontier"].(map[string]any)["in_list"] != 3.0 {
					t.Errorf("status %s", b)
				}
				for _, k := range []string{"bucket", "phase", "members", "outbox", "bytes_fetched", "fetch_errors", "uptime_s", "done", "errors_by_kind", "budget"} {
					if _, ok := raw[k]; !ok {
						t.Errorf("status lacks %q", k)
					}
				}
			}},
		{name: "status page", method: "GET", path: "/", code: 200, check: func(t *testing.T, _ *fakeNode, h http.Header, b []byte) {
			if !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'sha256-") ||
				h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(string(b), "fetch(path") {
				t.Errorf("GET /: %v", h)
			}
		}},
		{name: "unknown path", method: "GET", path: "/nothing-here", code: 404},
		{name: "wrong method", method: "PUT", path: "/v1/status", code: 405},
		{name: "crawl log default", node: fakeNode{log: lines(60)}, method: "GET", path: "/v1/crawl-log", code: 200, check: tailIs(50, 10, 50)},
		{name: "crawl log n", node: fakeNode{log: lines(5)}, method: "GET", path: "/v1/crawl-log?n=2", code: 200, check: tailIs(2, 3, 2)},
		{name: "crawl log n=1000", node: fakeNode{log: lines(5)}, method: "GET", path: "/v1/crawl-log?n=1000", code: 200, check: tailIs(5, 0, 1000)},
		{name: "crawl log empty", node: fakeNode{log: []json.RawMessage{}}, method: "GET", path: "/v1/crawl-log", code: 200, check: bodyHas(`"lines": []`)},
		{name: "crawl log n=0", method: "GET", path: "/v1/crawl-log?n=0", code: 400, check: bodyHas(`"error"`, "1..1000")},
		{name: "crawl log n=1001", method: "GET", path: "/v1/crawl-log?n=1001", code: 400},
		{name: "crawl log n=x", method: "GET", path: "/v1/crawl-log?n=x", code: 400},
		{name: "crawl log error", node: fakeNode{logErr: errors.New("disk on fire")}, method: "GET", path: "/v1/crawl-log", code: 500, check: bodyHas("disk on fire")},
		{name: "plan default limit", node: fakeNode{hosts: hosts(150)}, method: "GET", path: "/v1/plan", code: 200,
			check: planIs(100, "h099")},
		{name: "plan after and limit", node: fakeNode{hosts: hosts(150)}, method: "GET", path: "/v1/plan?after=h100&limit=10", code: 200,
			check: planIs(10, "h110")},
		{name: "plan last page", node: fakeNode{hosts: hosts(150)}, method: "GET", path: "/v1/plan?after=h140&limit=1000", code: 200,
			check: planIs(9, "")},
		{name: "plan limit=0", method: "GET", path: "/v1/plan?limit=0", code: 400, check: bodyIs("limit: must be 1..1000\n")},
		{name: "plan limit=1001", method: "GET", path: "/v1/plan?limit=1001", code: 400},
		{name: "plan limit=x", method: "GET", path: "/v1/plan?limit=x", code: 400},
		{name: "plan error", node: fakeNode{planErr: errors.New("frontier closed")}, method: "GET", path: "/v1/plan", code: 500, check: bodyHas("frontier closed")},
		{name: "pause", method: "POST", path: "/v1/pause", code: 200, check: func(t *testing.T, f *fakeNode, _ http.Header, b []byte) {
			if !strings.Contains(string(b), `"paused": true`) || !strings.Contains(string(b), `"changed": true`) || !f.paused || len(f.pausedBy) != 1 || f.pausedBy[0] == "" {
				t.Errorf("%s (node paused %v by %v)", b, f.paused, f.pausedBy)
			}
		}},
		{name: "pause again", node: fakeNode{paused: true}, method: "POST", path: "/v1/pause", code: 200, check: bodyHas(`"changed": false`)},
		{name: "resume", node: fakeNode{paused: true}, method: "POST", path: "/v1/resume", code: 200, check: func(t *testing.T, f *fakeNode, _ http.Header, b []byte) {
			if !strings.Contains(string(b), `"paused": false`) || !strings.Contains(string(b), `"changed": true`) || f.paused {
				t.Errorf("%s (node paused %v)", b, f.paused)
			}
		}},
		{name: "GET pause", method: "GET", path: "/v1/pause", code: 405},
		{name: "seeds lines", node: fakeNode{refuse: refuseFTP}, method: "POST", path: "/v1/seeds",
			body: "http://a.example/\n# comment\n\n  http://b.example/  \n", code: 200, check: seedsAre(SeedResult{Given: 2, Added: 2}, "http://a.example/", "http://b.example/")},
		{name: "seeds json", node: fakeNode{refuse: refuseFTP}, method: "POST", path: "/v1/seeds",
			body: `["http://a.example/", 5, "ftp://c/"]`, code: 400, check: seedsAre(SeedResult{Given: 3, Added: 1, BadTotal: 2,
				Bad: []BadSeed{{Line: 2, URL: "5", Error: "not a string"}, {Line: 3, URL: "ftp://c/", Error: "scheme"}}}, "http://a.example/", "ftp://c/")},
		{name: "seeds bad lines named", node: fakeNode{refuse: refuseFTP}, method: "POST", path: "/v1/seeds",
			body: "ftp://x/\nhttp://fresh.example/\nnot a url\n", code: 400, check: seedsAre(SeedResult{Given: 3, Added: 1, BadTotal: 2,
				Bad: []BadSeed{{Line: 1, URL: "ftp://x/", Error: "scheme"}, {Line: 3, URL: "not a url", Error: "scheme"}}}, "ftp://x/", "http://fresh.example/", "not a url")},
		{name: "seeds bad json: the elements before the error are taken", method: "POST", path: "/v1/seeds",
			body: `["http://a.example/", "x"`, code: 400, check: func(t *testing.T, f *fakeNode, _ http.Header, b []byte) {
				var res SeedResult
				if err := json.Unmarshal(b, &res); err != nil || res.Given != 2 || res.Added != 2 || !strings.Contains(res.Error, "JSON body must be an array") {
					t.Errorf("%v: %s", err, b)
				}
			}},
		{name: "seeds route error", node: fakeNode{routeErr: errors.New("outbox full")}, method: "POST", path: "/v1/seeds",
			body: "http://a.example/\n", code: 500, check: seedsAre(SeedResult{Given: 1, Error: "outbox full"}, "http://a.example/")},
		{name: "seeds empty body", method: "POST", path: "/v1/seeds", code: 200, check: seedsAre(SeedResult{})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &tc.node
			s := newServer(t, Config{Node: f, Metrics: reg})
			code, h, body := do(s.Handler(), tc.method, tc.path, tc.body, nil)
			if code != tc.code {
				t.Fatalf("%s %s: %d, want %d: %s", tc.method, tc.path, code, tc.code, body)
			}
			if tc.check != nil {
				tc.check(t, f, h, body)
			}
		})
	}
}

func bodyIs(want string) func(*testing.T, *fakeNode, http.Header, []byte) {
	return func(t *testing.T, _ *fakeNode, _ http.Header, b []byte) {
		if string(b) != want {
			t.Errorf("body %q, want %q", b, want)
		}
	}
}

func bodyHas(want ...string) func(*testing.T, *fakeNode, http.Header, []byte) {
	return func(t *testing.T, _ *fakeNode, _ http.Header, b []byte) {
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("body lacks %q: %s", w, b)
			}
		}
	}
}

// tailIs checks a crawl-log answer: k lines, the first {"i":first}, and
// that the node was asked for asked lines.
func tailIs(k, first, asked int) func(*testing.T, *fakeNode, http.Header, []byte) {
	return func(t *testing.T, f *fakeNode, _ http.Header, b []byte) {
		var tail CrawlLogTail
		if err := json.Unmarshal(b, &tail); err != nil || len(tail.Lines) != k {
			t.Fatalf("%v: %s", err, b)
		}
		var line struct{ I int }
		if err := json.Unmarshal(tail.Lines[0], &line); err != nil || line.I != first || len(f.logAsked) != 1 || f.logAsked[0] != asked {
			t.Errorf("first line %s (%v), asked %v; want i=%d, asked %d", tail.Lines[0], err, f.logAsked, first, asked)
		}
	}
}

// planIs checks a plan page: k sites, next.
func planIs(k int, next string) func(*testing.T, *fakeNode, http.Header, []byte) {
	return func(t *testing.T, _ *fakeNode, _ http.Header, b []byte) {
		var p PlanPage
		if err := json.Unmarshal(b, &p); err != nil || len(p.Sites) != k || p.Next != next {
			t.Errorf("plan page: %v: %d sites, next %q; want %d, %q", err, len(p.Sites), p.Next, k, next)
		}
	}
}

// seedsAre checks the answer of POST /v1/seeds and what the node was given.
func seedsAre(want SeedResult, routed ...string) func(*testing.T, *fakeNode, http.Header, []byte) {
	return func(t *testing.T, f *fakeNode, _ http.Header, b []byte) {
		var res SeedResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		if !seedResultEqual(res, want) {
			t.Errorf("answer %+v, want %+v", res, want)
		}
		var got []string
		for _, b := range f.batches {
			got = append(got, b...)
		}
		if !slices.Equal(got, routed) {
			t.Errorf("routed %q, want %q", got, routed)
		}
	}
}

func seedResultEqual(a, b SeedResult) bool {
	return a.Given == b.Given && a.Added == b.Added && a.BadTotal == b.BadTotal && a.Error == b.Error && slices.Equal(a.Bad, b.Bad)
}

func lines(k int) []json.RawMessage {
	out := make([]json.RawMessage, k)
	for i := range out {
		out[i] = json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)
	}
	return out
}

func hosts(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("h%03d", i)
	}
	return out
}

// TestPlanPaging walks the plan page by page with next as after.
func TestPlanPaging(t *testing.T) {
	f := &fakeNode{hosts: hosts(25)}
	h := newServer(t, Config{Node: f}).Handler()
	var got []string
	after, pages := "", 0
	for {
		code, _, b := do(h, "GET", "/v1/plan?limit=10&after="+after, "", nil)
		var p PlanPage
		if err := json.Unmarshal(b, &p); err != nil || code != 200 {
			t.Fatalf("page %d: %d %v", pages, code, err)
		}
		pages++
		for _, s := range p.Sites {
			got = append(got, s.Host)
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if pages != 3 || !slices.Equal(got, f.hosts) {
		t.Fatalf("%d pages, hosts %v", pages, got)
	}
}

func writeToken(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const testToken = "s3cret-token-0123456789abcdef"

// TestToken: with a token, every request but GET and HEAD needs it, and
// each refusal is counted; reads stay open.
func TestToken(t *testing.T) {
	f := &fakeNode{ready: true}
	s := newServer(t, Config{Node: f, TokenFile: writeToken(t, testToken+"\n")})
	h := s.Handler()
	tests := []struct {
		method, path, auth string
		code               int
	}{
		{"POST", "/v1/pause", "", 401},
		{"POST", "/v1/pause", "Bearer wrong-token-0123456789abcdef", 401},
		{"POST", "/v1/pause", "Bearer " + testToken[:len(testToken)-1], 401},
		{"POST", "/v1/pause", "Basic " + testToken, 401},
		{"POST", "/v1/pause", testToken, 401},
		{"POST", "/v1/seeds", "", 401},
		{"POST", "/v1/resume", "", 401},
		{"PUT", "/v1/status", "", 401},
		{"DELETE", "/v1/status", "", 401},
		{"POST", "/v1/pause", "Bearer " + testToken, 200},
		{"POST", "/v1/resume", "bearer  " + testToken + " ", 200},
		{"GET", "/v1/status", "", 200},
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/metrics", "", 200},
		{"HEAD", "/healthz", "", 200},
	}
	for _, tc := range tests {
		code, hdr, body := do(h, tc.method, tc.path, "", map[string]string{"Authorization": tc.auth})
		if code != tc.code {
			t.Errorf("%s %s with Authorization %q: %d, want %d", tc.method, tc.path, tc.auth, code, tc.code)
		}
		if code == 401 && (hdr.Get("WWW-Authenticate") == "" || !strings.Contains(string(body), "api_token_file")) {
			t.Errorf("%s %s: 401 without its header or reason: %v %s", tc.method, tc.path, hdr, body)
		}
		if strings.Contains(string(body), testToken) {
			t.Errorf("%s %s: the answer shows the token", tc.method, tc.path)
		}
	}
	var m dto.Metric
	if err := s.unauthorized.Write(&m); err != nil || m.GetCounter().GetValue() != 9 {
		got := m.GetCounter().GetValue()
		t.Errorf("phasecrawl_api_unauthorized_total = %v, want 9", got)
	}
	if len(f.pausedBy) != 2 {
		t.Errorf("the node was asked %d times, want 2 (the authorized writes)", len(f.pausedBy))
	}
}

// TestCrossOriginRefused: a write a browser marks as coming from another
// origin is refused with 403, token or not; reads and clients without the
// browser's headers are not affected.
func TestCrossOriginRefused(t *testing.T) {
	for _, token := range []bool{false, true} {
		cfg := Config{Node: &fakeNode{}}
		auth := ""
		if token {
			cfg.TokenFile, auth = writeToken(t, testToken), "Bearer "+testToken
		}
		h := newServer(t, cfg).Handler()
		tests := []struct {
			name         string
			method, path string
			header       map[string]string
			code         int
		}{
			{"cross-site fetch", "POST", "/v1/pause", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
			{"same-site fetch", "POST", "/v1/seeds", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
			{"other origin", "POST", "/v1/resume", map[string]string{"Origin": "http://attacker.example"}, 403},
			{"same origin", "POST", "/v1/pause", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
			{"own origin", "POST", "/v1/pause", map[string]string{"Origin": "http://example.com"}, 200},
			{"no browser headers", "POST", "/v1/resume", nil, 200},
			{"cross-site read", "GET", "/v1/status", map[string]string{"Sec-Fetch-Site": "cross-site"}, 200},
		}
		for _, tc := range tests {
			hdr := map[string]string{"Authorization": auth}
			for k, v := range tc.header {
				hdr[k] = v
			}
			if code, _, b := do(h, tc.method, tc.path, "", hdr); code != tc.code {
				t.Errorf("token %v, %s: %s %s: %d, want %d: %s", token, tc.name, tc.method, tc.path, code, tc.code, b)
			}
		}
	}
}

// TestNew: a listener off loopback needs a token; a token file must hold
// a token of 16 to 4095 characters on its first line, and errors name the
// key, never the file's content.
func TestNew(t *testing.T) {
	off := fakeListener{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 7070}}
	on := fakeListener{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}}
	tests := []struct {
		name  string
		ln    net.Listener
		token string // "-": no token file; "missing": a file that does not exist
		err   string // "": no error
	}{
		{"loopback without token", on, "-", ""},
		{"no listener without token", nil, "-", ""},
		{"off loopback without token", off, "-", "api_token_file: required: the API listens on 10.1.2.3:7070"},
		{"off loopback with token", off, testToken + "\n", ""},
		{"token without newline", on, testToken, ""},
		{"short token", on, "short\n", "api_token_file="},
		{"empty file", on, "", "api_token_file="},
		{"blank first line", on, "\n" + testToken, "api_token_file="},
		{"token too long", on, strings.Repeat("x", 5000), "api_token_file="},
		{"missing file", on, "missing", "api_token_file="},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Node: &fakeNode{}, Listener: tc.ln}
			switch tc.token {
			case "-":
			case "missing":
				cfg.TokenFile = filepath.Join(t.TempDir(), "missing")
			default:
				cfg.TokenFile = writeToken(t, tc.token)
			}
			_, err := New(cfg)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.err)
			case err != nil && strings.Contains(err.Error(), testToken):
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
	if _, err := New(Config{}); err == nil {
		t.Error("New without a node: no error")
	}
}

// fakeListener is a listener that claims an address without opening a socket.
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, errors.New("fake") }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }

// TestMembers: GET /v1/members asks each alive member for its status (its
// phase), lists the others as they are, says why a member could not be
// asked, and lists the node alone as itself.
func TestMembers(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, 200, Status{Node: "b", Phase: PhaseStatus{NPhase: 3, Current: 2}, PagesFetched: 77, Paused: true,
			Members: []MemberStatus{{Name: "b"}}})
	}))
	defer peer.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer broken.Close()
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addr().String()
	down.Close() // nothing listens there now

	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	members := []MemberStatus{
		{Name: "a", API: "self", State: "alive"},
		{Name: "b", API: host(peer), State: "alive"},
		{Name: "c", API: "127.0.0.1:1", State: "dead"},
		{Name: "d", API: downAddr, State: "alive"},
		{Name: "e", API: host(broken), State: "alive"},
		{Name: "f", API: "", State: "alive"},
	}
	f := &fakeNode{status: Status{Node: "a", Members: members, Phase: PhaseStatus{NPhase: 3}}}
	code, _, body := do(newServer(t, Config{Node: f}).Handler(), "GET", "/v1/members", "", nil)
	var got struct{ Members []MemberView }
	if err := json.Unmarshal(body, &got); err != nil || code != 200 || len(got.Members) != 6 {
		t.Fatalf("%d %v: %s", code, err, body)
	}
	tests := []struct {
		name  string
		check func(v MemberView) bool
	}{
		{"self", func(v MemberView) bool {
			return v.Self && v.Status != nil && v.Status.Node == "a" && v.Status.Phase.NPhase == 3 && v.Status.Members == nil
		}},
		{"alive peer", func(v MemberView) bool {
			return !v.Self && v.Status != nil && v.Status.Phase.Current == 2 && v.Status.PagesFetched == 77 && v.Status.Paused &&
				v.Status.Members == nil && v.Error == ""
		}},
		{"dead member not asked", func(v MemberView) bool { return v.Status == nil && v.Error == "" && v.State == "dead" }},
		{"unreachable member", func(v MemberView) bool { return v.Status == nil && v.Error != "" }},
		{"member answering 500", func(v MemberView) bool { return v.Status == nil && strings.Contains(v.Error, "500") }},
		{"member without API", func(v MemberView) bool { return v.Status == nil && v.Error == "" }},
	}
	for i, tc := range tests {
		if v := got.Members[i]; !tc.check(v) || v.Name != members[i].Name {
			t.Errorf("%s: %+v (status %+v)", tc.name, v, v.Status)
		}
	}

	// A node alone lists itself, at its API's address.
	alone := &fakeNode{status: Status{Node: "solo", PagesFetched: 4}}
	s := newServer(t, Config{Node: alone, Listener: fakeListener{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7071}}})
	_, _, body = do(s.Handler(), "GET", "/v1/members", "", nil)
	if err := json.Unmarshal(body, &got); err != nil || len(got.Members) != 1 {
		t.Fatalf("alone: %v: %s", err, body)
	}
	if v := got.Members[0]; !v.Self || v.Name != "solo" || v.API != "127.0.0.1:7071" || v.State != "alive" || v.Status == nil || v.Status.PagesFetched != 4 {
		t.Fatalf("alone: %+v", v)
	}
}

// TestServe: Serve answers on its listener until Shutdown, then returns nil.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Config{Node: &fakeNode{status: Status{Node: "a"}}, Listener: ln})
	if s.Addr().String() != ln.Addr().String() {
		t.Fatalf("Addr %v, want %v", s.Addr(), ln.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Node != "a" {
		t.Fatalf("status over the listener: %+v %v", st, err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}

	off := newServer(t, Config{Node: &fakeNode{}})
	if off.Addr() != nil || off.Serve() != nil {
		t.Fatal("a Server without a listener has an address or serves")
	}
	off.Close()
}
