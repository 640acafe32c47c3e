package archive

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	gowarc "github.com/nlnwa/gowarc/v3"
)

// variedExchanges writes exchanges of every kind the writer makes: HTML
// (deflated with the static table), binary and stored payloads, a
// truncated body, an empty body, a non-2xx status, a whole block without
// a separate body, and URLs that sort differently from their order.
func variedExchanges(t *testing.T, w *WARCWriter, n int) map[string]bool {
	t.Helper()
	urls := map[string]bool{}
	for i := 0; i < n; i++ {
		target, req, resp := testCapture(i, 300+i*37%5000)
		x := Capture{Target: target, Request: req, Response: resp, Date: time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC)}
		switch i % 6 {
		case 1: // head + body, stored
			body := bytes.Repeat([]byte{0, 1, 2, 0xff}, i)
			h := http.Header{"Content-Type": {"image/png"}, "Content-Encoding": {"gzip"}}
			x.Response, x.Body, x.Stored = HTTPResponseHead("HTTP/1.1", 200, h, len(body)), body, true
		case 2: // truncated
			x.Truncated = true
		case 3: // empty body, redirect
			h := http.Header{"Location": {"/x"}}
			x.Response, x.Body = HTTPResponseHead("HTTP/1.1", 301, h, 0), []byte{}
		case 4:
			x.Target = fmt.Sprintf("https://www.Example.org:8443/Z/%d?b=2&a=1", i)
		}
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
		urls[x.Target] = true
	}
	return urls
}

// TestWARCValidatesWithGowarc: every record the writer makes passes
// gowarc's strict validation (WARC 1.1 syntax, header fields, Content-Length,
// block and payload digests), at every compression setting, across rotations.
func TestWARCValidatesWithGowarc(t *testing.T) {
	for _, tt := range []struct {
		name   string
		level  int
		stored bool
	}{{"huffman, stored requests", gzip.HuffmanOnly, true}, {"level 1", gzip.BestSpeed, false}, {"level 9", gzip.BestCompression, false}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c := DefaultWARCConfig(dir)
			c.Prefix, c.MaxSize, c.CompressionLevel, c.StoreRequests = "test", 64<<10, tt.level, tt.stored
			w, err := NewWARCWriter(c)
			if err != nil {
				t.Fatal(err)
			}
			const n = 120
			variedExchanges(t, w, n)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			files := w.Files()
			if len(files) < 3 {
				t.Fatalf("%d files, want rotations", len(files))
			}
			records := 0
			for _, f := range files {
				k, err := ValidateWARC(f)
				if err != nil {
					t.Fatal(err)
				}
				records += k
			}
			if want := 2*n + len(files); records != want {
				t.Errorf("%d valid records, want %d (a warcinfo per file, two per exchange)", records, want)
			}
		})
	}
	// and validation fails on a record whose block does not match its digest
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	target, req, resp := testCapture(1, 100)
	if err := w.WriteCapture(target, "", time.Now(), req, resp); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := readAll(t, w.Files()[0])
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, r := range recs {
		block := r.block
		if r.h["WARC-Type"] == "response" {
			block = bytes.Replace(block, []byte("a"), []byte("b"), 1) // same length, other digest
		}
		zw := gzip.NewWriter(&buf)
		fmt.Fprintf(zw, "WARC/1.1\r\n")
		for _, k := range []string{"WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Target-URI", "WARC-Filename", "WARC-Concurrent-To", "WARC-Warcinfo-ID", "Content-Type", "WARC-Payload-Digest", "WARC-Block-Digest", "Content-Length"} {
			if v, ok := r.h[k]; ok {
				fmt.Fprintf(zw, "%s: %s\r\n", k, v)
			}
		}
		fmt.Fprintf(zw, "\r\n%s\r\n\r\n", block)
		zw.Close()
	}
	bad := filepath.Join(dir, "bad.warc.gz")
	if err := os.WriteFile(bad, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if k, err := ValidateWARC(bad); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Errorf("a wrong digest passes validation (%d records, %v)", k, err)
	}
}

// TestCDXJ: each finished WARC file has a CDXJ index, sorted, one line per
// response record, whose offset and length frame that record; the index the
// writer keeps as it writes equals the one IndexWARC rebuilds from the file.
func TestCDXJ(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, 64<<10)
	const n = 150
	urls := variedExchanges(t, w, n)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := 0
	seen := map[string]bool{}
	for _, f := range w.Files() {
		k, err := CheckCDXJ(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += k
		written, err := os.ReadFile(f + CDXJSuffix)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(written)), "\n") {
			i := strings.Index(l, `"url":"`)
			seen[strings.SplitN(l[i+7:], `"`, 2)[0]] = true
		}
		if err := IndexWARC(f); err != nil {
			t.Fatal(err)
		}
		rebuilt, err := os.ReadFile(f + CDXJSuffix)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(written, rebuilt) {
			t.Errorf("%s: the writer's index\n%s\ndiffers from the one rebuilt from the file\n%s", f, written, rebuilt)
		}
	}
	if lines != n || len(seen) != len(urls) {
		t.Errorf("%d index lines for %d URLs, want %d for %d", lines, len(seen), n, len(urls))
	}
	// a line that points elsewhere is caught
	f := w.Files()[0]
	idx, _ := os.ReadFile(f + CDXJSuffix)
	first, rest, _ := strings.Cut(string(idx), "\n")
	second, _, _ := strings.Cut(rest, "\n")
	j1, j2 := first[strings.Index(first, `"offset"`):], second[strings.Index(second, `"offset"`):]
	swapped := strings.Replace(first, j1, j2, 1) + "\n" + rest
	if err := os.WriteFile(f+CDXJSuffix, []byte(swapped), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckCDXJ(f); err == nil {
		t.Error("an index line pointing at another record passes the check")
	}
}

