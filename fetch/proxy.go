package fetch

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/http/httpproxy"
)

// ProxyFunc picks the proxy for a target URL: nil for a direct connection.
type ProxyFunc func(target *url.URL) (*url.URL, error)

// ErrProxy is matched (errors.Is) by the failures of a proxy: it could not
// be reached, or it refused or failed a CONNECT tunnel. ErrorKind
// classifies them as "proxy".
var ErrProxy = errors.New("fetch: proxy")

// NewProxyFunc returns the proxy selection of fetch.proxy: with proxy set,
// every target goes through it; empty, the environment's HTTPS_PROXY (https
// targets) and HTTP_PROXY (http targets) are used, upper- or lower-case,
// as net/http's ProxyFromEnvironment reads them. NO_PROXY's exceptions
// apply in both cases (and loopback targets are never proxied). getenv is
// os.Getenv or a test's map. It returns nil when no proxy is configured.
func NewProxyFunc(proxy string, getenv func(string) string) (ProxyFunc, error) {
	env := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	c := httpproxy.Config{
		HTTPProxy:  env("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: env("HTTPS_PROXY", "https_proxy"),
		NoProxy:    env("NO_PROXY", "no_proxy"),
	}
	if proxy != "" {
		u, err := url.Parse(proxy)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return nil, fmt.Errorf("fetch: proxy=%q: must be an http:// or https:// URL", redactURL(proxy))
		}
		c.HTTPProxy, c.HTTPSProxy = proxy, proxy
	}
	if c.HTTPProxy == "" && c.HTTPSProxy == "" {
		return nil, nil
	}
	for _, p := range []string{c.HTTPProxy, c.HTTPSProxy} {
		if p == "" {
			continue
		}
		u, err := url.Parse(p)
		if err != nil || !strings.Contains(p, "://") {
			u, err = url.Parse("http://" + p) // as net/http: a bare host:port is an http proxy
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return nil, fmt.Errorf("fetch: proxy %q (from fetch.proxy or the environment): must be an http:// or https:// URL", redactURL(p))
		}
	}
	return c.ProxyFunc(), nil
}

// redactURL hides the password of a URL for messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// proxyFor returns the proxy for a request to u (nil: connect directly).
// A host that a resolve rule sends elsewhere is always dialed directly.
func (c *Client) proxyFor(u *url.URL, host, port string) (*url.URL, error) {
	if c.cfg.Proxy == nil {
		return nil, nil
	}
	if _, ok := resolveTarget(c.cfg.Resolve, host, port); ok {
		return nil, nil
	}
	p, err := c.cfg.Proxy(u)
	if err != nil {
		return nil, fmt.Errorf("%w: choose the proxy for %s: %v", ErrProxy, u.Redacted(), err)
	}
	return p, nil
}

// proxyAuth is the Proxy-Authorization value for a proxy URL with user
// information, "" without.
func proxyAuth(p *url.URL) string {
	if p.User == nil {
		return ""
	}
	pass, _ := p.User.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(p.User.Username()+":"+pass))
}

// targetAddrs applies the private-address guard to the target host of a
// proxied request, as a direct dial does: the addresses its name resolves
// to (this client's resolver), each refused when private. It returns the
// public ones; with allow_private and fetch.allow_link_local, the host
// itself unresolved.
func (c *Client) targetAddrs(ctx context.Context, host string, all bool) ([]string, error) {
	guard := c.guard()
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := guard.Check(host, ip.Unmap(), false); err != nil {
			return nil, err
		}
		return []string{ip.Unmap().String()}, nil
	}
	if guard.open() {
		return []string{host}, nil
	}
	ips, err := c.lookup(ctx, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	var out []string
	var refused error
	for _, ip := range ips {
		ip = ip.Unmap()
		if err := guard.Check(host, ip, false); err != nil {
			if all {
				// The proxy resolves the name itself: it must have no
				// private address to choose.
				return nil, err
			}
			refused = cmp.Or(refused, err)
			continue
		}
		out = append(out, ip.String())
	}
	if len(out) == 0 {
		if refused != nil {
			return nil, refused
		}
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return out, nil
}

// dialProxy opens a connection to the proxy p (TLS for an https proxy).
// The private-address guard does not apply to the proxy, which an operator
// chose: only to the targets.
func (c *Client) dialProxy(ctx context.Context, p *url.URL) (net.Conn, error) {
	port := p.Port()
	if port == "" {
		port = "80"
		if p.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(p.Hostname(), port)
	d := net.Dialer{Timeout: c.cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrProxy, addr, err)
	}
	if p.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{MinVersion: tls.VersionTLS12, ServerName: p.Hostname(), RootCAs: c.tlsConf.RootCAs})
		hctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w %s: TLS handshake: %w", ErrProxy, addr, err)
		}
		conn = tc
	}
	return conn, nil
}

