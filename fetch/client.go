// Package fetch is the HTTP exchange: a Client sends one GET (or a
// conditional one) over a kept-alive connection per host (conn.go), through
// a proxy if one is set (proxy.go), refuses private addresses (guard.go)
// unless a --resolve rule names them (resolve.go), bounds and paces the
// bodies it reads and holds in memory (limit.go, budget.go), and returns
// the Response with an ErrorKind for its failure; HostUnreachable tells a
// host's failure from a URL's. FromRecord rebuilds a Response from its
// WARC record (record.go). Its subpackages: dnscache, the DNS cache a
// Client resolves through (ClientConfig.Resolver), and archive, the WARC
// files, CDXJ index and crawl log that keep the exchanges.
package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/phasecrawl/phasecrawl/robots"
)

// ClientConfig configures the HTTP client. Zero fields are not defaults: start from
// DefaultClientConfig.
type ClientConfig struct {
	UserAgent      string        // User-Agent header; default "phasecrawl/0.1 (+https://github.com/phasecrawl/phasecrawl)"
	ConnectTimeout time.Duration // TCP connect and TLS handshake; default 15s, valid 1ms..10m
	HeaderTimeout  time.Duration // request written -> response headers read; default 10s, valid 1ms..10m
	BodyTimeout    time.Duration // response headers -> body fully read; default 20s, valid 1ms..1h
	MaxBodySize    int64         // bytes kept of the transferred body and of the decoded body; default 10 MiB, valid 1..1 GiB
	AllowPrivate   bool          // allow loopback/private addresses (--allow-private); default false (--resolve targets are allowed anyway)
	AllowLinkLocal bool          // allow link-local addresses and cloud metadata endpoints (fetch.allow_link_local); default false
	Resolve        []ResolveRule // --resolve rules, first match wins; default none
	MaxIdleConns   int           // idle keep-alive connections kept over all hosts (one per host at most); default 1024, valid 0..1000000 (0 = unlimited)
	// MinRate is the slowest body transfer tolerated, in bytes per second: every RateWindow
	// after the headers, the body must have advanced by at least MinRate*RateWindow bytes, or
	// the fetch fails with ErrTooSlow ("too_slow"). This also bounds how long a body may stall
	// without a byte (idle read). Default 512, valid 0..1 GiB (0 = off).
	MinRate int64
	// RateWindow is the period over which MinRate is measured. Default 5s, valid 10ms..10m.
	RateWindow time.Duration
	// Proxy picks the proxy of each request (NewProxyFunc); nil: none. A
	// host matched by a Resolve rule is dialed directly.
	Proxy ProxyFunc
	// Resolver, if set, resolves host names (a DNS cache) instead of the
	// system resolver, also with AllowPrivate.
	Resolver Resolver
	// MaxInflightBytes bounds the body bytes (transferred and decoded) that
	// all fetches hold in memory at once, from the first byte read until
	// Response.Release: past it a body waits for room or is spooled to a
	// temp file in SpoolDir (BodyBudget). Default 0: unbounded; valid
	// 0..1 TiB. Every Response of such a client must be released
	// (Release or ReleaseBudget), or its share is never given back.
	MaxInflightBytes int64
	// SpoolDir is where bodies past MaxInflightBytes are spooled; "": the
	// system's temp directory.
	SpoolDir string
}

// Resolver resolves a host name to its addresses (net.Resolver's method).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DefaultClientConfig returns the defaults (timeouts of the issue: connect 15s, header 10s, body 20s).
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		UserAgent:      "phasecrawl/0.1 (+https://github.com/phasecrawl/phasecrawl)",
		ConnectTimeout: 15 * time.Second,
		HeaderTimeout:  10 * time.Second,
		BodyTimeout:    20 * time.Second,
		MaxBodySize:    10 << 20,
		MaxIdleConns:   1024,
		MinRate:        512,
		RateWindow:     5 * time.Second,
	}
}

