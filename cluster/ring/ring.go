// Package ring is the cluster's URL ownership: each URL's owner among the
// members by rendezvous (highest-random-weight) hashing of its
// fingerprint (KSpider §3.1), the member ranked second for it (the
// replica's holder) and the hash that identifies a member set.
package ring

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Owner returns the member that owns the URL with fingerprint fp, by
// rendezvous (highest-random-weight) hashing over member names: every member
// gets the weight Weight(fp, name) and the highest wins; equal weights (only
// on a 64-bit name-hash collision) go to the lexically smallest name. The
// result does not depend on the order of members or on duplicates; empty
// names are ignored. When a
// member joins, only the URLs it now wins move, all to it; when one leaves,
// only its URLs move. Owner returns "" for an empty member list. For many
// calls over the same members, use a Ring.
func Owner(fp uint64, members []string) string {
	best, bestW := "", uint64(0)
	for _, m := range members {
		if m == "" {
			continue
		}
		if w := weight(fp, nameHash(m)); best == "" || beats(w, m, bestW, best) {
			best, bestW = m, w
		}
	}
	return best
}

// Weight is the rendezvous weight of member name for fingerprint fp: the
// splitmix64 finalizer of fp XOR xxhash64(name). Exported for tools and tests.
func Weight(fp uint64, name string) uint64 { return weight(fp, nameHash(name)) }

// nameHash is the xxhash64 of a member name.
func nameHash(name string) uint64 { return xxhash.Sum64String(name) }

// weight mixes a fingerprint with a member's name hash. The splitmix64
// finalizer is a bijection with full avalanche, so the weights of one URL
// for different members behave as independent uniform draws.
func weight(fp, nh uint64) uint64 {
	return mix64(fp ^ nh)
}

// mix64 is the splitmix64 finalizer (Stafford's Mix13).
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// beats reports whether (w, name) wins over the current best (bw, bname).
func beats(w uint64, name string, bw uint64, bname string) bool {
	if w != bw {
		return w > bw
	}
	return name < bname
}

// Ring is a precomputed member set for Owner: names are deduplicated and
// sorted and their hashes computed once. A Ring is immutable and safe for
// concurrent use; build a new one when membership changes.
type Ring struct {
	names  []string
	hashes []uint64
	id     string // identifies the members' processes too (NewWithID); "" = Hash(names)
}

// Hash identifies a member set (order and duplicates do not matter): the
// value a settled node gossips (membership.NodeMeta.Settled).
func Hash(members []string) string {
	return fmt.Sprintf("%016x", xxhash.Sum64String(strings.Join(New(members).Members(), "\n")))
}

// ID identifies the ring's member processes: Hash of the names, or,
// for a ring built by the cluster layer (NewWithID), of each name with its process's
// start time, so that a member restarted under the same name (a kill -9
// and a restart quicker than the others' failure detection) makes a new
// ring that every member must settle for again.
func (r *Ring) ID() string {
	if r.id != "" {
		return r.id
	}
	return Hash(r.names)
}

// NewWithID builds a Ring over members, as New, whose ID is id rather than
// the Hash of the names (the cluster layer's: the members' processes).
func NewWithID(members []string, id string) *Ring {
	r := New(members)
	r.id = id
	return r
}

// New builds a Ring over members (order and duplicates do not matter;
// empty names are ignored).
func New(members []string) *Ring {
	names := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			names = append(names, m)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	r := &Ring{names: names, hashes: make([]uint64, len(names))}
	for i, n := range names {
		r.hashes[i] = nameHash(n)
	}
	return r
}

// Owner returns the member owning fp, exactly as the package-level Owner
// would; "" for an empty ring.
func (r *Ring) Owner(fp uint64) string {
	i := r.OwnerIndex(fp)
	if i < 0 {
		return ""
	}
	return r.names[i]
}

// OwnerIndex returns the index in Members() of fp's owner, or -1 for an
// empty ring.
func (r *Ring) OwnerIndex(fp uint64) int {
	best, bestW := -1, uint64(0)
	for i, h := range r.hashes {
		w := weight(fp, h)
		// Names are sorted, so on equal weights the earlier (smaller) name
		// keeps the lead, as in Owner.
		if best < 0 || w > bestW {
			best, bestW = i, w
		}
	}
	return best
}

// Top2 returns fp's owner and the member ranked second for it (the owner
// should the owner leave the ring): "" where the ring has too few members.
// The second holds the replica of a COMPLETED record (exchange.KindReplica).
func (r *Ring) Top2(fp uint64) (first, second string) {
	b1, b2 := -1, -1
	var w1, w2 uint64
	for i, h := range r.hashes {
		switch w := weight(fp, h); {
		case b1 < 0 || w > w1:
			b2, w2 = b1, w1
			b1, w1 = i, w
		case b2 < 0 || w > w2:
			b2, w2 = i, w
		}
	}
	if b1 >= 0 {
		first = r.names[b1]
	}
	if b2 >= 0 {
		second = r.names[b2]
	}
	return first, second
}

// Members returns the sorted, deduplicated member names (a copy).
func (r *Ring) Members() []string { return slices.Clone(r.names) }

// Len returns the number of members.
func (r *Ring) Len() int { return len(r.names) }

// Has reports whether name is a member.
func (r *Ring) Has(name string) bool {
	_, ok := slices.BinarySearch(r.names, name)
	return ok
}
