package archive

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

func testCapture(i int, bodySize int) (target string, req, resp []byte) {
	target = fmt.Sprintf("http://h%d.synth.test/p/%d", i%7, i)
	req = []byte(fmt.Sprintf("GET /p/%d HTTP/1.1\r\nHost: h%d.synth.test\r\nUser-Agent: t\r\nAccept-Encoding: gzip, deflate\r\n\r\n", i, i%7))
	body := make([]byte, bodySize)
	r := rand.New(rand.NewPCG(uint64(i), 1))
	for j := range body {
		body[j] = byte('a' + r.IntN(26))
	}
	h := http.Header{"Content-Type": {"text/html"}, "Transfer-Encoding": {"chunked"}, "Content-Length": {"999999"}}
	resp = HTTPResponseBlock("HTTP/1.1", 200, h, body)
	return
}

type rec struct {
	h     map[string]string
	block []byte
}

func readAll(t *testing.T, path string) ([]rec, error) {
	t.Helper()
	var out []rec
	err := ReadWARC(path, func(h map[string]string, block []byte) error {
		out = append(out, rec{h, append([]byte(nil), block...)})
		return nil
	})
	return out, err
}

func newWriter(t *testing.T, dir string, maxSize int64) *WARCWriter {
	t.Helper()
	c := DefaultWARCConfig(dir)
	c.Prefix = "test"
	if maxSize > 0 {
		c.MaxSize = maxSize
	}
	w, err := NewWARCWriter(c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var fileNameRE = regexp.MustCompile(`^test-\d{14}-(\d{5})-[0-9a-f]{6}\.warc\.gz$`)

// checkFile verifies the structure of one file and returns its records.
func checkFile(t *testing.T, path string) []rec {
	t.Helper()
	recs, err := readAll(t, path)
	if err != nil {
		t.Fatalf("ReadWARC(%s): %v", path, err)
	}
	if len(recs) == 0 || recs[0].h["WARC-Type"] != "warcinfo" {
		t.Fatalf("%s: does not start with warcinfo", path)
	}
	info := recs[0].h
	if info["WARC-Filename"] != filepath.Base(path) || info["Content-Type"] != "application/warc-fields" {
		t.Fatalf("%s: warcinfo %v", path, info)
	}
	responses := map[string]rec{}
	for _, r := range recs[1:] {
		if r.h["WARC-Type"] == "response" {
			responses[r.h["WARC-Record-ID"]] = r
		}
	}
	for i, r := range recs {
		h := r.h
		if Digest(r.block) != h["WARC-Block-Digest"] || fmt.Sprint(len(r.block)) != h["Content-Length"] {
			t.Fatalf("%s record %d: digest/length mismatch", path, i)
		}
		if !regexp.MustCompile(`^<urn:uuid:[0-9a-f-]{36}>$`).MatchString(h["WARC-Record-ID"]) {
			t.Fatalf("record id %q", h["WARC-Record-ID"])
		}
		if _, err := time.Parse(time.RFC3339Nano, h["WARC-Date"]); err != nil || !strings.HasSuffix(h["WARC-Date"], "Z") {
			t.Fatalf("WARC-Date %q", h["WARC-Date"])
		}
		if i == 0 {
			continue
		}
		if h["WARC-Warcinfo-ID"] != info["WARC-Record-ID"] {
			t.Fatalf("%s record %d: Warcinfo-ID %s, file's warcinfo is %s", path, i, h["WARC-Warcinfo-ID"], info["WARC-Record-ID"])
		}
		switch h["WARC-Type"] {
		case "request":
			resp, ok := responses[h["WARC-Concurrent-To"]]
			if !ok || resp.h["WARC-Target-URI"] != h["WARC-Target-URI"] || h["Content-Type"] != "application/http;msgtype=request" {
				t.Fatalf("%s record %d: request not linked to its response", path, i)
			}
		case "response":
			j := bytes.Index(r.block, []byte("\r\n\r\n"))
			if j < 0 || Digest(r.block[j+4:]) != h["WARC-Payload-Digest"] || h["Content-Type"] != "application/http;msgtype=response" {
				t.Fatalf("%s record %d: payload digest", path, i)
			}
		default:
			t.Fatalf("%s record %d: type %q", path, i, h["WARC-Type"])
		}
	}
	return recs
}

func TestWARCConcurrentWriteRead(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	const workers, per = 8, 40
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				n := g*per + i
				target, req, resp := testCapture(n, 300+n)
				if err := w.WriteCapture(target, "127.0.0.1", time.Now(), req, resp); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	target, req, resp := testCapture(0, 1)
	if err := w.WriteCapture(target, "", time.Now(), req, resp); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	files := w.Files()
	if len(files) != 1 || !fileNameRE.MatchString(filepath.Base(files[0])) {
		t.Fatalf("files %v", files)
	}
	if open, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(open) != 0 {
		t.Fatalf("left open: %v", open)
	}
	recs := checkFile(t, files[0])
	if len(recs) != 2*workers*per+1 {
		t.Fatalf("%d records, want %d", len(recs), 2*workers*per+1)
	}
	// Blocks round-trip byte for byte.
	seen := 0
	for _, r := range recs {
		if r.h["WARC-Target-URI"] == "http://h5.synth.test/p/12" && r.h["WARC-Type"] == "response" {
			_, _, want := testCapture(12, 312)
			if !bytes.Equal(r.block, want) || r.h["WARC-IP-Address"] != "127.0.0.1" {
				t.Fatal("response block differs from what was written")
			}
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("target seen %d times", seen)
	}
}

func TestWARCRotation(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, 8<<10)
	const n = 60
	for i := 0; i < n; i++ {
		target, req, resp := testCapture(i, 1000)
		if err := w.WriteCapture(target, "10.0.0.1", time.Unix(1700000000, 0), req, resp); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := w.Files()
	if len(files) < 3 {
		t.Fatalf("only %d files", len(files))
	}
	total := 0
	for i, f := range files {
		m := fileNameRE.FindStringSubmatch(filepath.Base(f))
		if m == nil || m[1] != fmt.Sprintf("%05d", i) {
			t.Fatalf("file %d named %s", i, f)
		}
		recs := checkFile(t, f)
		if (len(recs)-1)%2 != 0 {
			t.Fatalf("%s: an exchange was split across files", f)
		}
		total += len(recs)
		if recs[1].h["WARC-Date"] != "2023-11-14T22:13:20Z" {
			t.Fatalf("date %q", recs[1].h["WARC-Date"])
		}
	}
	if total != 2*n+len(files) {
		t.Fatalf("%d records in %d files, want %d", total, len(files), 2*n+len(files))
	}
}

// writeFile writes n exchanges into a fresh file and returns its path.
func writeFile(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	for i := 0; i < n; i++ {
		target, req, resp := testCapture(i, 2000)
		if err := w.WriteCapture(target, "", time.Now(), req, resp); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Files()[0]
}

// memberEnds returns the offsets at which gzip members end.
func memberEnds(t *testing.T, path string) []int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ends []int64
	br := bytes.NewReader(data)
	for br.Len() > 0 {
		zr, err := gzip.NewReader(br)
		if err != nil {
			t.Fatal(err)
		}
		zr.Multistream(false)
		if _, err := io.Copy(io.Discard, zr); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, int64(len(data)-br.Len()))
	}
	return ends
}

func TestTornRecordAndRecover(t *testing.T) {
	const n = 6
	orig := writeFile(t, n)
	data, _ := os.ReadFile(orig)
	ends := memberEnds(t, orig) // 1 warcinfo + 2n members
	if len(ends) != 2*n+1 || ends[len(ends)-1] != int64(len(data)) {
		t.Fatalf("member ends %v (file %d bytes)", ends, len(data))
	}
	lastResp := ends[len(ends)-2] // start of the last response member
	tests := []struct {
		name      string
		cut       int64 // file length after the simulated crash
		readRecs  int   // records ReadWARC delivers before the error
		keptRecs  int   // records after Recover
		removed   bool
		wantClean bool
	}{
		{"last byte missing", int64(len(data)) - 1, 2 * n, 2*n - 1, false, false},
		{"mid last response", lastResp + (int64(len(data))-lastResp)/2, 2 * n, 2*n - 1, false, false},
		{"inside gzip header of last response", lastResp + 5, 2 * n, 2*n - 1, false, false},
		{"exactly after a request", lastResp, 2 * n, 2*n - 1, false, true},
		{"mid warcinfo", ends[0] / 2, 0, 0, true, false},
		{"complete", int64(len(data)), 2*n + 1, 2*n + 1, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, filepath.Base(orig))
			if err := os.WriteFile(path, data[:tt.cut], 0o644); err != nil {
				t.Fatal(err)
			}
			recs, err := readAll(t, path)
			if tt.wantClean != (err == nil) || (err != nil && !errors.Is(err, ErrTornRecord)) {
				t.Fatalf("ReadWARC err = %v, want torn=%v", err, !tt.wantClean)
			}
			if len(recs) != tt.readRecs {
				t.Fatalf("ReadWARC delivered %d records, want %d", len(recs), tt.readRecs)
			}
			// The crash left it as .open: Recover repairs and renames it.
			if err := os.Rename(path, path+OpenSuffix); err != nil {
				t.Fatal(err)
			}
			rep, err := Recover(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Files) != 1 || rep.Files[0].Removed != tt.removed || rep.Files[0].Records != tt.keptRecs {
				t.Fatalf("report %+v", rep)
			}
			if tt.removed {
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Fatalf("left %v", ents)
				}
				return
			}
			if rep.Files[0].Final != path {
				t.Fatalf("renamed to %q", rep.Files[0].Final)
			}
			fi, _ := os.Stat(path)
			if rep.Files[0].Cut != tt.cut-fi.Size() {
				t.Fatalf("Cut %d, but %d bytes were removed", rep.Files[0].Cut, tt.cut-fi.Size())
			}
			recs = checkFile(t, path)
			if len(recs) != tt.keptRecs {
				t.Fatalf("%d records after Recover, want %d", len(recs), tt.keptRecs)
			}
			if rep, err := Recover(dir); err != nil || len(rep.Files) != 0 {
				t.Fatalf("second Recover: %+v %v", rep, err)
			}
		})
	}
}

