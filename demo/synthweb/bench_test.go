package synthweb

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
)

// discardWriter is a minimal http.ResponseWriter for benchmarks.
type discardWriter struct {
	h http.Header
	n int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

func benchRequests(b *testing.B, gzip bool) (*Web, []*http.Request) {
	c := DefaultConfig()
	c.SlowHosts = 0
	w := mustNew(b, c)
	var reqs []*http.Request
	for _, s := range w.sites {
		if s.trap || s.gzip != gzip {
			continue
		}
		paths := make([]string, 0, len(s.paths))
		for p := range s.paths {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			r := httptest.NewRequest("GET", "http://"+s.name+p, nil)
			r.Header.Set("User-Agent", testUA)
			if gzip {
				r.Header.Set("Accept-Encoding", "gzip")
			}
			reqs = append(reqs, r)
		}
		if len(reqs) > 5000 {
			break
		}
	}
	return w, reqs
}

// BenchmarkServeHTTP measures one request (render + record) without the
// network; -benchmem shows the allocations.
func BenchmarkServeHTTP(b *testing.B) {
	for _, gz := range []bool{false, true} {
		name := "plain"
		if gz {
			name = "gzip"
		}
		b.Run(name, func(b *testing.B) {
			w, reqs := benchRequests(b, gz)
			dw := &discardWriter{h: make(http.Header)}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				clear(dw.h)
				w.ServeHTTP(dw, reqs[i%len(reqs)])
			}
			b.SetBytes(int64(dw.n / b.N))
		})
	}
	b.Run("parallel", func(b *testing.B) {
		w, reqs := benchRequests(b, false)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			dw := &discardWriter{h: make(http.Header)}
			i := 0
			for pb.Next() {
				clear(dw.h)
				w.ServeHTTP(dw, reqs[i%len(reqs)])
				i++
			}
		})
	})
}

// BenchmarkNew measures generating the default web.
func BenchmarkNew(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := New(DefaultConfig()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExpected measures the oracle on the default web.
func BenchmarkExpected(b *testing.B) {
	w := mustNew(b, DefaultConfig())
	sc := defaultScope(w, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.Expected(sc)
	}
}
