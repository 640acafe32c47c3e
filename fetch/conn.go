package fetch

import (
	"bufio"
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The client's HTTP/1.1 exchanges. net/http's Transport runs two goroutines
// per connection (read and write loops) and hands every request and
// response between them and the caller over channels; for a crawler that
// sends one GET at a time per host and reads every body whole, that was
// about a tenth of the process's CPU. Client.Fetch therefore writes the
// request on the connection itself and parses the response with
// net/http's own ReadResponse (status line, headers, Content-Length,
// chunked and close-delimited framing are net/http's), over a small pool
// that keeps the Transport's rules: at most one connection per host, used
// by one request at a time; idle connections kept per host for
// IdleConnTimeout, MaxIdleConns over all hosts (least recently used closed
// first); a GET that fails on a reused connection before any byte of the
// response arrived is retried once on a new connection (the server closed
// the idle connection meanwhile).

// idleConnTimeout closes a connection idle for this long (the Transport's IdleConnTimeout).
const idleConnTimeout = 90 * time.Second

// maxResponseHeaderBytes bounds the status line and headers of a response
// (the Transport's default MaxResponseHeaderBytes).
const maxResponseHeaderBytes = 10 << 20

// errHeaderTooLarge is returned (wrapped) for a response header over maxResponseHeaderBytes.
var errHeaderTooLarge = errors.New("fetch: response headers exceed 10 MiB")

// aLongTimeAgo is a deadline in the past: it interrupts every pending I/O on a connection.
var aLongTimeAgo = time.Unix(1, 0)

// pconn is one connection to a host.
type pconn struct {
	conn  net.Conn
	cr    countingReader
	br    *bufio.Reader
	slot  *hostSlot
	elem  *list.Element // in the pool's LRU while idle
	timer *time.Timer   // closes it after idleConnTimeout idle
	ip    string
	// dialed is how long opening the connection took (the name's lookup,
	// connect, TLS handshake), until its first request has been answered;
	// 0 after.
	dialed time.Duration
	// forward: the connection goes to a forward proxy, which takes
	// requests in absolute form with proxyAuth (proxy.go).
	forward   bool
	proxyAuth string
}

// countingReader counts the bytes read from the connection and, while
// limit > 0, fails once more than limit bytes were read (header bound).
type countingReader struct {
	r     net.Conn
	n     int64
	limit int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.limit > 0 {
		if c.n >= c.limit {
			return 0, errHeaderTooLarge
		}
		if rest := c.limit - c.n; int64(len(p)) > rest {
			p = p[:rest]
		}
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// hostSlot is one host's (scheme://host:port) single connection: sem is
// held by the request using it, idle is the connection waiting for the next.
type hostSlot struct {
	key   string
	sem   chan struct{}
	idle  *pconn
	users int // callers holding or waiting for sem (the slot is dropped at 0 without an idle connection)
}

// connPool keeps the idle connections.
type connPool struct {
	mu      sync.Mutex
	hosts   map[string]*hostSlot
	lru     list.List // idle *pconn, most recently used first
	maxIdle int       // 0 = unlimited
}

func newConnPool(maxIdle int) *connPool {
	return &connPool{hosts: make(map[string]*hostSlot), maxIdle: maxIdle}
}

// acquire waits for host key's single connection slot.
func (p *connPool) acquire(ctx context.Context, key string) (*hostSlot, error) {
	p.mu.Lock()
	s := p.hosts[key]
	if s == nil {
		s = &hostSlot{key: key, sem: make(chan struct{}, 1)}
		p.hosts[key] = s
	}
	s.users++
	p.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
		return s, nil
	case <-ctx.Done():
		p.leave(s)
		return nil, ctx.Err()
	}
}

// release gives the slot back (after acquire succeeded).
func (p *connPool) release(s *hostSlot) {
	<-s.sem
	p.leave(s)
}

func (p *connPool) leave(s *hostSlot) {
	p.mu.Lock()
	s.users--
	if s.users == 0 && s.idle == nil {
		delete(p.hosts, s.key)
	}
	p.mu.Unlock()
}

// take returns the slot's idle connection, or nil.
func (p *connPool) take(s *hostSlot) *pconn {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := s.idle
	if pc == nil {
		return nil
	}
	s.idle = nil
	p.lru.Remove(pc.elem)
	pc.elem = nil
	pc.timer.Stop()
	return pc
}

// put keeps pc as its slot's idle connection, closing the least recently
// used idle connection when there are more than maxIdle.
func (p *connPool) put(pc *pconn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := pc.slot
	if s.idle != nil { // cannot happen: the slot holder is the only user
		pc.conn.Close()
		return
	}
	s.idle = pc
	pc.elem = p.lru.PushFront(pc)
	if pc.timer == nil {
		pc.timer = time.AfterFunc(idleConnTimeout, func() { p.expire(pc) })
	} else {
		pc.timer.Reset(idleConnTimeout)
	}
	if p.maxIdle > 0 && p.lru.Len() > p.maxIdle {
		p.dropLocked(p.lru.Back().Value.(*pconn))
	}
}

// expire closes pc if it is still idle.
func (p *connPool) expire(pc *pconn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.slot.idle == pc {
		p.dropLocked(pc)
	}
}

func (p *connPool) dropLocked(pc *pconn) {
	s := pc.slot
	s.idle = nil
	p.lru.Remove(pc.elem)
	pc.elem = nil
	pc.timer.Stop()
	pc.conn.Close()
	if s.users == 0 {
		delete(p.hosts, s.key)
	}
}

// closeIdle closes every idle connection.
func (p *connPool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.lru.Len() > 0 {
		p.dropLocked(p.lru.Back().Value.(*pconn))
	}
}

// connect opens a connection to u's host (resolve rules, private-address
// guard, connect timeout; TLS for https within the connect timeout).
func (c *Client) connect(ctx context.Context, u *url.URL, addr string, s *hostSlot) (*pconn, error) {
	start := time.Now()
	connectTimeout, _ := c.timeouts(ctx)
	dctx := ctx
	if connectTimeout < c.cfg.ConnectTimeout {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, connectTimeout)
		defer cancel()
	}
	var (
		raw     net.Conn
		ip      string
		forward bool
		auth    string
	)
	proxy, err := c.proxyFor(u, u.Hostname(), portOf(addr))
	if err == nil && proxy != nil {
		raw, ip, forward, err = c.connectProxy(dctx, proxy, u, addr)
		auth = proxyAuth(proxy)
	} else if err == nil {
		raw, err = c.dialContext(dctx, "tcp", addr)
	}
	if err != nil {
		if dctx != ctx && dctx.Err() != nil && ctx.Err() == nil {
			// The request's own shorter connect timeout ran out (in the
			// name's lookup, the dial or a proxy's): a timeout, whatever
			// the step it cut says (a resolver reports a failed lookup).
			err = fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
		}
		return nil, fmt.Errorf("fetch: GET %s: dial %s: %w", u.Redacted(), addr, connectError{err})
	}
	conn := raw
	if u.Scheme == "https" {
		cfg := c.tlsConf.Clone()
		cfg.ServerName = u.Hostname()
		tc := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, connectTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("fetch: GET %s: TLS handshake: %w", u.Redacted(), connectError{err})
		}
		conn = tc
	}
	pc := &pconn{conn: conn, slot: s, forward: forward, proxyAuth: auth, dialed: time.Since(start)}
	pc.cr.r = conn
	pc.br = bufio.NewReaderSize(&pc.cr, 4096)
	pc.ip = conn.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(pc.ip); err == nil {
		pc.ip = h
	}
	if proxy != nil {
		pc.ip = ip // the target's, when known (a CONNECT tunnel): not the proxy's
	}
	return pc, nil
}

