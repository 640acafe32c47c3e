package cluster

import (
	"sync/atomic"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// sentSlots is the size of a sentFilter: 2^18 fingerprints, 2 MiB.
const sentSlots = 1 << 18

// sentFilter remembers the fingerprints of URLs this node filed durably
// in the outbox for their owners (KindNew), so that a link found again on
// another page does not cost another outbox write, batch entry and owner
// lookup: the owner has it, or has it coming in order behind the first.
// It is a direct-mapped table: a slot holds the last fingerprint that
// hashed to it, so memory is fixed and a forgotten URL is only sent again.
// It is cleared when the member list changes, since a URL's owner may have
// changed (and a dead member's share is taken over from the URLs that
// reach the new owners). Safe for concurrent use.
type sentFilter struct {
	slots atomic.Pointer[[sentSlots]atomic.Uint64]
}

func newSentFilter() *sentFilter {
	f := &sentFilter{}
	f.reset()
	return f
}

// reset forgets every fingerprint.
func (f *sentFilter) reset() { f.slots.Store(new([sentSlots]atomic.Uint64)) }

// plain reports whether u says no more than its address and depth: only
// such URLs are filtered (a sitemap's lastmod, a redirect count or a
// revisit's due time is always sent).
func plain(u frontier.NewURL) bool {
	return u.LastMod.IsZero() && u.Redirects == 0 && u.Due.IsZero()
}

// seen reports whether fp was marked since the last reset (false
// negatives when another fingerprint took its slot).
func (f *sentFilter) seen(fp uint64) bool {
	return fp != 0 && f.slots.Load()[fp&(sentSlots-1)].Load() == fp
}

// mark remembers fp.
func (f *sentFilter) mark(fp uint64) {
	f.slots.Load()[fp&(sentSlots-1)].Store(fp)
}
