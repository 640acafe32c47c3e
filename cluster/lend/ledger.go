package lend

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// Mark is one URL lent: to whom, until when (local time).
type Mark struct {
	Holder string
	Slot   int64
	Until  time.Time // the end of the holder's phase and the grace: a rebalance waits for it
	// Hold is when the mark stops holding the URL (zero: Until): later
	// than Until by a slack, so that an outcome delayed on a loaded
	// machine still arrives before the URL is lent or fetched again.
	Hold time.Time
}

// HoldUntil is when the mark stops holding the URL.
func (m Mark) HoldUntil() time.Time {
	if m.Hold.After(m.Until) {
		return m.Hold
	}
	return m.Until
}

// Ledger is the owner's in-memory state of the URLs it lent. The zero
// Ledger lends nothing (Enabled is false) but keeps early outcomes.
type Ledger struct {
	mu      sync.Mutex
	marks   map[uint64]Mark
	out     map[string]int  // marks per holder
	pending map[string]bool // holders whose expired marks still hold (SetPending)
	// cursors is, per member, where the scan of the URLs to lend it
	// stopped in its current phase (the lend loop's goroutine only).
	cursors map[string]Cursor
	// early keeps the outcomes that reached this node, the URL's owner,
	// before the URL's record did (a leaving or rebalancing member moves
	// it here while the holder reports to the owner it sees): they are
	// settled when the record arrives (KindMoved), not dropped, so the
	// record is not fetched again.
	early map[uint64]earlyOutcome
	// again holds the URLs given back unfetched (a holder's trip ended
	// before it reached them, or its phase did): the lend scans' cursors
	// may have passed them, in this slot or, for a return that arrives
	// after the swap, in the next one, whose scans started from the
	// oldest URL while they were still marked. The lend round reads them
	// again by key (TakeAgain) and lends them in its next round for their
	// host's phase, whichever slot that is; those of this node's own phase
	// are its own to fetch (its scheduler's window starts again from the
	// oldest URL at every pass) and are forgotten (DropAgain).
	again map[uint64]frontier.Ref
}

// Enable makes the ledger lend: before the exchange and the rebalance
// start, which read it.
func (l *Ledger) Enable() {
	l.marks, l.out, l.cursors = map[uint64]Mark{}, map[string]int{}, map[string]Cursor{}
	l.again = map[uint64]frontier.Ref{}
}

// Enabled reports whether the ledger lends (Enable).
func (l *Ledger) Enabled() bool { return l.marks != nil }

// maxAgain bounds the URLs given back and waiting to be lent again.
const maxAgain = 4 * MaxLentPerMember

// earlyOutcome is an outcome kept until its record arrives.
type earlyOutcome struct {
	u  frontier.NewURL
	at time.Time
}

const (
	// earlyKeep is how long an outcome waits for its record.
	earlyKeep = 5 * time.Minute
	// maxEarly bounds the outcomes waiting for their records.
	maxEarly = 65536
)

// KeepEarly keeps the outcomes us until their records arrive.
func (l *Ledger) KeepEarly(us []frontier.NewURL, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.early == nil {
		l.early = map[uint64]earlyOutcome{}
	}
	if len(l.early)+len(us) > maxEarly {
		for fp, e := range l.early {
			if now.Sub(e.at) > earlyKeep {
				delete(l.early, fp)
			}
		}
	}
	for _, u := range us {
		if len(l.early) >= maxEarly {
			return
		}
		l.early[frontier.Fingerprint(u.URL)] = earlyOutcome{u: u, at: now}
	}
}

// TakeEarly removes and returns the outcomes kept for the records us.
func (l *Ledger) TakeEarly(us []frontier.NewURL, now time.Time) []frontier.NewURL {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.early) == 0 {
		return nil
	}
	var out []frontier.NewURL
	for _, u := range us {
		fp := frontier.Fingerprint(u.URL)
		if e, ok := l.early[fp]; ok {
			delete(l.early, fp)
			if now.Sub(e.at) <= earlyKeep {
				out = append(out, e.u)
			}
		}
	}
	return out
}

// Cursor is the position of the lend scan for one member.
type Cursor struct {
	Slot  int64
	Phase int
	At    frontier.Cursor
}

// CursorOf returns where the scan for peer stopped (the lend loop's
// goroutine only).
func (l *Ledger) CursorOf(peer string) Cursor { return l.cursors[peer] }

// SetCursor records where the scan for peer stopped (the lend loop's
// goroutine only).
func (l *Ledger) SetCursor(peer string, c Cursor) { l.cursors[peer] = c }

// Lent reports whether fp is lent now (Held).
func (l *Ledger) Lent(fp uint64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.marks[fp]
	if !ok {
		return false
	}
	if now.Before(m.HoldUntil()) || l.pending[m.Holder] {
		return true
	}
	l.drop(fp, m)
	return false
}

// Active reports whether fp is lent and the lend has not run out (its
// holder's phase and the grace are not over), whatever the holder's state:
// a rebalance waits for this, not for Lent (a holder that is not settled
// waits for the rebalances of the others, which must not wait for it).
func (l *Ledger) Active(fp uint64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.marks[fp]
	return ok && now.Before(m.Until)
}

// drop forgets the mark m of fp; l.mu held.
func (l *Ledger) drop(fp uint64, m Mark) {
	delete(l.marks, fp)
	if l.out[m.Holder]--; l.out[m.Holder] <= 0 {
		delete(l.out, m.Holder)
	}
}

// MarkOf returns the mark of fp, if it is lent.
func (l *Ledger) MarkOf(fp uint64) (Mark, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.marks[fp]
	return m, ok
}

