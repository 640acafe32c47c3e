package harness

import (
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

func TestViolationsAndDuplicated(t *testing.T) {
	exp := synthweb.Expectation{
		Pages:      map[string]bool{"http://a.test/1": true, "http://a.test/2": true, "http://b.test/1": true},
		Disallowed: map[string]bool{"http://b.test/private": true},
		Contacted:  map[string]bool{"a.test": true, "b.test": true},
	}
	host := func(robots int) synthweb.HostReport {
		return synthweb.HostReport{Requests: 3, RobotsFetches: robots, MaxInFlight: 1, MinGap: -1}
	}
	tests := []struct {
		name   string
		rep    synthweb.Report
		robots int
		want   []string // substrings, one per violation, in order
		dup    []string
	}{
		{"clean, robots.txt once",
			synthweb.Report{URLs: map[string]int{"http://a.test/1": 1, "http://a.test/2": 1, "http://b.test/1": 1},
				Hosts: map[string]synthweb.HostReport{"a.test": host(1), "b.test": host(1)}}, 1, nil, nil},
		{"duplicates are left to the test",
			synthweb.Report{URLs: map[string]int{"http://a.test/1": 3, "http://a.test/2": 1, "http://b.test/1": 2},
				Hosts: map[string]synthweb.HostReport{"a.test": host(1), "b.test": host(1)}}, 1, nil,
			[]string{"http://a.test/1", "http://b.test/1"}},
		{"robots.txt within 1..robotsPerHost",
			synthweb.Report{URLs: map[string]int{"http://a.test/1": 1, "http://a.test/2": 1, "http://b.test/1": 1},
				Hosts: map[string]synthweb.HostReport{"a.test": host(3), "b.test": host(2)}}, 3, nil, nil},
		{"robots.txt too often or never, a missing page, a disallowed fetch",
			synthweb.Report{URLs: map[string]int{"http://a.test/1": 1, "http://b.test/1": 1, "http://b.test/private": 1},
				Hosts: map[string]synthweb.HostReport{"a.test": host(4), "b.test": host(0)}}, 3,
			[]string{"missing page (never fetched): http://a.test/2", "robots-disallowed URL fetched: http://b.test/private",
				"host a.test: robots.txt fetched 4 times, want 1..3", "host b.test: robots.txt fetched 0 times, want 1..3"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vs := Violations(tc.rep, exp, 0, tc.robots)
			slices.Sort(vs)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if len(vs) != len(want) {
				t.Fatalf("violations:\n%s\nwant %d: %q", strings.Join(vs, "\n"), len(want), want)
			}
			for i := range want {
				if !strings.Contains(vs[i], want[i]) {
					t.Errorf("violation %q, want %q", vs[i], want[i])
				}
			}
			dup := Duplicated(tc.rep, exp)
			if got := slices.Sorted(maps.Keys(dup)); !slices.Equal(got, tc.dup) {
				t.Errorf("Duplicated = %v, want %v", got, tc.dup)
			}
		})
	}
}

func TestFetchEvents(t *testing.T) {
	dirs := map[string]string{"node0": t.TempDir(), "node1": t.TempDir()}
	logs := map[string]string{
		"node0": `{"time":"2026-01-01T00:00:02Z","url":"http://a.test/1","status":200}
{"time":"2026-01-01T00:00:01Z","url":"http://a.test/2","status":0,"error":"timeout"}
not json
{"time":"2026-01-01T00:00:03Z","url":"http://a.test/3","status":404}
`,
		"node1": `{"time":"2026-01-01T00:00:01Z","url":"http://a.test/1","status":200}
{"time":"2026-01-01T00:00:04Z","url":"http://a.test/2","status":301}
`,
	}
	for n, l := range logs {
		if err := os.WriteFile(filepath.Join(dirs[n], "crawl.log"), []byte(l), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	got := FetchEvents(dirs, map[string]bool{"http://a.test/1": true, "http://a.test/2": true})
	want := map[string][]FetchEvent{
		"http://a.test/1": {{"node1", at(1)}, {"node0", at(2)}}, // oldest first
		"http://a.test/2": {{"node1", at(4)}},                   // no response: not a fetch
	}
	if len(got) != len(want) {
		t.Fatalf("FetchEvents = %v, want %v", got, want)
	}
	for u, w := range want {
		if !slices.EqualFunc(got[u], w, func(a, b FetchEvent) bool { return a.Node == b.Node && a.At.Equal(b.At) }) {
			t.Errorf("%s: %v, want %v", u, got[u], w)
		}
	}
}

func TestLogGrepTailAndStartLogged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.log")
	cmd := exec.Command("sh", "-c", `echo '{"msg":"member joined: b"}'; echo '{"msg":"phase swap"}'; echo '{"msg":"fenced: alone"}'; exit 3`)
	var exitErr error
	done, err := StartLogged(cmd, path, "---- start 1", func(err error) { exitErr = err })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not exit")
	}
	if !Closed(done) {
		t.Error("Closed is false after exit")
	}
	if ee, ok := exitErr.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Errorf("exit error %v, want exit status 3", exitErr)
	}
	if got, want := LogGrep(path, "member joined", "fenced"), "{\"msg\":\"member joined: b\"}\n{\"msg\":\"fenced: alone\"}"; got != want {
		t.Errorf("LogGrep = %q, want %q", got, want)
	}
	if got, want := LogTail(path, 2), "{\"msg\":\"phase swap\"}\n{\"msg\":\"fenced: alone\"}"; got != want {
		t.Errorf("LogTail = %q, want %q", got, want)
	}
	if got := LogTail(path, 10); !strings.HasPrefix(got, "---- start 1\n") || strings.Count(got, "\n") != 3 {
		t.Errorf("LogTail(10) = %q: want the header and three lines", got)
	}
}

