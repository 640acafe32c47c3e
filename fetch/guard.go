package fetch

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrPrivateAddress is matched (errors.Is) by every refusal of the private-address guard: the
// fetcher will not connect to loopback, private (RFC 1918, CGNAT), unique-local, unspecified or
// multicast addresses unless ClientConfig.AllowPrivate (--allow-private) is set or the address
// is the target of a --resolve rule, nor to link-local addresses (169.254.0.0/16, fe80::/10)
// and cloud metadata endpoints (169.254.169.254, fd00:ec2::254) unless
// ClientConfig.AllowLinkLocal (fetch.allow_link_local) is set, whatever else is.
var ErrPrivateAddress = errors.New("fetch: private address refused")

// PrivateAddressError is the typed guard refusal; it matches ErrPrivateAddress.
type PrivateAddressError struct {
	Host string     // the name (or literal) that was being dialed
	IP   netip.Addr // the refused address
	// LinkLocal: the address is link-local or a cloud metadata endpoint,
	// which only fetch.allow_link_local opens.
	LinkLocal bool
}

// Error implements error.
func (e *PrivateAddressError) Error() string {
	if e.LinkLocal {
		return fmt.Sprintf("fetch: %s: address %s is link-local or a cloud metadata endpoint (refused; fetch.allow_link_local permits it)", e.Host, e.IP)
	}
	return fmt.Sprintf("fetch: %s: address %s is private or loopback (refused; --allow-private or a --resolve rule naming it permits it)", e.Host, e.IP)
}

// Is makes errors.Is(err, ErrPrivateAddress) true.
func (e *PrivateAddressError) Is(target error) bool { return target == ErrPrivateAddress }

var guardBlockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // CGNAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, incl. broadcast
	netip.MustParsePrefix("fec0::/10"),      // deprecated site-local
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("::ffff:0:0/96"),  // v4-mapped (checked after Unmap; kept for safety)
	netip.MustParsePrefix("::/128"),         // unspecified
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("fc00::/7"),       // unique-local
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, cloud metadata
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("10.0.0.0/8"),     // RFC 1918
	netip.MustParsePrefix("172.16.0.0/12"),  // RFC 1918
	netip.MustParsePrefix("192.168.0.0/16"), // RFC 1918
	netip.MustParsePrefix("ff00::/8"),       // IPv6 multicast
	netip.MustParsePrefix("224.0.0.0/4"),    // IPv4 multicast
}

var guardNAT64 = netip.MustParsePrefix("64:ff9b::/96")

// guardLinkLocal are the ranges only fetch.allow_link_local opens: link-local
// addresses, where the cloud metadata endpoints live (169.254.169.254, and
// fd00:ec2::254 of AWS's IPv6 instance metadata).
var guardLinkLocal = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// guardAddr embeds what the guard judges of ip: unmapped, and a NAT64
// address (64:ff9b::/96) as the IPv4 address it embeds.
func guardAddr(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() && guardNAT64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	return ip
}

// IsLinkLocalAddr reports whether ip is a link-local unicast address
// (169.254.0.0/16, fe80::/10) or a cloud metadata endpoint (169.254.169.254,
// fd00:ec2::254): the addresses --allow-private does not open
// (fetch.allow_link_local does). IPv4-mapped and NAT64 addresses are judged
// by the embedded IPv4 address. Multicast is not: IsPrivateAddr has it.
func IsLinkLocalAddr(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	ip = guardAddr(ip)
	if ip.IsLinkLocalUnicast() {
		return true
	}
	for _, p := range guardLinkLocal {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Guard is the private-address guard's rule (ClientConfig.AllowPrivate,
// ClientConfig.AllowLinkLocal).
type Guard struct {
	AllowPrivate, AllowLinkLocal bool
}

// Check returns the refusal (a *PrivateAddressError) of a connection to ip
// for host, or nil when the guard lets it through. given: the address is the
// target of a --resolve rule, which the operator named, so it needs no
// AllowPrivate; a link-local address needs AllowLinkLocal in every case.
func (g Guard) Check(host string, ip netip.Addr, given bool) error {
	switch {
	case IsLinkLocalAddr(ip):
		if !g.AllowLinkLocal {
			return &PrivateAddressError{Host: host, IP: ip, LinkLocal: true}
		}
	case IsPrivateAddr(ip):
		if !g.AllowPrivate && !given {
			return &PrivateAddressError{Host: host, IP: ip}
		}
	}
	return nil
}

// open reports whether the guard lets every address through.
func (g Guard) open() bool { return g.AllowPrivate && g.AllowLinkLocal }

// IsPrivateAddr reports whether the guard refuses ip: loopback, RFC 1918, CGNAT 100.64/10,
// link-local (169.254/16, fe80::/10), unique-local fc00::/7, unspecified, multicast and a few
// reserved ranges. IPv4-mapped IPv6 and NAT64 (64:ff9b::/96) addresses are judged by the
// embedded IPv4 address. An invalid address counts as private.
func IsPrivateAddr(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = guardAddr(ip)
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range guardBlockedPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
