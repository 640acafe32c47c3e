package synthweb

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// TestPrerenderSameBytes: a prerendered web answers every request (every
// page of every host, robots.txt, an unknown path, trap pages; GET and
// HEAD, with and without gzip) with exactly the status, headers and bytes of
// a web that renders on demand, and records the same statistics.
func TestPrerenderSameBytes(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.Pages = 60, 2000
	c.SlowHosts = 0 // the sleep is not cached; leaving it out keeps the test quick
	plain, cached := mustNew(t, c), mustNew(t, c)
	n, size, err := cached.Prerender(DefaultPrerenderBytes)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || size == 0 {
		t.Fatalf("Prerender cached %d pages, %d bytes", n, size)
	}
	var uris []string
	for i := range plain.pages {
		p := &plain.pages[i]
		uris = append(uris, "http://"+plain.sites[p.site].name+p.path)
	}
	for _, s := range plain.sites {
		uris = append(uris, "http://"+s.name+"/robots.txt", "http://"+s.name+"/no/such/page")
	}
	gz := 0
	for _, u := range uris {
		for _, tc := range []struct {
			method, enc string
		}{{http.MethodGet, ""}, {http.MethodGet, "gzip"}, {http.MethodHead, "gzip, deflate"}} {
			a, b := serveOnce(plain, tc.method, u, tc.enc), serveOnce(cached, tc.method, u, tc.enc)
			if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || !bytes.Equal(a.Body.Bytes(), b.Body.Bytes()) {
				t.Fatalf("%s %s (Accept-Encoding %q): on demand %d %v %d bytes, prerendered %d %v %d bytes",
					tc.method, u, tc.enc, a.Code, a.Header(), a.Body.Len(), b.Code, b.Header(), b.Body.Len())
			}
			if a.Header().Get("Content-Encoding") == "gzip" {
				gz++
			}
		}
	}
	if gz == 0 {
		t.Error("no gzip response compared")
	}
	ra, rb := plain.Report(), cached.Report()
	if !reflect.DeepEqual(ra.URLs, rb.URLs) || ra.Requests != rb.Requests || !reflect.DeepEqual(ra.Unknown, rb.Unknown) || len(ra.Hosts) != len(rb.Hosts) {
		t.Errorf("reports differ: on demand %d requests, %d URLs; prerendered %d requests, %d URLs", ra.Requests, len(ra.URLs), rb.Requests, len(rb.URLs))
	}
}

// TestPrerenderBound: Prerender stops at its byte bound, and the pages it
// left out are still served (rendered on demand).
func TestPrerenderBound(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.Pages = 20, 300
	for _, tc := range []struct {
		name    string
		max     int64
		wantAll bool
	}{
		{"nothing", 0, false},
		{"some", 20 << 10, false},
		{"all", DefaultPrerenderBytes, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := mustNew(t, c)
			n, size, err := w.Prerender(tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if size > tc.max {
				t.Errorf("cached %d bytes, bound %d", size, tc.max)
			}
			nonTrap := 0
			for i := range w.pages {
				if !w.sites[w.pages[i].site].trap {
					nonTrap++
				}
			}
			if tc.wantAll != (n == nonTrap) {
				t.Errorf("cached %d of %d pages", n, nonTrap)
			}
			p := &w.pages[len(w.pages)/2]
			if rec := serveOnce(w, http.MethodGet, "http://"+w.sites[p.site].name+p.path, ""); rec.Body.Len() == 0 {
				t.Errorf("%s: empty body", p.path)
			}
		})
	}
}

func serveOnce(w *Web, method, u, enc string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, u, nil)
	req.Header.Set("User-Agent", testUA)
	if enc != "" {
		req.Header.Set("Accept-Encoding", enc)
	}
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, req)
	return rec
}