func TestReadWARCMalformed(t *testing.T) {
	orig := writeFile(t, 3)
	data, _ := os.ReadFile(orig)
	ends := memberEnds(t, orig)
	dir := t.TempDir()

	// A flipped byte inside a member (bad deflate data or CRC).
	bad := append([]byte(nil), data...)
	bad[ends[2]+(ends[3]-ends[2])/2] ^= 0xff
	p := filepath.Join(dir, "flip.warc.gz")
	os.WriteFile(p, bad, 0o644)
	if _, err := readAll(t, p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("flipped byte: %v", err)
	}

	member := func(rec string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte(rec))
		zw.Close()
		return b.Bytes()
	}
	block := "hello"
	tests := []struct{ name, rec string }{
		{"digest mismatch", "WARC/1.1\r\nWARC-Type: resource\r\nWARC-Block-Digest: " + Digest([]byte("other")) + "\r\nContent-Length: 5\r\n\r\n" + block + "\r\n\r\n"},
		{"content-length too long", "WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 9\r\n\r\n" + block + "\r\n\r\n"},
		{"content-length too short", "WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 3\r\n\r\n" + block + "\r\n\r\n"},
		{"no content-length", "WARC/1.1\r\nWARC-Type: resource\r\n\r\n" + block + "\r\n\r\n"},
		{"bad version", "HTTP/1.1 200 OK\r\n\r\n"},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".warc.gz")
		os.WriteFile(p, append(append([]byte(nil), data...), member(tt.rec)...), 0o644)
		recs, err := readAll(t, p)
		if !errors.Is(err, ErrMalformed) || len(recs) != 7 {
			t.Errorf("%s: %d records, err %v; want 7 and ErrMalformed", tt.name, len(recs), err)
		}
	}
	// Several records in one member are fine.
	two := "WARC/1.0\r\nWARC-Type: resource\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n"
	p = filepath.Join(dir, "two.warc.gz")
	os.WriteFile(p, member(two+two), 0o644)
	if recs, err := readAll(t, p); err != nil || len(recs) != 2 || string(recs[1].block) != "hello" {
		t.Fatalf("two records in one member: %d %v", len(recs), err)
	}
	// fn's error stops the scan and comes back unwrapped.
	stop := errors.New("stop")
	if err := ReadWARC(orig, func(map[string]string, []byte) error { return stop }); err != stop {
		t.Fatalf("fn error: %v", err)
	}
}