// Validate checks every field and names the offending key and its allowed range.
func (c ClientConfig) Validate() error {
	if strings.TrimSpace(c.UserAgent) == "" || strings.ContainsAny(c.UserAgent, "\r\n") {
		return fmt.Errorf("fetch: user_agent=%q: must be non-empty, one line", c.UserAgent)
	}
	durs := []struct {
		key string
		v   time.Duration
		max time.Duration
	}{
		{"connect_timeout", c.ConnectTimeout, 10 * time.Minute},
		{"header_timeout", c.HeaderTimeout, 10 * time.Minute},
		{"body_timeout", c.BodyTimeout, time.Hour},
	}
	for _, d := range durs {
		if d.v < time.Millisecond || d.v > d.max {
			return fmt.Errorf("fetch: %s=%s: must be in 1ms..%s", d.key, d.v, d.max)
		}
	}
	if c.MaxBodySize < 1 || c.MaxBodySize > 1<<30 {
		return fmt.Errorf("fetch: max_body_size=%d: must be in 1..%d", c.MaxBodySize, int64(1<<30))
	}
	if c.MinRate < 0 || c.MinRate > 1<<30 {
		return fmt.Errorf("fetch: min_rate=%d: must be in 0..%d bytes/s (0 = off)", c.MinRate, int64(1<<30))
	}
	if c.MinRate > 0 && (c.RateWindow < 10*time.Millisecond || c.RateWindow > 10*time.Minute) {
		return fmt.Errorf("fetch: rate_window=%s: must be in 10ms..10m", c.RateWindow)
	}
	if c.MaxInflightBytes < 0 || c.MaxInflightBytes > 1<<40 {
		return fmt.Errorf("fetch: max_inflight_bytes=%d: must be in 0..%d (0 = unbounded)", c.MaxInflightBytes, int64(1<<40))
	}
	if c.MaxIdleConns < 0 || c.MaxIdleConns > 1000000 {
		return fmt.Errorf("fetch: max_idle_conns=%d: must be in 0..1000000", c.MaxIdleConns)
	}
	for i, r := range c.Resolve {
		if _, err := ParseResolve(r.String()); err != nil {
			return fmt.Errorf("fetch: resolve[%d]: %w", i, err)
		}
	}
	return nil
}

