package cli

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

// TestCmdCDXJ: phasecrawl cdxj writes the missing index of a data
// directory's WARC files, checks it, and refuses bad arguments.
func TestCmdCDXJ(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "warc")
	w, err := archive.NewWARCWriter(archive.DefaultWARCConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://b.example/2", "http://a.example/1"} {
		head := archive.HTTPResponseHead("HTTP/1.1", 200, http.Header{"Content-Type": {"text/html"}}, 2)
		if err := w.Write(archive.Capture{Target: u, Request: []byte("GET / HTTP/1.1\r\n\r\n"), Response: head, Body: []byte("hi"), Date: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f := w.Files()[0]
	if err := os.Remove(f + archive.CDXJSuffix); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Run([]string{"cdxj", "--data", data}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "indexed "+f) {
		t.Fatalf("cdxj --data: %d %s %s", code, out.String(), errb.String())
	}
	idx, err := os.ReadFile(f + archive.CDXJSuffix)
	if err != nil || !strings.HasPrefix(string(idx), "example,a)/1 ") || strings.Count(string(idx), "\n") != 2 {
		t.Fatalf("index %q, %v", idx, err)
	}
	out.Reset()
	if code := Run([]string{"cdxj", "--check", "--data", data}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "(2 lines)") {
		t.Fatalf("cdxj --check: %d %s %s", code, out.String(), errb.String())
	}
	// a line pointing at the wrong record is reported
	if err := os.WriteFile(f+archive.CDXJSuffix, bytes.Replace(idx, []byte(`"offset":"`), []byte(`"offset":"1`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := Run([]string{"cdxj", "--check", f}, nil, &out, &errb); code == 0 {
		t.Error("cdxj --check passes a wrong offset")
	}
	if code := Run([]string{"cdxj"}, nil, &out, &errb); code == 0 {
		t.Error("cdxj without --data or files succeeds")
	}
}
