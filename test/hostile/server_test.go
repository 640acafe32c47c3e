package hostile

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// domain is the parent of every case host.
const domain = "hostile.test"

// recorder counts the requests each host got, by request URI (bounded per host).
type recorder struct {
	mu    sync.Mutex
	hits  map[string]map[string]int // host -> request URI -> count
	auths []string                  // Authorization headers seen (all hosts)
}

const maxRecordedPaths = 20000

func newRecorder() *recorder { return &recorder{hits: map[string]map[string]int{}} }

func (rc *recorder) record(host, uri, auth string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := rc.hits[host]
	if m == nil {
		m = map[string]int{}
		rc.hits[host] = m
	}
	if len(m) < maxRecordedPaths {
		m[uri]++
	}
	if auth != "" && len(rc.auths) < 100 {
		rc.auths = append(rc.auths, auth)
	}
}

// count returns how often host served uri.
func (rc *recorder) count(host, uri string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.hits[host][uri]
}

// pages returns how many requests host served, robots.txt and its redirects left out.
func (rc *recorder) pages(host string) (n int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for uri, c := range rc.hits[host] {
		if !strings.HasPrefix(uri, "/robots") {
			n += c
		}
	}
	return n
}

// hostLabel returns the first label of a Host header under domain ("drip" of
// "drip.hostile.test:8080"), "" for another domain.
func hostLabel(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	label, ok := strings.CutSuffix(h, "."+domain)
	if !ok {
		return ""
	}
	return label
}

// web serves every HTTP case host of the hostile web from one handler.
type web struct {
	rec      *recorder
	handlers map[string]http.HandlerFunc // host label -> handler
	prefix   map[string]http.HandlerFunc // host label prefix ("hop-") -> handler
}

func (w *web) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	label := hostLabel(r.Host)
	w.rec.record(label, r.RequestURI, r.Header.Get("Authorization"))
	h := w.handlers[label]
	if h == nil {
		for p, ph := range w.prefix {
			if strings.HasPrefix(label, p) {
				h = ph
				break
			}
		}
	}
	if h == nil {
		http.Error(rw, "no such case host", http.StatusNotFound)
		return
	}
	h(rw, r)
}

// html writes a 200 text/html page.
func html(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/html")
	_, _ = w.Write([]byte(body))
}

// links renders a page linking to every href.
func links(hrefs ...string) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><body>")
	for _, h := range hrefs {
		fmt.Fprintf(&b, "<a href=\"%s\">x</a>\n", h)
	}
	b.WriteString("</body></html>")
	return b.String()
}

// robotsOr serves robots for /robots.txt (404 when empty) and page for the rest.
func robotsOr(robots string, page http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			if robots == "" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(robots))
			return
		}
		page(w, r)
	}
}

// endless streams HTML forever (chunked), until the client goes away.
func endless(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	chunk := bytes.Repeat([]byte("<p>all work and no play makes a crawler a dull crawler</p>\n"), 1000)
	for r.Context().Err() == nil {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// drip sends a few bytes every interval, far below fetch.min_rate.
func drip(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(200)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for i := 0; i < 2000; i++ {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		if _, err := w.Write([]byte("<p>drip</p>")); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}

// gzipBomb returns a gzip stream that inflates to decoded bytes of zeros (a multiple of 1 MiB)
// from about a thousandth of that: one flushed deflate run of 1 MiB of zeros repeated (its
// back-references only reach zeros), then an empty final block and the real trailer.
func gzipBomb(decoded int) []byte {
	zeros := make([]byte, 1<<20)
	var run bytes.Buffer
	fw, _ := flate.NewWriter(&run, flate.BestCompression)
	_, _ = fw.Write(zeros)
	_ = fw.Flush()
	var out bytes.Buffer
	out.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	crc := uint32(0)
	for i := 0; i < decoded>>20; i++ {
		out.Write(run.Bytes())
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	out.Write([]byte{0x03, 0x00}) // empty final block (fixed Huffman, end-of-block)
	var tail [8]byte
	binary.LittleEndian.PutUint32(tail[:4], crc)
	binary.LittleEndian.PutUint32(tail[4:], uint32(decoded))
	out.Write(tail[:])
	return out.Bytes()
}

// silentListener accepts connections and never answers; Close ends it and its connections.
type silentListener struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

func newSilent(t *testing.T) *silentListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	t.Cleanup(s.Close)
	return s
}

func (s *silentListener) Addr() string { return s.ln.Addr().String() }

func (s *silentListener) Close() {
	_ = s.ln.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// garbage returns n seeded bytes without ':' or newlines (so they form no robots record).
func garbage(n int) string {
	r := rand.New(rand.NewSource(9309))
	b := make([]byte, n)
	for i := range b {
		c := byte(r.Intn(256))
		if c == ':' || c == '\n' || c == '\r' {
			c = '~'
		}
		b[i] = c
	}
	return string(b)
}