// Client fetches single URLs without following redirects, over keep-alive connections, at most
// one per host and used by one request at a time (conn.go). Safe for concurrent use.
type Client struct {
	cfg     ClientConfig
	dialer  net.Dialer
	res     *net.Resolver
	pool    *connPool   // one connection per host (conn.go)
	tlsConf *tls.Config // for https; ServerName set per connection
	budget  *BodyBudget // nil: bodies unbounded (MaxInflightBytes 0)

	// Seams for tests of the private-address guard (DNS rebinding): lookup resolves a host
	// name for one connection, dial opens it (default: dialer.DialContext, whose Control
	// hook checks the address the socket really connects to). Set before the first Fetch.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Response is one HTTP exchange as fetched.
type Response struct {
	URL         string        // the requested URL
	Status      int           // HTTP status code
	Header      http.Header   // response headers as received (Content-Encoding kept)
	Body        []byte        // decoded (gzip/deflate) body, at most MaxBodySize bytes
	RawBody     []byte        // body as transferred (still content-encoded), at most MaxBodySize bytes; for WARC
	Truncated   bool          // the transferred or the decoded body exceeded MaxBodySize and was cut
	Location    string        // for 3xx: Location resolved against URL (absolute, not normalized); else ""
	ContentType string        // media type of Content-Type, lower-case, without parameters
	Duration    time.Duration // request start -> body read
	RequestDump []byte        // the request as sent (request line, Host, headers, blank line); for WARC
	Proto       string        // e.g. "HTTP/1.1"
	IP          string        // remote IP of the connection used
	ConnectTime time.Duration // how long opening the connection took (lookup, connect, TLS); 0 on a reused connection

	bufs [2][]byte // the buffers RawBody and Body were read into (Release)
	hold *bodyHold // the bodies' share of the client's BodyBudget; nil: none
}

// Release hands the response's body buffers back for reuse by later
// fetches, and their share of the client's memory budget
// (ClientConfig.MaxInflightBytes). Body and RawBody must not be used
// afterwards (nor anything sharing their memory). Calling Release is
// optional without a budget; with one, Release or ReleaseBudget must be
// called.
func (r *Response) Release() {
	r.ReleaseBudget()
	for i, b := range r.bufs {
		putBuf(b)
		r.bufs[i] = nil
	}
	r.Body, r.RawBody = nil, nil
}

// ReleaseBudget hands the bodies' share of the client's memory budget back
// but leaves Body and RawBody usable (for bodies kept on by the caller, out
// of the budget's count). Calling it again, or Release after it, is
// harmless.
func (r *Response) ReleaseBudget() {
	if r.hold != nil {
		r.hold.give(r.hold.n)
		r.hold = nil
	}
}

// bodyBufs recycles body buffers (Response.Release): a page's bodies are
// most of what a fetch allocates.
var bodyBufs sync.Pool // *[]byte

const (
	minPooledBuf = 16 << 10  // buffers taken from the pool are at least this big
	maxPooledBuf = 256 << 10 // bigger buffers are left to the garbage collector
)

// getBuf returns an empty buffer with room for at least size bytes.
func getBuf(size int) []byte {
	if size <= maxPooledBuf {
		if p, _ := bodyBufs.Get().(*[]byte); p != nil {
			if cap(*p) >= size {
				return (*p)[:0]
			}
		}
		size = max(size, minPooledBuf)
	}
	return make([]byte, 0, size)
}

func putBuf(b []byte) {
	if cap(b) >= minPooledBuf && cap(b) <= maxPooledBuf {
		b = b[:0]
		bodyBufs.Put(&b)
	}
}

// ErrBodyTimeout is returned (wrapped) when the body was not read within BodyTimeout.
// ErrorKind classifies it as "timeout".
var ErrBodyTimeout error = &fetchTimeoutError{"fetch: body read timeout"}

type fetchTimeoutError struct{ msg string }

func (e *fetchTimeoutError) Error() string   { return e.msg }
func (e *fetchTimeoutError) Timeout() bool   { return true }
func (e *fetchTimeoutError) Temporary() bool { return true }

// ErrTooSlow is returned (wrapped) when the body advanced by less than MinRate*RateWindow bytes
// during one RateWindow (a slow-drip or stalled server). ErrorKind classifies it as "too_slow".
var ErrTooSlow error = &fetchTimeoutError{"fetch: body transfer below fetch.min_rate"}

// ErrBadURL is returned (wrapped) for a URL that cannot be fetched (not absolute http/https).
var ErrBadURL = errors.New("fetch: bad URL")

// NewClient validates c and builds the client and its transport.
func NewClient(c ClientConfig) (*Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.Resolve = append([]ResolveRule(nil), c.Resolve...)
	cl := &Client{cfg: c, res: net.DefaultResolver}
	cl.dialer = net.Dialer{Timeout: c.ConnectTimeout, KeepAlive: 30 * time.Second}
	var res Resolver = cl.res
	if c.Resolver != nil {
		res = c.Resolver
	}
	cl.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return res.LookupNetIP(ctx, "ip", host)
	}
	cl.dial = cl.dialer.DialContext
	if g := cl.guard(); !g.open() {
		// Last line of defence: the address actually connected to, whatever resolved it.
		cl.dialer.ControlContext = func(ctx context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("fetch: dial %s: %w", address, err)
			}
			return g.Check(address, ap.Addr(), ctx.Value(givenKey{}) != nil)
		}
	}
	cl.tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	cl.pool = newConnPool(c.MaxIdleConns)
	if c.MaxInflightBytes > 0 {
		cl.budget = NewBodyBudget(c.MaxInflightBytes)
	}
	return cl, nil
}

// givenKey marks a dial's context when its address is a --resolve rule's target.
type givenKey struct{}

// guard returns the client's private-address guard.
func (c *Client) guard() Guard {
	return Guard{AllowPrivate: c.cfg.AllowPrivate, AllowLinkLocal: c.cfg.AllowLinkLocal}
}

// Budget returns the client's body memory budget, nil when unbounded.
func (c *Client) Budget() *BodyBudget { return c.budget }

// Close closes idle connections. In-flight fetches are not interrupted (cancel their contexts).
func (c *Client) Close() { c.pool.closeIdle() }

