package frontier

import (
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Fingerprint is the 64-bit identity of a URL: xxhash64 of its normalized
// form (urlscope.Normalize). The frontier deduplicates on it.
func Fingerprint(normalizedURL string) uint64 {
	return xxhash.Sum64String(normalizedURL)
}

// HostHash is xxhash64 of the lower-cased host, written as it appears in the
// URL (host or host:port). The phase (PhaseOf) and the bucket column are
// derived from it, so every node must hash hosts the same way.
func HostHash(host string) uint64 {
	return xxhash.Sum64String(strings.ToLower(host)) // ToLower does not allocate for lower-case ASCII
}

// PhaseOf is the phase a host belongs to: hostHash mod nphase; 0 when
// nphase <= 1.
func PhaseOf(hostHash uint64, nphase int) int {
	if nphase <= 1 {
		return 0
	}
	return int(hostHash % uint64(nphase))
}

// Unit maps a host to its politeness unit: the name its phase is hashed
// from. nil is the host itself (politeness.key host); with politeness.key
// domain it is the host's registered domain, so that every name of a
// domain falls in one phase.
type Unit func(host string) string

// Hash is HostHash of the host's unit: the hash PhaseOf takes.
func (u Unit) Hash(host string) uint64 {
	if u == nil {
		return HostHash(host)
	}
	return HostHash(u(host))
}
