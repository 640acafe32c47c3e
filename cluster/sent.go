package cluster

import (
	"sync/atomic"

	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// sentSlots is the size of a sentFilter's table: 2^18 fingerprints, 2 MiB.
const sentSlots = 1 << 18

// sentFilter remembers the fingerprints of URLs this node filed durably
// in the outbox for their owners (KindNew), so that a link found again on
// another page does not cost another outbox write, batch entry and owner
// lookup: the owner has it, or has it coming in order behind the first.
// Its table is direct-mapped: a slot holds the last fingerprint that
// hashed to it, so memory is fixed and a forgotten URL is only sent again.
// A table belongs to one member list (Ring): when the list changes, a
// URL's owner may have changed (and a dead member's share is taken over
// from the URLs that reach the new owners), so the cluster starts a new
// table (reset), and a mark or lookup made for another ring is ignored.
// Safe for concurrent use.
type sentFilter struct {
	t atomic.Pointer[sentTable]
}

type sentTable struct {
	ring  *ring.Ring
	slots [sentSlots]atomic.Uint64
}

func newSentFilter(ring *ring.Ring) *sentFilter {
	f := &sentFilter{}
	f.reset(ring)
	return f
}

// reset starts an empty table for ring.
func (f *sentFilter) reset(ring *ring.Ring) { f.t.Store(&sentTable{ring: ring}) }

// plain reports whether u says no more than its address and depth: only
// such URLs are left out once filed (a sitemap's lastmod, a redirect count
// or a revisit's due time is always sent).
func plain(u frontier.NewURL) bool {
	return u.LastMod.IsZero() && u.Redirects == 0 && u.Due.IsZero()
}

// seen reports whether fp was marked for ring since its table started
// (false negatives when another fingerprint took its slot).
func (f *sentFilter) seen(ring *ring.Ring, fp uint64) bool {
	t := f.t.Load()
	return fp != 0 && t.ring == ring && t.slots[fp&(sentSlots-1)].Load() == fp
}

// mark remembers fp as filed for its owner under ring; nothing when the
// table is another ring's.
func (f *sentFilter) mark(ring *ring.Ring, fp uint64) {
	if t := f.t.Load(); t.ring == ring {
		t.slots[fp&(sentSlots-1)].Store(fp)
	}
}
