package fetch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer answers every request read on a connection with the next
// answer of its connection's script (answers[i] for the i-th connection, the
// last script reused), raw bytes as given; an answer "CLOSE" closes the
// connection instead. It counts connections and requests.
type rawServer struct {
	ln       net.Listener
	conns    atomic.Int32
	requests atomic.Int32
	wg       sync.WaitGroup
	mu       sync.Mutex
	open     []net.Conn
}

func newRawServer(t *testing.T, scripts ...[]string) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(s.conns.Add(1)) - 1
			script := scripts[min(n, len(scripts)-1)]
			s.mu.Lock()
			s.open = append(s.open, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for _, answer := range script {
					// read one request head
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						if line == "\r\n" {
							break
						}
					}
					s.requests.Add(1)
					if answer == "CLOSE" {
						return
					}
					if _, err := io.WriteString(c, answer); err != nil {
						return
					}
				}
				io.Copy(io.Discard, br) // hold the connection until the client closes it
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) url(path string) string { return "http://" + s.ln.Addr().String() + path }

// TestFetchFraming: Content-Length, chunked (with trailers), close-delimited
// (HTTP/1.0) bodies and 1xx responses are read right, and the connection
// is kept exactly when the response allows it.
func TestFetchFraming(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		body   string
		status int
		reuse  bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello", 200, true},
		{"empty", "HTTP/1.1 204 No Content\r\n\r\n", "", 204, true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\nX-Trailer: t\r\n\r\n", "abcdefg", 200, true},
		{"1xx first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", 200, true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "ok", 200, false},
		{"redirect", "HTTP/1.1 301 Moved\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n", "", 301, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRawServer(t, []string{tt.answer, tt.answer, tt.answer})
			c := newTestClient(t, testClientConfig())
			for i := 0; i < 3; i++ {
				r, err := c.Fetch(clientTestCtx(t), srv.url(fmt.Sprintf("/p%d", i)))
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != tt.status || string(r.Body) != tt.body || string(r.RawBody) != tt.body {
					t.Fatalf("status %d body %q, want %d %q", r.Status, r.Body, tt.status, tt.body)
				}
				if want := fmt.Sprintf("GET /p%d HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\nAccept-Encoding: gzip, deflate\r\n\r\n", i, srv.ln.Addr(), testClientConfig().UserAgent); string(r.RequestDump) != want {
					t.Fatalf("request dump %q", r.RequestDump)
				}
				if r.IP != "127.0.0.1" {
					t.Fatalf("IP %q", r.IP)
				}
			}
			if n, want := srv.conns.Load(), map[bool]int32{true: 1, false: 3}[tt.reuse]; n != want {
				t.Fatalf("%d connections, want %d", n, want)
			}
		})
	}
	// HTTP/1.0 without a length: the body runs to the close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end")
		c.Close()
	}()
	r, err := newTestClient(t, testClientConfig()).Fetch(clientTestCtx(t), "http://"+ln.Addr().String()+"/")
	if err != nil || string(r.Body) != "to the end" || r.Proto != "HTTP/1.0" {
		t.Fatalf("close-delimited: %v %+v", err, r)
	}
}

// TestFetchMalformed: malformed responses are errors, never panics, and
// their connections are not reused.
func TestFetchMalformed(t *testing.T) {
	for _, answer := range []string{
		"garbage\r\n\r\n",
		"HTTP/1.1 abc OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\n", // headers cut by the close
	} {
		srv := newRawServer(t, []string{answer, "CLOSE"})
		cfg := testClientConfig()
		cfg.HeaderTimeout, cfg.BodyTimeout = 300*time.Millisecond, 300*time.Millisecond // cut bodies and headers wait for these
		c := newTestClient(t, cfg)
		if r, err := c.Fetch(clientTestCtx(t), srv.url("/")); err == nil {
			t.Fatalf("%q: no error, got %+v", answer, r)
		} else if !strings.HasPrefix(err.Error(), "fetch: ") {
			t.Fatalf("%q: error without context: %v", answer, err)
		}
	}
}