// TestCDXJAfterCrash: a file left open by a kill has no index; Recover
// cuts it and writes the index the writer would have written (of the
// records kept), and IndexMissing indexes finished files that have none.
func TestCDXJAfterCrash(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	variedExchanges(t, w, 40)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	open, _ := filepath.Glob(filepath.Join(dir, "*"+OpenSuffix))
	if len(open) != 1 {
		t.Fatalf("open files: %v", open)
	}
	// the "crash": the file as the writer left it, with a torn last record, and no index
	b, err := os.ReadFile(open[0])
	if err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), filepath.Base(open[0]))
	if err := os.WriteFile(crashed, b[:len(b)-10], 0o644); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rep, err := Recover(filepath.Dir(crashed))
	if err != nil || len(rep.Files) != 1 || rep.Files[0].Final == "" {
		t.Fatalf("recover: %+v, %v", rep, err)
	}
	k, err := CheckCDXJ(rep.Files[0].Final)
	if err != nil || k != 39 {
		t.Fatalf("index of the recovered file: %d lines (want 39: the last exchange was torn), %v", k, err)
	}
	// a finished file without an index (older version, or a failed index write)
	if err := os.Remove(w.Files()[0] + CDXJSuffix); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.Files()[0]+CDXJSuffix+".tmp", []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	done, err := IndexMissing(dir)
	if err != nil || len(done) != 1 {
		t.Fatalf("IndexMissing: %v, %v", done, err)
	}
	if k, err := CheckCDXJ(w.Files()[0]); err != nil || k != 40 {
		t.Fatalf("rebuilt index: %d lines, %v", k, err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmp) != 0 {
		t.Errorf("left: %v", tmp)
	}
}

func TestSURT(t *testing.T) {
	for in, want := range map[string]string{
		"http://example.org/":                        "org,example)/",
		"https://www.Example.org:8443/A/b?z=1&a=2#f": "org,example:8443)/a/b?a=2&z=1",
		"http://www.org/x":                           "org,www)/x",
		"https://h.example:443":                      "example,h)/",
		"http://127.0.0.1:8080/p":                    "1,0,0,127:8080)/p",
		"http://[::1]:81/":                           "::1:81)/",
	} {
		if got := SURT(in); got != want {
			t.Errorf("SURT(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCDXJRevisit: a revisit record (written here with gowarc, as a
// recurring crawl writes them) gets an index line of media type
// warc/revisit that the check accepts.
func TestCDXJRevisit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.warc.gz")
	var buf bytes.Buffer
	b := gowarc.NewRecordBuilder(gowarc.Revisit, gowarc.WithAddMissingDigest(true), gowarc.WithAddMissingRecordId(true))
	b.AddWarcHeader(gowarc.WarcTargetURI, "http://h.example/again")
	b.AddWarcHeaderTime(gowarc.WarcDate, time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	b.AddWarcHeader(gowarc.WarcProfile, gowarc.ProfileIdenticalPayloadDigestV1_1)
	b.AddWarcHeader(gowarc.WarcPayloadDigest, "sha1:G7HRM7BGOKSKMSXZAHMUQTTV53QOFSMK")
	b.AddWarcHeader(gowarc.ContentType, "application/http;msgtype=response")
	if _, err := b.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	rec, _, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(&buf)
	if _, _, err := gowarc.NewMarshaler().Marshal(zw, rec, 0); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := IndexWARC(path); err != nil {
		t.Fatal(err)
	}
	idx, _ := os.ReadFile(path + CDXJSuffix)
	want := `example,h)/again 20260304050607 {"url":"http://h.example/again","mime":"warc/revisit","status":"200","digest":"G7HRM7BGOKSKMSXZAHMUQTTV53QOFSMK","length":"` + fmt.Sprint(buf.Len()) + `","offset":"0","filename":"r.warc.gz"}` + "\n"
	if string(idx) != want {
		t.Errorf("index\n%s\nwant\n%s", idx, want)
	}
	if k, err := CheckCDXJ(path); err != nil || k != 1 {
		t.Errorf("check: %d, %v", k, err)
	}
}