// exchange sends the GET (dump, the request as written) on a connection of
// slot s and reads the response's headers; a connection reused from the
// pool that fails before any response byte is replaced once. The returned
// connection is the one resp.Body reads from.
func (c *Client) exchange(ctx context.Context, s *hostSlot, req *http.Request, dump []byte, addr string) (*pconn, *http.Response, error) {
	for attempt := 0; ; attempt++ {
		pc := c.pool.take(s)
		reused := pc != nil
		if reused {
			pc.dialed = 0
		}
		if pc == nil {
			var err error
			if pc, err = c.connect(ctx, req.URL, addr, s); err != nil {
				return nil, nil, err
			}
		}
		stop := context.AfterFunc(ctx, func() { pc.conn.SetDeadline(aLongTimeAgo) })
		_, headerTimeout := c.timeouts(ctx)
		resp, err := c.roundTrip(pc, req, dump, headerTimeout)
		if !stop() && err == nil {
			err = ctx.Err() // canceled just as the headers arrived
		}
		if err == nil {
			return pc, resp, nil
		}
		pc.conn.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, nil, fmt.Errorf("fetch: GET %s: %w", req.URL.Redacted(), cerr)
		}
		if reused && attempt == 0 && pc.cr.n == 0 && closedByPeer(err) {
			continue // the server closed the idle connection: try a new one
		}
		return nil, nil, fmt.Errorf("fetch: GET %s: %w", req.URL.Redacted(), err)
	}
}

// connectError marks an error met while opening a connection (the name's
// lookup, the dial, the TLS handshake), before any byte of a request was
// sent: InConnect.
type connectError struct{ err error }

func (e connectError) Error() string { return e.err.Error() }
func (e connectError) Unwrap() error { return e.err }

// InConnect reports whether a Fetch error was met while opening the
// connection (resolving, dialling, the TLS handshake): the host was not
// reached, and no request was sent. A connect timeout is such an error; a
// header or body timeout is not.
func InConnect(err error) bool {
	var ce connectError
	return errors.As(err, &ce)
}

// portOf returns the port of HOST:PORT ("" when there is none).
func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// closedByPeer reports whether err says the peer closed the connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// roundTrip writes the request and reads the response headers within HeaderTimeout.
func (c *Client) roundTrip(pc *pconn, req *http.Request, dump []byte, headerTimeout time.Duration) (*http.Response, error) {
	deadline := time.Now().Add(headerTimeout)
	if err := pc.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	pc.cr.n = 0
	pc.cr.limit = maxResponseHeaderBytes + int64(pc.br.Buffered())
	wire := dump
	if pc.forward {
		wire = forwardRequest(dump, req.URL, pc.proxyAuth)
	}
	if _, err := pc.conn.Write(wire); err != nil {
		return nil, fmt.Errorf("write request: %w", err)
	}
	for {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(deadline) {
				// The deadline cut a header line: textproto may call
				// that malformed, but it is the header timeout.
				return nil, fmt.Errorf("read response headers: %w: %w", os.ErrDeadlineExceeded, err)
			}
			return nil, fmt.Errorf("read response headers: %w", err)
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("read response: unexpected 101 Switching Protocols")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue // 1xx informational: the real response follows
		}
		pc.cr.limit = 0
		return resp, nil
	}
}

// bodyError names why reading a body failed: the context, the rate guard,
// the body deadline, or the connection's own error.
func bodyError(ctx context.Context, slow *atomic.Bool, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case slow.Load():
		return ErrTooSlow
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrBodyTimeout
	}
	return err
}
