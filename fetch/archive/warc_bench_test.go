package archive

import (
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
)

// benchCapture is one synthetic-web response as the node archives it.
type benchCapture struct{ x Capture }

var (
	benchOnce sync.Once
	benchXs   []benchCapture
)

// synthCaptures returns ~2,000 responses of the default synthetic web
// (2-8 KB pages; gzip hosts send gzip bodies, archived as stored members
// like the node does), in breadth-first order from its seeds.
func synthCaptures(tb testing.TB) []benchCapture {
	benchOnce.Do(func() {
		rs, err := synthweb.SampleDefault(2000, true)
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range rs {
			u, _ := url.Parse(r.URL)
			dump := []byte("GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: phasecrawl-bench/1.0 (+http://example.test/bot)\r\nAccept-Encoding: gzip\r\n\r\n")
			benchXs = append(benchXs, benchCapture{Capture{
				Target: r.URL, IP: "127.0.0.1", Request: dump,
				Response: HTTPResponseHead("HTTP/1.1", r.Code, r.Header, len(r.Body)), Body: r.Body,
				Stored: r.Header.Get("Content-Encoding") != "",
			}})
		}
	})
	return benchXs
}

// BenchmarkWARCWrite writes the synthetic-web exchanges (request and
// response records) through a WARCWriter into a file; ns/op is per
// exchange, B/exch the file bytes per exchange.
func BenchmarkWARCWrite(b *testing.B) {
	xs := synthCaptures(b)
	for _, bc := range []struct {
		name      string
		level     int
		storeReq  bool
		storeResp bool
	}{
		{"level1-storereq", 1, true, false}, // the node's default
		{"level1-all", 1, false, false},
		{"huffman-storereq", -2, true, false},
		{"level2-storereq", 2, true, false},
		{"level3-storereq", 3, true, false},
		{"level5-storereq", 5, true, false},
		{"stored", 1, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := b.TempDir()
			c := DefaultWARCConfig(dir)
			c.MaxSize = 64 << 30
			c.CompressionLevel = bc.level
			c.StoreRequests = bc.storeReq
			w, err := NewWARCWriter(c)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			for i := 0; b.Loop(); i++ {
				x := xs[i%len(xs)].x
				x.Stored = x.Stored || bc.storeResp
				if err := w.Write(x); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			size := int64(0)
			files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
			for _, f := range files {
				if st, err := os.Stat(f); err == nil {
					size += st.Size()
				}
			}
			b.ReportMetric(float64(size)/float64(n), "B/exch")
		})
	}
}

// BenchmarkWARCFlush writes the synthetic-web exchanges from 64 goroutines
// per core (like the node's workers) with each exchange written to the file
// at once (FlushDelay 0) and with the default group write (FlushDelay
// 2ms); ns/op is the wall time per exchange, CPU included.
func BenchmarkWARCFlush(b *testing.B) {
	xs := synthCaptures(b)
	for _, bc := range []struct {
		name  string
		delay time.Duration
	}{
		{"each", 0},
		{"2ms", 2 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := DefaultWARCConfig(b.TempDir())
			c.MaxSize, c.FlushDelay = 64<<30, bc.delay
			w, err := NewWARCWriter(c)
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.SetParallelism(64)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := w.Write(xs[int(next.Add(1))%len(xs)].x); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
