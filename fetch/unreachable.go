package fetch

// HostUnreachable reports whether err (from Fetch) says the host cannot be
// reached: a DNS failure, a refused or timed-out connect, a failed TLS
// handshake. Its other URLs would fail the same way, so a caller may set
// them aside. Every other error (one response's failure, a header or body
// timeout, the private-address guard's refusal, a proxy's error, a
// cancellation) is the URL's own. See docs/design/hardening.md.
func HostUnreachable(err error) bool {
	if !InConnect(err) {
		return false
	}
	switch ErrorKind(err) {
	case "private_address", "canceled", "bad_url", "proxy":
		return false
	}
	return true
}