// dialContext applies --resolve rules, then the private-address guard, then dials.
func (c *Client) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("fetch: dial %s: %w", addr, err)
	}
	target := addr
	given := false // the target of a --resolve rule: the operator named it
	if t, ok := resolveTarget(c.cfg.Resolve, host, port); ok {
		target, given = t, true
		host, port, _ = net.SplitHostPort(t)
		ctx = context.WithValue(ctx, givenKey{}, true) // for the dialer's Control hook
	}
	guard := c.guard()
	if guard.open() && c.cfg.Resolver == nil {
		return c.dial(ctx, network, target)
	}
	// Every connection resolves its name again and is judged by the addresses of that
	// lookup; the dialer's Control hook then checks the address the socket really connects
	// to, so neither a rebinding resolver nor a redirect can slip a private address through.
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = c.lookup(ctx, host)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
	}
	var firstErr error
	for _, ip := range ips {
		ip = ip.Unmap()
		if err := guard.Check(host, ip, given); err != nil {
			if firstErr == nil {
				firstErr = err // refused before any dial
			}
			continue
		}
		conn, err := c.dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		var pe *PrivateAddressError
		if firstErr == nil || errors.As(firstErr, &pe) {
			firstErr = err // a real dial error says more than a skipped private address
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return nil, firstErr
}

// Fetch performs one GET of rawURL (absolute http/https). Redirects are not followed: a 3xx is
// returned with Location resolved. Errors are wrapped; classify them with ErrorKind.
func (c *Client) Fetch(ctx context.Context, rawURL string) (*Response, error) {
	return c.FetchConditional(ctx, rawURL, Conditional{})
}

// Conditional holds the validators of an earlier response, for a
// conditional GET (RFC 9110 §13.1): ETag is sent as If-None-Match,
// LastModified as If-Modified-Since; empty ones are not sent. A server that
// finds the resource unchanged answers 304 Not Modified without a body.
type Conditional struct {
	ETag, LastModified string
}

// clean drops validators that could not be sent as one header line.
func (c Conditional) clean() Conditional {
	bad := func(s string) bool { return len(s) > 1024 || strings.ContainsAny(s, "\r\n\x00") }
	if bad(c.ETag) {
		c.ETag = ""
	}
	if bad(c.LastModified) {
		c.LastModified = ""
	}
	return c
}

// FetchConditional is Fetch with the validators of cond sent along (see
// Conditional).
func (c *Client) FetchConditional(ctx context.Context, rawURL string, cond Conditional) (*Response, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fetch: GET %s: %w", rawURL, err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetch: %q: %w: %v", rawURL, ErrBadURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fetch: %q: %w: want absolute http or https", rawURL, ErrBadURL)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	if host == "" || strings.ContainsAny(u.Host, " \t\r\n") {
		return nil, fmt.Errorf("fetch: %q: %w: bad host", rawURL, ErrBadURL)
	}
	addr := net.JoinHostPort(host, port)
	req := &http.Request{
		Method:     http.MethodGet,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Host:       u.Host,
		Header:     http.Header{"User-Agent": {c.cfg.UserAgent}, "Accept-Encoding": {"gzip, deflate"}},
	}
	cond = cond.clean()
	if cond.ETag != "" {
		req.Header["If-None-Match"] = []string{cond.ETag}
	}
	if cond.LastModified != "" {
		req.Header["If-Modified-Since"] = []string{cond.LastModified}
	}
	dump := requestDump(req)

	slot, err := c.pool.acquire(ctx, u.Scheme+"://"+addr)
	if err != nil {
		return nil, fmt.Errorf("fetch: GET %s: %w", rawURL, err)
	}
	defer c.pool.release(slot)
	pc, resp, err := c.exchange(ctx, slot, req, dump, addr)
	if err != nil {
		return nil, err
	}
	var sp *spoolBody // the body within the memory budget; nil: none
	if c.budget != nil {
		if sp, err = c.reserveBody(ctx, resp.ContentLength); err != nil {
			pc.conn.Close()
			return nil, fmt.Errorf("fetch: GET %s: wait for body memory: %w", rawURL, err)
		}
	}

	// The body: within BodyTimeout, at MinRate or faster, until ctx ends.
	max := c.cfg.MaxBodySize
	var slow atomic.Bool
	bodyDeadline := time.Now().Add(c.cfg.BodyTimeout)
	pc.conn.SetDeadline(bodyDeadline)
	stop := context.AfterFunc(ctx, func() { pc.conn.SetDeadline(aLongTimeAgo) })
	body := io.Reader(resp.Body)
	var guard *rateGuard
	if c.cfg.MinRate > 0 {
		guard = newRateGuard(resp.Body, c.cfg.MinRate, c.cfg.RateWindow, func() {
			slow.Store(true)
			pc.conn.SetReadDeadline(aLongTimeAgo)
		})
		body = guard
	}
	if l := bodyLimiterFrom(ctx); l != nil {
		// The time spent waiting for the share is ours, not the server's:
		// it moves the body deadline on. A cancellation or a too-slow
		// verdict that came meanwhile is applied again.
		extend := func(waited time.Duration) {
			bodyDeadline = bodyDeadline.Add(waited)
			pc.conn.SetDeadline(bodyDeadline)
			if ctx.Err() != nil {
				pc.conn.SetDeadline(aLongTimeAgo)
			} else if slow.Load() {
				pc.conn.SetReadDeadline(aLongTimeAgo)
			}
		}
		body = &pacedReader{r: body, l: l, ctx: ctx, extend: extend}
		if h, ok := l.(lengthHinter); ok && resp.ContentLength > 0 {
			h.Expect(resp.ContentLength)
		}
	}
	var raw []byte // without a budget; sp has the body with one
	var rerr error
	var size int64
	if sp != nil {
		rerr = sp.readFrom(body, max+1, resp.ContentLength)
		size = sp.size()
	} else {
		raw, rerr = readBounded(body, max+1, resp.ContentLength)
		size = int64(len(raw))
	}
	if guard != nil {
		guard.stop()
	}
	interrupted := !stop() || slow.Load()
	if rerr != nil {
		pc.conn.Close()
		if sp != nil {
			sp.discard()
		}
		return nil, fmt.Errorf("fetch: GET %s: read body after %d bytes: %w", rawURL, size, bodyError(ctx, &slow, rerr))
	}
	// Whole body read (EOF, not cut at the limit), nothing unsolicited
	// after it, not closing: the connection serves the host's next request.
	if size <= max && !interrupted && !resp.Close && pc.br.Buffered() == 0 && resp.Body.Close() == nil &&
		pc.conn.SetDeadline(time.Time{}) == nil {
		c.pool.put(pc)
	} else {
		pc.conn.Close()
	}
	r := &Response{
		URL:         rawURL,
		Status:      resp.StatusCode,
		Header:      resp.Header,
		Proto:       resp.Proto,
		RequestDump: dump,
		IP:          pc.ip,
		ConnectTime: pc.dialed,
	}
	if sp != nil {
		if err := c.settleBody(ctx, r, sp, req.URL, max); err != nil {
			return nil, fmt.Errorf("fetch: GET %s: %w", rawURL, err)
		}
		r.Duration = time.Since(start)
		return r, nil
	}
	r.bufs[0] = raw
	if int64(len(raw)) > max {
		raw = raw[:max:max]
		r.Truncated = true
	}
	r.RawBody = raw
	r.derive(req.URL, max)
	if len(r.Body) > 0 && len(raw) > 0 && &r.Body[0] != &raw[0] {
		r.bufs[1] = r.Body // decoded into a buffer of its own
	}
	r.Duration = time.Since(start)
	return r, nil
}