// connectProxy opens a connection to the target addr (HOST:PORT) through
// the proxy p. An https target gets a CONNECT tunnel to one of the target's
// public addresses (the name resolved and checked here, so the proxy cannot
// be steered to a private address); an http target gets a connection to
// the proxy, over which requests go in absolute form (forward is true),
// after every address of its name was found public. ip is the target's
// address when known.
func (c *Client) connectProxy(ctx context.Context, p *url.URL, u *url.URL, addr string) (conn net.Conn, ip string, forward bool, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", false, fmt.Errorf("fetch: dial %s: %w", addr, err)
	}
	if u.Scheme == "http" {
		if _, err := c.targetAddrs(ctx, host, true); err != nil {
			return nil, "", false, err
		}
		conn, err := c.dialProxy(ctx, p)
		return conn, "", true, err
	}
	ips, err := c.targetAddrs(ctx, host, false)
	if err != nil {
		return nil, "", false, err
	}
	var firstErr error
	for _, ip := range ips {
		conn, err := c.tunnel(ctx, p, net.JoinHostPort(ip, port))
		if err == nil {
			return conn, ip, false, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", false, firstErr
}

// tunnel asks the proxy p for a CONNECT tunnel to target, within the
// connect timeout.
func (c *Client) tunnel(ctx context.Context, p *url.URL, target string) (net.Conn, error) {
	conn, err := c.dialProxy(ctx, p)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(c.cfg.ConnectTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(aLongTimeAgo) })
	defer stop()
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\nUser-Agent: " + c.cfg.UserAgent + "\r\n"
	if a := proxyAuth(p); a != "" {
		req += "Proxy-Authorization: " + a + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: CONNECT %s: %w", ErrProxy, target, err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: CONNECT %s: %w", ErrProxy, target, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("%w: CONNECT %s: the proxy answered %s", ErrProxy, target, resp.Status)
	}
	if br.Buffered() > 0 {
		conn.Close()
		return nil, fmt.Errorf("%w: CONNECT %s: data from the proxy before the tunnel was used", ErrProxy, target)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: CONNECT %s: %w", ErrProxy, target, err)
	}
	return conn, nil
}

// forwardRequest is the request as a forward proxy wants it: the request
// line in absolute form and the proxy's credentials; dump is the request
// as the origin would get it (what the WARC request record keeps).
func forwardRequest(dump []byte, u *url.URL, auth string) []byte {
	line := strings.IndexByte(string(dump), '\n')
	if line < 0 {
		return dump
	}
	abs := *u
	abs.User, abs.Fragment, abs.RawFragment = nil, "", ""
	out := make([]byte, 0, len(dump)+len(u.Host)+len(auth)+64)
	out = append(out, "GET "+abs.String()+" HTTP/1.1\r\n"...)
	rest := dump[line+1:]
	if auth != "" {
		rest = rest[:len(rest)-2] // the blank line ends the headers
		out = append(out, rest...)
		return append(out, "Proxy-Authorization: "+auth+"\r\n\r\n"...)
	}
	return append(out, rest...)
}
