package config

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// validateProxy checks fetch.proxy: empty, or an http:// or https:// URL
// with a host and nothing after it but an optional "/".
func validateProxy(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("must be an http:// or https:// URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("must be an http:// or https:// URL (no other proxy scheme is supported)")
	}
	if u.Hostname() == "" {
		return errors.New("must name the proxy's host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errors.New("port must be in 1..65535")
		}
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must be scheme://[user:password@]host[:port] with no path")
	}
	return nil
}

// redactProxy hides a proxy URL's password in error messages.
func redactProxy(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// DNSServerAddr returns a dns.servers entry as HOST:PORT, port 53 when none is given.
func DNSServerAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("must be HOST or HOST:PORT")
	}
	if host, port, err := net.SplitHostPort(s); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			return "", errors.New("must be HOST or HOST:PORT with a port in 1..65535")
		}
		return s, nil
	}
	h := strings.Trim(s, "[]")
	if strings.ContainsAny(h, " /") {
		return "", errors.New("must be HOST or HOST:PORT")
	}
	return net.JoinHostPort(h, "53"), nil
}
