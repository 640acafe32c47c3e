package node

import (
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

// synthResponses returns up to n HTML responses of the default synthetic
// web as Fetch returns them, in breadth-first order from its seeds.
func synthResponses(tb testing.TB, n int) []*fetch.Response {
	rs, err := synthweb.SampleDefault(2*n, false)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*fetch.Response
	for _, r := range rs {
		if r.Code != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || len(out) == n {
			continue
		}
		out = append(out, &fetch.Response{URL: r.URL, Status: 200, Header: r.Header, Body: r.Body, RawBody: r.Body,
			ContentType: "text/html", Proto: "HTTP/1.1", IP: "127.0.0.1",
			RequestDump: []byte("GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: phasecrawl\r\nAccept-Encoding: gzip\r\n\r\n")})
	}
	return out
}

// BenchmarkPageLinks measures the worker's handling of a fetched HTML page
// without the network, the WARC file and the frontier: media type checks,
// link extraction, scoping of every link; ns/op and allocs/op are per page.
func BenchmarkPageLinks(b *testing.B) {
	resps := synthResponses(b, 1000)
	c := config.Default()
	c.Name = "bench"
	c.Data = b.TempDir()
	c.HTTP = "127.0.0.1:0"
	c.WARC.Enabled = false
	c.Scope.AllowDomains = []string{"synth.test"}
	n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer n.closeResources()
	t := &hostTrip{n: n}
	b.ReportAllocs()
	links := 0
	for i := 0; b.Loop(); i++ {
		resp := resps[i%len(resps)]
		t.found = t.found[:0]
		_ = mediaType(resp.ContentType)
		_ = precompressed(resp.Header.Get("Content-Encoding"), resp.ContentType)
		if isHTML(resp.ContentType, resp.Body) {
			links += t.links(resp, bucket.Item{URL: resp.URL, Depth: 1}, &archive.LogEntry{})
		}
	}
	if links == 0 {
		b.Fatal("no links")
	}
	_ = http.StatusOK
}

// TestMediaTypeShortcut: mediaType's shortcut for bare media types returns
// what parsing them returns.
func TestMediaTypeShortcut(t *testing.T) {
	parse := func(ct string) string {
		if ct == "" {
			return ""
		}
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
		}
		return mt
	}
	for _, ct := range []string{"", "text/html", "TEXT/HTML", "text/html; charset=utf-8", " text/html", "text/html ", "text", "text/", "/x",
		"a/b/c", "text/html\x00", "tëxt/html", "text/HTML", "application/xhtml+xml", "x/y=z", "text/(html)", "text/\"html\"", "image/jpeg", "a@b/c"} {
		if got, want := mediaType(ct), parse(ct); got != want {
			t.Errorf("mediaType(%q) = %q, parsing gives %q", ct, got, want)
		}
	}
}
