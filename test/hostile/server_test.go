package hostile

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
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

// rawServer speaks HTTP/1.1 by hand, for the misbehaviours net/http will not commit: each
// case host (a label under domain) answers its robots.txt with 404, its root with links to
// /bad and to normalPages plain pages, the plain pages with a small page, and /bad with the
// case's misbehaviour, after which the connection is closed. The other answers keep the
// connection alive, as a real server would.
type rawServer struct {
	rec   *recorder
	ln    net.Listener
	cases map[string]func(c net.Conn) // host label -> what /bad gets
	robot map[string]func(c net.Conn) // host label -> what /robots.txt gets (404 when absent)
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

// normalPages is how many plain pages each raw case host links besides /bad.
const normalPages = 4

func newRawServer(t *testing.T, rec *recorder) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{rec: rec, ln: ln, cases: map[string]func(net.Conn){}, robot: map[string]func(net.Conn){}, conns: map[net.Conn]bool{}}
	t.Cleanup(s.Close)
	return s
}

// Start serves until Close (the case maps must be complete).
func (s *rawServer) Start() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		}
	}()
}

func (s *rawServer) Addr() string { return s.ln.Addr().String() }

// Close stops the listener and every connection, and waits for their goroutines.
func (s *rawServer) Close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *rawServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		label := hostLabel(req.Host)
		s.rec.record(label, req.RequestURI, req.Header.Get("Authorization"))
		bad, robots := s.cases[label], s.robot[label]
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		switch {
		case bad == nil:
			rawPage(c, 404, "no such case host")
		case req.URL.Path == "/robots.txt" && robots != nil:
			robots(c)
			return
		case req.URL.Path == "/robots.txt":
			rawPage(c, 404, "")
		case req.URL.Path == "/":
			hrefs := []string{"/bad"}
			for i := 1; i <= normalPages; i++ {
				hrefs = append(hrefs, fmt.Sprintf("/n%d", i))
			}
			rawPage(c, 200, links(hrefs...))
		case req.URL.Path == "/bad":
			bad(c)
			return
		default:
			rawPage(c, 200, "<html><body>a plain page</body></html>")
		}
	}
}

// rawPage writes a complete keep-alive response.
func rawPage(c net.Conn, status int, body string) {
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(body), body)
}

// writeSlowly writes s a byte every gap, until the peer goes or s ends.
func writeSlowly(c net.Conn, s string, gap time.Duration) {
	for i := 0; i < len(s); i++ {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
		time.Sleep(gap) // the drip: a peer that sends a byte now and then
	}
}

// Raw misbehaviours, each a /bad answer.
var (
	// A Content-Length larger than the body, then the connection closes.
	shortBody = func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n<html>only this")
	}
	// Chunked framing with a chunk size that is no hex number.
	badChunks = func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz9\r\nnot a chunk\r\n0\r\n\r\n")
	}
	// Headers and part of the body, then a TCP reset.
	resetAfterHeaders = func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n<html>partial")
		time.Sleep(50 * time.Millisecond) // the reset comes a moment after the part, as from a peer that died mid-body
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST
		}
	}
	// 12 MiB of header lines, past the client's 10 MiB bound.
	hugeHeaders = func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n")
		line := "X-Filler: " + strings.Repeat("h", 1000) + "\r\n"
		block := strings.Repeat(line, 1024)
		for i := 0; i < 12; i++ {
			if _, err := io.WriteString(c, block); err != nil {
				return
			}
		}
		_, _ = io.WriteString(c, "Content-Length: 2\r\n\r\nok")
	}
	// An HTTP/0.9 answer: the body alone, no status line, no headers.
	http09 = func(c net.Conn) {
		_, _ = io.WriteString(c, "<html><body>HTTP/0.9 was simpler <a href=\"/from09\">x</a></body></html>\n")
	}
	// 100 Continue, again and again, never a final response.
	endlessContinue = func(c net.Conn) {
		for i := 0; i < 1000; i++ {
			if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond) // the pace of a peer that stalls with 100s
		}
	}
	// The status line and headers a byte every 100ms: past the header timeout.
	slowHeaders = func(c net.Conn) {
		writeSlowly(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: "+strings.Repeat("s", 200)+"\r\nContent-Length: 2\r\n\r\nok", 100*time.Millisecond)
	}
	// A body that drips far below fetch.min_rate.
	dripBody = func(c net.Conn) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
		writeSlowly(c, strings.Repeat("<p>drip</p>", 200), 50*time.Millisecond)
	}
)
