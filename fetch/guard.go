package fetch

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrPrivateAddress is matched (errors.Is) by every refusal of the private-address guard: the
// fetcher will not connect to loopback, private (RFC 1918, CGNAT), link-local (including cloud
// metadata 169.254.169.254), unique-local, unspecified or multicast addresses unless
// ClientConfig.AllowPrivate (--allow-private) is set.
var ErrPrivateAddress = errors.New("fetch: private address refused")

// PrivateAddressError is the typed guard refusal; it matches ErrPrivateAddress.
type PrivateAddressError struct {
	Host string     // the name (or literal) that was being dialed
	IP   netip.Addr // the refused address
}

// Error implements error.
func (e *PrivateAddressError) Error() string {
	return fmt.Sprintf("fetch: %s: address %s is private/loopback/link-local (refused; --allow-private permits it)", e.Host, e.IP)
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

// IsPrivateAddr reports whether the guard refuses ip: loopback, RFC 1918, CGNAT 100.64/10,
// link-local (169.254/16, fe80::/10), unique-local fc00::/7, unspecified, multicast and a few
// reserved ranges. IPv4-mapped IPv6 and NAT64 (64:ff9b::/96) addresses are judged by the
// embedded IPv4 address. An invalid address counts as private.
func IsPrivateAddr(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.Unmap()
	if ip.Is6() && guardNAT64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
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
