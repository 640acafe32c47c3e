package archive

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// htmlTableLens computes htmlLitLens from Go's doc/*.html.
func htmlTableLens(t *testing.T) []uint8 {
	var freq [257]uint64
	total := uint64(0)
	for _, f := range []string{"go_spec.html", "go_mem.html", "asm.html"} {
		b, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "doc", f))
		if err != nil {
			t.Skipf("Go's docs: %v", err)
		}
		for _, c := range b {
			freq[c]++
		}
		total += uint64(len(b))
	}
	// Record and HTTP headers, about an eighth of a typical record.
	for range 60 {
		for _, c := range []byte(headerSample) {
			freq[c]++
		}
		total += uint64(len(headerSample))
	}
	floor := max(1, total/65536)
	for i := range freq {
		freq[i] = max(freq[i], floor)
	}
	return limitedLengths(freq[:], 15)
}

// headerSample is what the headers of a response record look like.
const headerSample = "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e>\r\n" +
	"WARC-Date: 2026-11-24T02:15:03.123456789Z\r\nWARC-Target-URI: http://www.example.com/news/2026/index.html\r\n" +
	"WARC-IP-Address: 93.184.216.34\r\nWARC-Warcinfo-ID: <urn:uuid:7c9e6679-7425-40de-944b-e07fc1f90ae7>\r\n" +
	"Content-Type: application/http;msgtype=response\r\nWARC-Payload-Digest: sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ\r\n" +
	"WARC-Block-Digest: sha1:LKJHG7D6SAF5GH4JK3L2Q1W0ERTYUIOP\r\nContent-Length: 5321\r\n\r\n" +
	"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 5123\r\nContent-Type: text/html; charset=utf-8\r\n" +
	"Date: Tue, 24 Nov 2026 02:15:03 GMT\r\nLast-Modified: Mon, 23 Nov 2026 18:40:11 GMT\r\nServer: nginx/1.24.0\r\n" +
	"Vary: Accept-Encoding\r\n\r\n"

// TestHTMLLitLens: htmlLitLens is a complete prefix code of at most 15
// bits, and what its comment says (checked with Go 1.26.8's docs;
// PHASECRAWL_PRINT_HUFF=1 prints the table they give).
func TestHTMLLitLens(t *testing.T) {
	lens := htmlTableLens(t)
	if os.Getenv("PHASECRAWL_PRINT_HUFF") != "" {
		var b strings.Builder
		for i, l := range lens {
			if i%16 == 0 {
				b.WriteString("\n\t")
			} else {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%d,", l)
		}
		t.Logf("%s", b.String())
	}
	kraft := 0.0
	for _, l := range htmlLitLens {
		if l == 0 || l > 15 {
			t.Fatalf("length %d", l)
		}
		kraft += 1 / float64(uint64(1)<<l)
	}
	if kraft != 1 {
		t.Fatalf("Kraft sum %v, want 1", kraft)
	}
	if !bytes.Equal(lens, htmlLitLens[:]) {
		// Not an error: this Go's docs differ from those of Go 1.26.8 the
		// table was built from; any complete code is valid.
		t.Logf("htmlLitLens differs from the table built from this Go's docs: %v", lens)
	}
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStaticMemberRoundTrip: members coded with the static table inflate
// (compress/gzip) to their input; badly suited input is refused.
func TestStaticMemberRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	text := []byte(strings.Repeat("<p>Lorem ipsum dolor sit amet, <a href=\"/x\">consectetur</a> adipiscing elit.</p>\n", 200))
	for i := range 300 {
		n := r.IntN(len(text))
		parts := [][]byte{[]byte("WARC/1.1\r\nWARC-Type: response\r\n\r\n"), text[:n], nil, crlf2}
		if i%3 == 0 {
			k := r.IntN(n + 1)
			parts[1], parts[2] = text[:k], text[k:n]
		}
		out, ok := appendStaticMember([]byte("prefix"), parts...)
		if !ok {
			t.Fatalf("HTML refused (%d bytes)", n)
		}
		if string(out[:6]) != "prefix" {
			t.Fatal("prefix lost")
		}
		got := gunzip(t, out[6:])
		if want := bytes.Join(parts, nil); !bytes.Equal(got, want) {
			t.Fatalf("round trip of %d bytes differs", len(want))
		}
	}
	bin := make([]byte, 10000)
	for i := range bin {
		bin[i] = byte(r.Uint32())
	}
	if out, ok := appendStaticMember([]byte("p"), bin); ok || string(out) != "p" {
		t.Fatalf("random bytes coded (%v, %d bytes)", ok, len(out))
	}
}

// FuzzStaticMember: any input either round-trips or is refused.
func FuzzStaticMember(f *testing.F) {
	f.Add([]byte("<html>x</html>"), []byte("\r\n"))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		out, ok := appendStaticMember(nil, a, b)
		if !ok {
			return
		}
		if got := gunzip(t, out); !bytes.Equal(got, append(append([]byte(nil), a...), b...)) {
			t.Fatalf("round trip differs")
		}
	})
}

// BenchmarkStaticMember codes a 20 KB HTML page with the static table.
func BenchmarkStaticMember(b *testing.B) {
	page := bytes.Repeat([]byte(`<p class="x">Some <a href="/docs/page-12.html">linked text</a> and prose, as HTML has.</p>`+"\n"), 220)
	b.SetBytes(int64(len(page)))
	var dst []byte
	for b.Loop() {
		var ok bool
		dst, ok = appendStaticMember(dst[:0], page)
		if !ok {
			b.Fatal("static table refused HTML")
		}
	}
}