// carry sets the mark m of fp, lent by the member that moved the record
// here (unless fp is marked already).
func (l *Ledger) carry(fp uint64, m Mark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.marks[fp]; ok {
		return
	}
	l.marks[fp] = m
	l.out[m.Holder]++
}

// Room is how many more URLs holder may be lent (MaxLentPerMember).
func (l *Ledger) Room(holder string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return MaxLentPerMember - l.out[holder]
}

// Lend marks fps lent to holder as m says, before they are filed: the
// scheduler must not pick them between the two.
func (l *Ledger) Lend(holder string, fps []uint64, m Mark) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fp := range fps {
		if _, ok := l.marks[fp]; !ok {
			l.out[holder]++
		}
		l.marks[fp] = m
	}
}

// Offer marks lent to holder as m says, up to what holder may still hold,
// the fps that are neither marked already nor known[i], and returns the
// indexes of those it marked, in order.
func (l *Ledger) Offer(holder string, fps []uint64, known []bool, m Mark) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	room := MaxLentPerMember - l.out[holder]
	var out []int
	for i, fp := range fps {
		if len(out) >= room {
			break
		}
		if _, ok := l.marks[fp]; ok || known[i] {
			continue // known here, lent meanwhile, or twice in this batch
		}
		l.out[holder]++
		l.marks[fp] = m
		out = append(out, i)
	}
	return out
}

// MovedHost is a moved record's entry Host when the record is lent: the
// URL's host, a newline, "lent", the holder, the slot of the lend and
// the end of the mark (Unix ms). The new owner keeps the mark (TakeMoved):
// it neither fetches nor lends the URL while the holder may still fetch
// it or its outcome may still be on its way.
func MovedHost(host string, m Mark) string {
	return host + "\nlent " + m.Holder + " " + strconv.FormatInt(m.Slot, 10) + " " + strconv.FormatInt(m.HoldUntil().UnixMilli(), 10)
}

// TakeMoved strips the lend marks from moved records' Host (MovedHost)
// and, when the ledger lends, keeps them; the marks end with a slack of
// twice the clock uncertainty u. It returns the records as they are stored.
func (l *Ledger) TakeMoved(urls []frontier.NewURL, u time.Duration) []frontier.NewURL {
	var out []frontier.NewURL
	for i, x := range urls {
		host, rest, ok := strings.Cut(x.Host, "\n")
		if !ok {
			if out != nil {
				out = append(out, x)
			}
			continue
		}
		if out == nil {
			out = append(make([]frontier.NewURL, 0, len(urls)), urls[:i]...)
		}
		x.Host = host
		out = append(out, x)
		f := strings.Fields(rest)
		if len(f) != 4 || f[0] != "lent" || l.marks == nil {
			continue
		}
		slot, err1 := strconv.ParseInt(f[2], 10, 64)
		ms, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		l.carry(frontier.Fingerprint(x.URL), Mark{Holder: f[1], Slot: slot, Until: time.UnixMilli(ms).Add(2 * max(u, 0))})
	}
	if out == nil {
		return urls
	}
	return out
}

// Settle forgets the marks of fps (their outcomes arrived).
func (l *Ledger) Settle(fps []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fp := range fps {
		if m, ok := l.marks[fp]; ok {
			l.drop(fp, m)
		}
	}
}

// Returned forgets the mark of the URL r if it is the lend to holder for
// slot (a return from an earlier lend does not end a later one), and
// keeps r to be lent again (TakeAgain).
func (l *Ledger) Returned(r frontier.Ref, holder string, slot int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, ok := l.marks[r.FP]
	if !ok || m.Holder != holder || m.Slot != slot {
		return
	}
	l.drop(r.FP, m)
	if l.again != nil && len(l.again) < maxAgain {
		l.again[r.FP] = r
	}
}

// TakeAgain removes and returns the URLs given back of phase (of nphase),
// at most most of them.
func (l *Ledger) TakeAgain(phase, nphase int, unit frontier.Unit, most int) []frontier.Ref {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []frontier.Ref
	for fp, r := range l.again {
		if len(out) >= most {
			break
		}
		if frontier.PhaseOf(unit.Hash(r.Host), nphase) == phase {
			out = append(out, r)
			delete(l.again, fp)
		}
	}
	return out
}

// DropAgain forgets the URLs given back of phase (of nphase): this node's
// own phase, whose URLs its scheduler finds.
func (l *Ledger) DropAgain(phase, nphase int, unit frontier.Unit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fp, r := range l.again {
		if frontier.PhaseOf(unit.Hash(r.Host), nphase) == phase {
			delete(l.again, fp)
		}
	}
}

// SetPending sets the holders whose expired marks still hold.
func (l *Ledger) SetPending(hold map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = hold
}

// PendingHolder reports whether holder's expired marks hold (SetPending).
func (l *Ledger) PendingHolder(holder string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending[holder]
}

// Expire forgets the expired marks of holders not pending, and the expired
// marks of a holder that is gone (gone reports it) even while it would be
// pending, and returns how many it forgot.
func (l *Ledger) Expire(now time.Time, gone func(holder string) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	dead := map[string]bool{}
	for h := range l.out {
		if gone != nil && gone(h) {
			dead[h] = true
		}
	}
	for fp, m := range l.marks {
		// A gone holder's marks are no longer extended while its reports
		// may wait (pending), but each still holds until its own time: a
		// holder can vanish from the ring for a moment (declared dead
		// under load before it is away) while its outcome is on the way.
		if !now.Before(m.HoldUntil()) && (dead[m.Holder] || !l.pending[m.Holder]) {
			l.drop(fp, m)
			n++
		}
	}
	return n
}