func TestHTTPResponseBlock(t *testing.T) {
	h := http.Header{
		"Content-Type":      {"text/html"},
		"Content-Encoding":  {"gzip"},
		"Transfer-Encoding": {"chunked"},
		"Content-Length":    {"1"},
		"X-Evil":            {"a\r\nInjected: 1"},
	}
	got := string(HTTPResponseBlock("HTTP/1.1", 404, h, []byte("RAW")))
	want := "HTTP/1.1 404 Not Found\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\nContent-Type: text/html\r\nX-Evil: a  Injected: 1\r\n\r\nRAW"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if h.Get("Transfer-Encoding") != "chunked" {
		t.Fatal("caller's header modified")
	}
	if got := string(HTTPResponseBlock("", 200, nil, nil)); got != "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" {
		t.Fatalf("nil header: %q", got)
	}
}

func TestWARCConfigValidate(t *testing.T) {
	mod := func(f func(*WARCConfig)) WARCConfig { c := DefaultWARCConfig(t.TempDir()); f(&c); return c }
	tests := []struct {
		name string
		c    WARCConfig
		key  string
	}{
		{"default", DefaultWARCConfig(t.TempDir()), ""},
		{"no dir", mod(func(c *WARCConfig) { c.Dir = "" }), "dir"},
		{"prefix slash", mod(func(c *WARCConfig) { c.Prefix = "a/b" }), "prefix"},
		{"prefix empty", mod(func(c *WARCConfig) { c.Prefix = "" }), "prefix"},
		{"max small", mod(func(c *WARCConfig) { c.MaxSize = 10 }), "max_size"},
		{"level", mod(func(c *WARCConfig) { c.CompressionLevel = 0 }), "compression_level"},
		{"software", mod(func(c *WARCConfig) { c.Software = "a\nb" }), "software"},
	}
	for _, tt := range tests {
		err := tt.c.Validate()
		if (tt.key == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.key)) {
			t.Errorf("%s: err %v, want key %q", tt.name, err, tt.key)
		}
	}
}