// derive sets what Fetch derives from Status, Header and RawBody: Body
// decoded (gzip/deflate, at most max bytes; Truncated when cut), the
// ContentType, and for a 3xx the Location resolved against base.
func (r *Response) derive(base *url.URL, max int64) {
	var dtrunc bool
	r.Body, dtrunc = decodeBody(r.Header.Get("Content-Encoding"), r.RawBody, max)
	r.Truncated = r.Truncated || dtrunc
	r.deriveHead(base)
}

// deriveHead sets the ContentType and, for a 3xx, the Location (derive).
func (r *Response) deriveHead(base *url.URL) {
	r.ContentType = clientMediaType(r.Header.Get("Content-Type"))
	if r.Status >= 300 && r.Status < 400 {
		if loc := r.Header.Get("Location"); loc != "" {
			if u, err := base.Parse(strings.TrimSpace(loc)); err == nil {
				r.Location = u.String()
			}
		}
	}
}

// Get adapts Fetch to the robots fetcher's signature (status, headers, decoded body).
func (c *Client) Get(ctx context.Context, rawURL string) (int, http.Header, []byte, error) {
	r, err := c.Fetch(ctx, rawURL)
	if err != nil {
		return 0, nil, nil, err
	}
	r.ReleaseBudget() // the body is the caller's now
	return r.Status, r.Header, r.Body, nil
}

