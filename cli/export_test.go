package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// exportData writes a frontier with URLs in every state: a and b
// completed (b a 404), c stalled, d and e in list, f in progress.
func exportData(t *testing.T) (string, *frontier.Frontier) {
	t.Helper()
	data := t.TempDir()
	f, err := frontier.Open(frontier.Options{Path: filepath.Join(data, frontierFile), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var urls []frontier.NewURL
	for _, p := range []string{"a", "b", "c", "d", "e", "f"} {
		urls = append(urls, frontier.NewURL{URL: "http://x.test/" + p, Host: "x.test", Depth: 1})
	}
	if _, err := f.Add(ctx, urls); err != nil {
		t.Fatal(err)
	}
	ref := func(p string) frontier.Ref { return frontier.RefOf("http://x.test/" + p) }
	if err := f.MarkInProgress(ctx, []frontier.Ref{ref("a"), ref("b"), ref("c"), ref("f")}); err != nil {
		t.Fatal(err)
	}
	res := []frontier.Result{
		{FP: ref("a").FP, Host: "x.test", State: frontier.Completed, Status: 200, Reason: "ok"},
		{FP: ref("b").FP, Host: "x.test", State: frontier.Completed, Status: 404, Reason: "http_4xx"},
		{FP: ref("c").FP, Host: "x.test", State: frontier.Stalled, Reason: "timeout", RetryAt: time.Now().Add(time.Hour)},
	}
	if _, err := f.Settle(ctx, frontier.SettleRequest{Results: res}).Wait(); err != nil {
		t.Fatal(err)
	}
	return data, f
}

func TestExport(t *testing.T) {
	data, f := exportData(t)

	// While the node (here: the frontier) is open, export refuses.
	var out, errOut bytes.Buffer
	if code := Run([]string{"export", "--data", data, "--state", "completed"}, nil, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "stop the node first") {
		t.Fatalf("export of a running node's data: exit %d, %s", code, errOut.String())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		state, format string
		want          []string
	}{
		{"completed", "text", []string{"http://x.test/a", "http://x.test/b"}},
		{"in_list", "text", []string{"http://x.test/d", "http://x.test/e"}},
		{"stalled", "text", []string{"http://x.test/c"}},
		{"in_progress", "text", []string{"http://x.test/f"}},
		{"completed,stalled", "text", []string{"http://x.test/a", "http://x.test/b", "http://x.test/c"}},
		{"all", "text", []string{"http://x.test/a", "http://x.test/b", "http://x.test/c", "http://x.test/d", "http://x.test/e", "http://x.test/f"}},
	} {
		t.Run(tc.state+"/"+tc.format, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := Run([]string{"export", "--data", data, "--state", tc.state, "--format", tc.format}, nil, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			got := strings.Fields(out.String())
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}

	// jsonl carries each record's state, status and reason.
	out.Reset()
	errOut.Reset()
	if code := Run([]string{"export", "--data", data, "--state", "completed,stalled"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := map[string]exportRecord{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r exportRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[r.URL] = r
	}
	if len(got) != 3 {
		t.Fatalf("jsonl: %d records, want 3:\n%s", len(got), out.String())
	}
	if r := got["http://x.test/b"]; r.State != "completed" || r.Status != 404 || r.Reason != "http_4xx" || r.Host != "x.test" || r.Depth != 1 || r.Fetched == nil {
		t.Errorf("jsonl record of b: %+v", r)
	}
	if r := got["http://x.test/c"]; r.State != "stalled" || r.Reason != "timeout" || r.NextTry == nil {
		t.Errorf("jsonl record of c: %+v", r)
	}
	if !strings.Contains(errOut.String(), "exported 3 URLs") {
		t.Errorf("summary: %q", errOut.String())
	}

	// --out writes a file.
	file := filepath.Join(t.TempDir(), "urls.txt")
	if code := Run([]string{"export", "--data", data, "--state", "in_list", "--format", "text", "--out", file}, nil, &out, &errOut); code != 0 {
		t.Fatalf("--out: exit %d: %s", code, errOut.String())
	}
	if b, err := os.ReadFile(file); err != nil || len(strings.Fields(string(b))) != 2 {
		t.Fatalf("--out file: %q, %v", b, err)
	}
}

func TestExportFlags(t *testing.T) {
	data, f := exportData(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no data", []string{"--state", "completed"}, "--data: required"},
		{"no state", []string{"--data", data}, `--state="": must be`},
		{"bad state", []string{"--data", data, "--state", "done"}, `--state="done": must be`},
		{"bad format", []string{"--data", data, "--state", "completed", "--format", "csv"}, `--format="csv": must be jsonl or text`},
		{"not a data dir", []string{"--data", t.TempDir(), "--state", "completed"}, "not a phasecrawl data directory"},
		{"stray argument", []string{"--data", data, "--state", "completed", "x"}, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := Run(append([]string{"export"}, tc.args...), nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut.String(), tc.want)
			}
		})
	}
}