// TestWARCStoredResponse: a response written with Stored is a plain gzip
// member holding the block uncompressed (deflate stored blocks), read back
// like any other.
func TestWARCStoredResponse(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	target, req, resp := testCapture(1, 64<<10)
	if err := w.Write(Capture{Target: target, Request: req, Response: resp}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Capture{Target: target, Request: req, Response: resp, Stored: true}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	recs := checkFile(t, files[0])
	if len(recs) != 5 || !bytes.Equal(recs[2].block, resp) || !bytes.Equal(recs[4].block, resp) {
		t.Fatalf("%d records; responses read back equal: %v %v", len(recs), bytes.Equal(recs[2].block, resp), bytes.Equal(recs[4].block, resp))
	}
	// Member sizes, from where each gzip member ends.
	var sizes []int
	prev := int64(0)
	for _, end := range memberEnds(t, files[0]) {
		sizes = append(sizes, int(end-prev))
		prev = end
	}
	// warcinfo, request, response (deflated), request, response (stored).
	if len(sizes) != 5 {
		t.Fatalf("%d gzip members, want 5", len(sizes))
	}
	if deflated, stored := sizes[2], sizes[4]; deflated >= len(resp) || stored < len(resp) || stored > len(resp)+1024 {
		t.Fatalf("response members: deflated %d bytes, stored %d bytes, block %d bytes", deflated, stored, len(resp))
	}
}

// TestWARCResponseHeadAndBody: a response given as head (HTTPResponseHead)
// plus Body is archived exactly like the same response given as one block
// (HTTPResponseBlock): same block, same digests.
func TestWARCResponseHeadAndBody(t *testing.T) {
	h := http.Header{"Content-Type": {"text/html"}, "Transfer-Encoding": {"chunked"}, "X-Multi": {"a", "b\r\nc"}}
	for _, body := range [][]byte{nil, {}, []byte("<html>hello</html>"), bytes.Repeat([]byte("abc\r\n\r\n"), 5000)} {
		dir := t.TempDir()
		w := newWriter(t, dir, 0)
		date := time.Unix(1700000000, 0)
		req := []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		block := HTTPResponseBlock("HTTP/1.1", 200, h, body)
		head := HTTPResponseHead("HTTP/1.1", 200, h, len(body))
		if !bytes.Equal(append(append([]byte(nil), head...), body...), block) {
			t.Fatalf("head+body != block:\n%q\n%q", head, block)
		}
		if err := w.Write(Capture{Target: "http://a/", Date: date, Request: req, Response: block}); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(Capture{Target: "http://a/", Date: date, Request: req, Response: head, Body: body}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files := w.Files()
		if len(files) != 1 {
			t.Fatalf("files %v", files)
		}
		recs, err := readAll(t, files[0])
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 5 { // warcinfo + 2 × (request, response)
			t.Fatalf("%d records", len(recs))
		}
		for i := 1; i <= 2; i++ {
			a, b := recs[i], recs[i+2]
			if !bytes.Equal(a.block, b.block) {
				t.Fatalf("record %d: blocks differ", i)
			}
			for _, k := range []string{"WARC-Type", "WARC-Block-Digest", "WARC-Payload-Digest", "Content-Length", "WARC-Target-URI", "WARC-Date", "Content-Type"} {
				if a.h[k] != b.h[k] {
					t.Fatalf("record %d: %s %q != %q", i, k, a.h[k], b.h[k])
				}
			}
		}
		if recs[2].h["WARC-Payload-Digest"] != Digest(body) {
			t.Fatalf("payload digest %q, want %q", recs[2].h["WARC-Payload-Digest"], Digest(body))
		}
	}
}

// TestWARCStoreRequests: with StoreRequests the request records are stored
// gzip members (read back by compress/gzip like the others), the responses
// still deflated.
func TestWARCStoreRequests(t *testing.T) {
	reqSizes := map[bool]int{}
	for _, store := range []bool{false, true} {
		dir := t.TempDir()
		c := DefaultWARCConfig(dir)
		c.StoreRequests = store
		w, err := NewWARCWriter(c)
		if err != nil {
			t.Fatal(err)
		}
		target, req, resp := testCapture(1, 8<<10)
		req = append(req[:len(req)-2:len(req)-2], []byte(strings.Repeat("X-Pad: aaaaaaaaaaaaaaaa\r\n", 20)+"\r\n")...)
		if err := w.Write(Capture{Target: target, Request: req, Response: resp}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		files := w.Files()
		recs := checkFile(t, files[0])
		if len(recs) != 3 || !bytes.Equal(recs[1].block, req) || !bytes.Equal(recs[2].block, resp) {
			t.Fatalf("store=%v: %d records, blocks read back equal: %v %v", store, len(recs), bytes.Equal(recs[1].block, req), bytes.Equal(recs[2].block, resp))
		}
		ends := memberEnds(t, files[0])
		if len(ends) != 3 {
			t.Fatalf("%d members", len(ends))
		}
		reqSize, respSize := int(ends[1]-ends[0]), int(ends[2]-ends[1])
		reqSizes[store] = reqSize
		if store && reqSize <= len(req) {
			t.Fatalf("store=%v: request member %d bytes for a %d-byte request", store, reqSize, len(req))
		}
		if respSize >= len(resp) {
			t.Fatalf("store=%v: response member %d bytes for a %d-byte block: not deflated", store, respSize, len(resp))
		}
	}
	if reqSizes[false] >= reqSizes[true] {
		t.Fatalf("request member deflated %d bytes, stored %d", reqSizes[false], reqSizes[true])
	}
}

// TestWARCLevels: every valid compression level writes files ReadWARC
// (compress/gzip) reads back record for record.
func TestWARCLevels(t *testing.T) {
	for _, level := range []int{-2, 1, 5, 9} {
		dir := t.TempDir()
		c := DefaultWARCConfig(dir)
		c.CompressionLevel = level
		w, err := NewWARCWriter(c)
		if err != nil {
			t.Fatal(err)
		}
		var resps [][]byte
		for i := range 20 {
			target, req, resp := testCapture(i, 100+i*400)
			resps = append(resps, resp)
			if err := w.Write(Capture{Target: target, Request: req, Response: resp}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		recs := checkFile(t, w.Files()[0])
		n := 0
		for _, r := range recs {
			if r.h["WARC-Type"] == "response" {
				if !bytes.Equal(r.block, resps[n]) {
					t.Fatalf("level %d: response %d differs", level, n)
				}
				n++
			}
		}
		if n != len(resps) {
			t.Fatalf("level %d: %d responses read back, want %d", level, n, len(resps))
		}
	}
}

// openRecords returns the records in the writer's .open file as it is on disk.
func openRecords(t *testing.T, dir string) []rec {
	t.Helper()
	open, _ := filepath.Glob(filepath.Join(dir, "*"+OpenSuffix))
	if len(open) != 1 {
		t.Fatalf("open files %v, want one", open)
	}
	recs, err := readAll(t, open[0])
	if err != nil {
		t.Fatalf("ReadWARC(%s): %v", open[0], err)
	}
	return recs
}

// TestWARCFlush: records reach the file at Flush, when WARCBufferSize bytes
// are buffered, and at Close — never half a record; a failed flush loses
// the buffered records, says so, and leaves a readable file that later
// records join.
func TestWARCFlush(t *testing.T) {
	dir := t.TempDir()
	c := DefaultWARCConfig(dir)
	c.Prefix, c.FlushDelay = "test", time.Minute // no flush by time in this test
	w, err := NewWARCWriter(c)
	if err != nil {
		t.Fatal(err)
	}
	write := func(i, size int) {
		t.Helper()
		target, req, resp := testCapture(i, size)
		if err := w.WriteCapture(target, "", time.Now(), req, resp); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		write(i, 500)
	}
	if got := len(openRecords(t, dir)); got != 1 {
		t.Fatalf("before Flush the file holds %d records, want 1 (warcinfo)", got)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := len(openRecords(t, dir)); got != 7 {
		t.Fatalf("after Flush the file holds %d records, want 7", got)
	}
	// Random letters deflate to ~60%: two exchanges of 0.9 buffer each fill it.
	write(3, WARCBufferSize*9/10)
	write(4, WARCBufferSize*9/10)
	if got := len(openRecords(t, dir)); got != 11 {
		t.Fatalf("a full buffer was not written: the file holds %d records, want 11", got)
	}

	// A flush that fails: the file handle cannot write.
	good := w.f
	ro, err := os.Open(w.openPath)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.f = ro
	w.mu.Unlock()
	write(5, 500)
	err = w.Flush()
	if err == nil || !strings.Contains(err.Error(), w.openPath) || !strings.Contains(err.Error(), "buffered bytes lost") {
		t.Fatalf("failed flush: %v, want an error naming the file and the loss", err)
	}
	w.mu.Lock()
	w.f = good
	w.mu.Unlock()
	ro.Close()
	write(6, 500)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := checkFile(t, w.Files()[0])
	var targets []string
	for _, r := range recs[1:] {
		if r.h["WARC-Type"] == "response" {
			targets = append(targets, r.h["WARC-Target-URI"][len("http://h0.synth.test/p/"):])
		}
	}
	if got := strings.Join(targets, ","); got != "0,1,2,3,4,6" {
		t.Fatalf("responses in the file: %s, want 0,1,2,3,4,6 (5 was lost by the failed flush)", got)
	}
}

// TestWARCFlushDelay: a buffered record reaches the file by itself after
// FlushDelay; with FlushDelay 0 every exchange is written at once.
func TestWARCFlushDelay(t *testing.T) {
	for _, delay := range []time.Duration{0, 5 * time.Millisecond} {
		dir := t.TempDir()
		c := DefaultWARCConfig(dir)
		c.Prefix, c.FlushDelay = "test", delay
		w, err := NewWARCWriter(c)
		if err != nil {
			t.Fatal(err)
		}
		target, req, resp := testCapture(1, 500)
		if err := w.WriteCapture(target, "", time.Now(), req, resp); err != nil {
			t.Fatal(err)
		}
		if delay == 0 {
			if got := len(openRecords(t, dir)); got != 3 {
				t.Fatalf("FlushDelay 0: the file holds %d records right after Write, want 3", got)
			}
		} else {
			wait.For(t, 10*time.Second, fmt.Sprintf("FlushDelay %s: the record written by itself", delay), func() bool {
				return len(openRecords(t, dir)) == 3
			})
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWARCWriteBehind: once WriteBehindChunk bytes are written, their
// write-out is started and the chunk before is dropped from the cache; the
// file stays whole.
func TestWARCWriteBehind(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	const n = 800 // ~40 KB per exchange after gzip: ~32 MB, four chunks
	for i := 0; i < n; i++ {
		target, req, resp := testCapture(i, 64<<10)
		if err := w.WriteCapture(target, "", time.Now(), req, resp); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	written, started, dropped := w.written, w.started, w.dropped
	w.mu.Unlock()
	if written < 3*WriteBehindChunk+WARCBufferSize {
		t.Fatalf("only %d bytes written", written)
	}
	if started < 2*WriteBehindChunk || started > written || written-started >= WriteBehindChunk+WARCBufferSize {
		t.Fatalf("write-out started up to %d of %d bytes written", started, written)
	}
	if dropped < WriteBehindChunk || dropped >= started || started-dropped >= WriteBehindChunk+WARCBufferSize {
		t.Fatalf("cache dropped up to %d, write-out started up to %d", dropped, started)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if recs := checkFile(t, w.Files()[0]); len(recs) != 2*n+1 {
		t.Fatalf("%d records, want %d", len(recs), 2*n+1)
	}
}