func TestNodeEnv(t *testing.T) {
	t.Setenv("PHASECRAWL_WORKERS", "3")
	t.Setenv("HARNESS_TEST_KEEP", "1")
	env := NodeEnv("PHASECRAWL_DELAY=5ms")
	if slices.Contains(env, "PHASECRAWL_WORKERS=3") || !slices.Contains(env, "HARNESS_TEST_KEEP=1") || env[len(env)-1] != "PHASECRAWL_DELAY=5ms" {
		t.Errorf("NodeEnv kept the test's PHASECRAWL_ variables or lost the others: %q", env)
	}
}

// TestWARCResponsesRevisits: a 200 response and a revisit of an HTTP 200
// (the same payload under another URL) count as archived pages; a 404
// response does not.
func TestWARCResponsesRevisits(t *testing.T) {
	dir := t.TempDir()
	w, err := archive.NewWARCWriter(archive.DefaultWARCConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("<html>same</html>")
	h := http.Header{"Content-Type": {"text/html"}}
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	req := []byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	rv := archive.Revisit{Profile: archive.ProfileIdenticalPayload, RefersToTargetURI: "http://a.test/1", RefersToDate: at, PayloadDigest: archive.Digest(body)}
	for _, x := range []archive.Capture{
		{Target: "http://a.test/1", Date: at, Request: req, Response: archive.HTTPResponseHead("HTTP/1.1", 200, h, len(body)), Body: body},
		{Target: "http://a.test/2", Date: at, Request: req, Response: archive.HTTPResponseHead("HTTP/1.1", 200, h, len(body)), Body: body, Revisit: &rv},
		{Target: "http://a.test/gone", Date: at, Request: req, Response: archive.HTTPResponseHead("HTTP/1.1", 404, h, len(body)), Body: body},
	} {
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := WARCResponses(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["http://a.test/1"] != 1 || got["http://a.test/2"] != 1 {
		t.Fatalf("WARCResponses = %v, want a.test/1 and a.test/2 once each", got)
	}
}