func clientMediaType(ct string) string {
	if ct == "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// requestDump renders the GET Fetch sends (request line, Host, User-Agent,
// Accept-Encoding, the conditional headers if any, blank line): these bytes are written to the connection
// and archived as the WARC request record.
func requestDump(req *http.Request) []byte {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	uri := req.URL.RequestURI()
	ua := req.Header.Get("User-Agent")
	b := make([]byte, 0, len(uri)+len(host)+len(ua)+80)
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: "...)
	b = append(b, ua...)
	b = append(b, "\r\nAccept-Encoding: "...)
	b = append(b, req.Header.Get("Accept-Encoding")...)
	for _, k := range [...]string{"If-None-Match", "If-Modified-Since"} {
		if v := req.Header.Get(k); v != "" {
			b = append(b, "\r\n"...)
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
		}
	}
	return append(b, "\r\n\r\n"...)
}

// ErrorKinds lists every value ErrorKind returns for a non-nil error (for metric labels).
var ErrorKinds = []string{"timeout", "too_slow", "dns", "conn_refused", "conn_reset", "private_address", "tls", "canceled", "bad_url", "http_5xx", "proxy", "other"}

// ErrorKind classifies a Fetch error: "timeout", "too_slow" (ErrTooSlow), "dns",
// "conn_refused", "conn_reset", "private_address", "tls", "canceled", "bad_url",
// "http_5xx" (a robots.txt answered 5xx or 429: robots.ErrStatus), "proxy" (ErrProxy)
// or "other"; "" for nil.
// Bodies over MaxBodySize are not errors (Response.Truncated).
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	var (
		dnsErr   *net.DNSError
		netErr   net.Error
		recErr   tls.RecordHeaderError
		alertErr tls.AlertError
		verErr   *tls.CertificateVerificationError
		uaErr    x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		certErr  x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, ErrPrivateAddress):
		return "private_address"
	case errors.Is(err, ErrBadURL):
		return "bad_url"
	case errors.Is(err, ErrTooSlow):
		return "too_slow"
	case errors.Is(err, robots.ErrStatus):
		return "http_5xx"
	case errors.Is(err, ErrProxy):
		return "proxy"
	case errors.As(err, &dnsErr):
		return "dns"
	case errors.Is(err, ErrBodyTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "conn_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "conn_reset"
	case errors.As(err, &recErr), errors.As(err, &alertErr), errors.As(err, &verErr),
		errors.As(err, &uaErr), errors.As(err, &hostErr), errors.As(err, &certErr):
		return "tls"
	}
	if strings.Contains(err.Error(), "tls: ") {
		return "tls"
	}
	return "other"
}

// timeoutsKey is the context key of WithTimeouts.
type timeoutsKey struct{}

// Timeouts are per-request connect and header timeouts (zero: the
// client's).
type Timeouts struct {
	Connect, Header time.Duration
}

// WithTimeouts returns a context under which Fetch uses these connect and
// header timeouts where they are shorter than the client's own (adaptive
// per-host timeouts); the body timeout is unchanged.
func WithTimeouts(ctx context.Context, t Timeouts) context.Context {
	return context.WithValue(ctx, timeoutsKey{}, t)
}

// timeouts returns the connect and header timeouts for a request under ctx.
func (c *Client) timeouts(ctx context.Context) (connect, header time.Duration) {
	connect, header = c.cfg.ConnectTimeout, c.cfg.HeaderTimeout
	if t, ok := ctx.Value(timeoutsKey{}).(Timeouts); ok {
		if t.Connect > 0 && t.Connect < connect {
			connect = t.Connect
		}
		if t.Header > 0 && t.Header < header {
			header = t.Header
		}
	}
	return connect, header
}
