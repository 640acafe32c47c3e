package fetch

import "errors"

// unreachableError marks a failure to reach the host at all: its name did
// not resolve, the connection was refused or timed out, or the TLS
// handshake failed. A failure inside a response (a short body, bad
// chunking, a reset after the headers, a body too slow, endless interim
// responses) is not one: it concerns that URL alone.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// HostUnreachable reports whether err (from Fetch) says the host cannot be
// reached: a DNS failure, a refused or timed-out connect, a failed TLS
// handshake. Its other URLs would fail the same way, so a caller may set
// them aside. Every other error (one response's failure, a header or body
// timeout, the private-address guard's refusal, a proxy's error, a
// cancellation) is the URL's own. See docs/design/hardening.md.
func HostUnreachable(err error) bool {
	var ue *unreachableError
	if !errors.As(err, &ue) {
		return false
	}
	switch ErrorKind(err) {
	case "private_address", "canceled", "bad_url", "proxy":
		return false
	}
	return true
}
