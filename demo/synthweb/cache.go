package synthweb

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"sync/atomic"
)

// A page's bytes depend only on the web and the page (render is a pure
// function of them), so they can be rendered once and served many times.
// Prerender fills a bounded cache of every page's response before a crawl;
// ServeHTTP then copies the cached bytes instead of rendering (and, for a
// gzip host, compressing) them again. The bytes served are exactly those
// rendered on demand (TestPrerenderSameBytes), and every request is still
// recorded as before: the cache only takes the harness's own CPU out of a
// crawler benchmark (a real web server runs on other machines).

// rendered is one page's cached response: its status and headers, the
// body, and for a gzip host the body gzipped as ServeHTTP does it.
type rendered struct {
	resp response
	body []byte
	gz   []byte // nil unless the page's host serves gzip
}

// DefaultPrerenderBytes is a bound for Prerender that holds every page of a
// web four times the default (about 2.6 KiB a page: bodies plus the gzipped
// copies of the gzip hosts' pages).
const DefaultPrerenderBytes = 1 << 30

// Prerender renders every page of the web (trap calendar pages and
// robots.txt excepted: they are cheap or unbounded) into the page cache, in
// page order, until the cached bytes would exceed maxBytes; ServeHTTP
// serves cached pages without rendering them again. It returns how many
// pages and bytes are cached. Calling it again keeps what is cached and
// may add pages; it is safe while the web is serving.
func (w *Web) Prerender(maxBytes int64) (pages int, size int64, err error) {
	if len(w.cache) != len(w.pages) {
		return 0, 0, fmt.Errorf("synthweb: prerender: cache of %d pages for %d pages", len(w.cache), len(w.pages))
	}
	var zw *gzip.Writer
	for id := range w.pages {
		if c := w.cache[id].Load(); c != nil {
			pages++
			size += int64(len(c.body) + len(c.gz))
			continue
		}
		p := &w.pages[id]
		s := w.sites[p.site]
		if s.trap {
			continue
		}
		var b bytes.Buffer
		resp := w.render(&b, s, int32(id))
		c := &rendered{resp: resp, body: b.Bytes()}
		if s.gzip {
			var z bytes.Buffer
			if zw == nil {
				zw, err = gzip.NewWriterLevel(&z, gzip.BestSpeed)
				if err != nil {
					return pages, size, fmt.Errorf("synthweb: prerender: %w", err)
				}
			} else {
				zw.Reset(&z)
			}
			if _, err := zw.Write(c.body); err != nil {
				return pages, size, fmt.Errorf("synthweb: prerender: gzip %s: %w", p.path, err)
			}
			if err := zw.Close(); err != nil {
				return pages, size, fmt.Errorf("synthweb: prerender: gzip %s: %w", p.path, err)
			}
			c.gz = z.Bytes()
		}
		n := int64(len(c.body) + len(c.gz))
		if size+n > maxBytes {
			break
		}
		w.cache[id].Store(c)
		pages++
		size += n
	}
	return pages, size, nil
}

// cachedPage returns page id's cached response, nil when not cached.
func (w *Web) cachedPage(id int32) *rendered {
	if id < 0 || int(id) >= len(w.cache) {
		return nil
	}
	return w.cache[id].Load()
}

// pageCache is the per-page cache, one slot per page of the web.
type pageCache = []atomic.Pointer[rendered]