// TestFetchRetriesClosedIdleConn: a GET on a kept connection the server has
// closed meanwhile is sent again on a new connection; a second failure is
// an error.
func TestFetchRetriesClosedIdleConn(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	srv := newRawServer(t, []string{ok, "CLOSE"}, []string{ok})
	c := newTestClient(t, testClientConfig())
	for i := 0; i < 2; i++ {
		if r, err := c.Fetch(clientTestCtx(t), srv.url("/")); err != nil || string(r.Body) != "ok" {
			t.Fatalf("fetch %d: %v", i, err)
		}
	}
	if n := srv.conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	// A new connection that fails is not retried.
	srv2 := newRawServer(t, []string{"CLOSE"})
	if _, err := newTestClient(t, testClientConfig()).Fetch(clientTestCtx(t), srv2.url("/")); err == nil || ErrorKind(err) != "conn_reset" {
		t.Fatalf("err %v (kind %q), want conn_reset", err, ErrorKind(err))
	}
	if n := srv2.requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// TestFetchUnsolicitedData: bytes after a complete response are not taken
// for the next response: the connection is dropped.
func TestFetchUnsolicitedData(t *testing.T) {
	srv := newRawServer(t, []string{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"}, []string{"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood"})
	c := newTestClient(t, testClientConfig())
	if r, err := c.Fetch(clientTestCtx(t), srv.url("/")); err != nil || string(r.Body) != "a" {
		t.Fatalf("%v %+v", err, r)
	}
	if r, err := c.Fetch(clientTestCtx(t), srv.url("/")); err != nil || string(r.Body) != "good" {
		t.Fatalf("second: %v %q", err, r.Body)
	}
}

// TestFetchHeaderLimit: endless response headers end in an error, not in
// unbounded memory.
func TestFetchHeaderLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Junk: " + strings.Repeat("j", 1000) + "\r\n"
		for i := 0; i < 20000; i++ {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	}()
	_, err = newTestClient(t, testClientConfig()).Fetch(clientTestCtx(t), "http://"+ln.Addr().String()+"/")
	if !errors.Is(err, errHeaderTooLarge) {
		t.Fatalf("err %v, want errHeaderTooLarge", err)
	}
}

// TestFetchCanceled: canceling the context interrupts a fetch waiting for
// headers and one reading a body.
func TestFetchCanceled(t *testing.T) {
	body := newRawServer(t, []string{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"})
	silent := newRawServer(t, []string{"HTTP/1.1 200 OK\r\n"}) // headers never finished
	for _, u := range []string{body.url("/"), silent.url("/")} {
		ctx, cancel := contextWithTimeout(150 * time.Millisecond)
		start := time.Now()
		_, err := newTestClient(t, testClientConfig()).Fetch(ctx, u)
		cancel()
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || ErrorKind(err) != "timeout" || time.Since(start) > time.Second {
			t.Fatalf("err %v (kind %q) after %s", err, ErrorKind(err), time.Since(start))
		}
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// TestIdlePoolCap: at most MaxIdleConns idle connections over all hosts,
// the least recently used closed first; Close closes them all.
func TestIdlePoolCap(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	cfg := testClientConfig()
	cfg.MaxIdleConns = 2
	c := newTestClient(t, cfg)
	var srvs []*rawServer
	for i := 0; i < 3; i++ {
		srvs = append(srvs, newRawServer(t, []string{ok, ok}))
		if _, err := c.Fetch(clientTestCtx(t), srvs[i].url("/")); err != nil {
			t.Fatal(err)
		}
	}
	c.pool.mu.Lock()
	idle, hosts := c.pool.lru.Len(), len(c.pool.hosts)
	c.pool.mu.Unlock()
	if idle != 2 || hosts != 2 {
		t.Fatalf("%d idle connections over %d hosts, want 2 and 2", idle, hosts)
	}
	// The first host's connection was the one closed: a new fetch dials again.
	if _, err := c.Fetch(clientTestCtx(t), srvs[0].url("/")); err != nil {
		t.Fatal(err)
	}
	if n := srvs[0].conns.Load(); n != 2 {
		t.Fatalf("first host: %d connections, want 2", n)
	}
	c.Close()
	c.pool.mu.Lock()
	idle, hosts = c.pool.lru.Len(), len(c.pool.hosts)
	c.pool.mu.Unlock()
	if idle != 0 || hosts != 0 {
		t.Fatalf("after Close: %d idle, %d hosts", idle, hosts)
	}
}

// FuzzFetchResponse: whatever bytes a server answers, Fetch returns a
// response or an error (with context), never panics, and a kept connection
// serves a well-formed next response.
func FuzzFetchResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 302 Found\r\nLocation: //x/\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody",
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\n\x1f\x8b\x08",
		"garbage",
	} {
		f.Add(s)
	}
	cfg := testClientConfig()
	cfg.HeaderTimeout, cfg.BodyTimeout, cfg.MaxBodySize = 200*time.Millisecond, 200*time.Millisecond, 64
	f.Fuzz(func(t *testing.T, answer string) {
		if strings.Contains(answer, "CLOSE") {
			return
		}
		good := "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood"
		srv := newRawServer(t, []string{answer, good}, []string{good})
		c, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Fetch(context.Background(), srv.url("/")); err != nil && !strings.HasPrefix(err.Error(), "fetch: ") {
			t.Fatalf("error without context: %v", err)
		}
		if r, err := c.Fetch(context.Background(), srv.url("/")); err == nil && r.Status == 200 && string(r.Body) != "good" {
			t.Fatalf("second response read from leftovers: %q", r.Body)
		}
	})
}
