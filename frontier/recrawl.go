package frontier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Recurring crawls. A COMPLETED URL whose fetch result carried a revisit
// Schedule gets a Due time and an entry in the `due` bucket, keyed by that
// time (like the retry lane): ReleaseDue walks the bucket from its first
// key and stops at the first one not due yet, so due URLs re-enter their
// phase's queue without a scan of the COMPLETED records. A released URL
// goes back to its original queue position (seq), so it is scheduled like
// any queued URL: in its host's phase, at its host's pace.

// bDue is the due index: due (Unix ns, 8B BE) | hk | fp -> nil.
var bDue = []byte("due")

// mRevisits is the meta key of the number of released revisits not fetched
// yet (uint64 BE; absent = 0).
var mRevisits = []byte("revisits")

// Change is what a fetch learned about a page's content.
type Change uint8

const (
	// ChangeUnknown: not compared (first fetch, an error, no digest).
	ChangeUnknown Change = iota
	// Changed: a new payload digest.
	Changed
	// Unchanged: a 304 Not Modified, or the same payload digest as before.
	Unchanged
)

// PageState is what a URL's fetches keep for recurring crawls, stored
// compactly with its record (a few dozen bytes).
type PageState struct {
	// ETag and LastModified are the validators of the last full response
	// (sent back as If-None-Match and If-Modified-Since).
	ETag, LastModified string
	// Digest is the SHA-1 of the last archived payload (all zero: none),
	// the WARC-Payload-Digest a revisit record refers to.
	Digest [20]byte
	// Archived is the WARC-Date of the last archived full response (the
	// revisit record's WARC-Refers-To-Date).
	Archived time.Time
	// Interval is the revisit interval the last fetch chose (adaptive
	// schedules change it; 0: never set).
	Interval time.Duration
	// History holds whether the page changed at its last fetches: bit 0 is
	// the latest, 1 = changed; Checks counts the comparisons made
	// (saturating at 255), so min(Checks, 16) bits are meaningful.
	History uint16
	Checks  uint8
}

// zero reports whether p holds nothing.
func (p *PageState) zero() bool {
	return p.ETag == "" && p.LastModified == "" && !p.HasDigest() && p.Archived.IsZero() &&
		p.Interval == 0 && p.History == 0 && p.Checks == 0
}

// HasDigest reports whether p holds a payload digest.
func (p *PageState) HasDigest() bool { return p.Digest != [20]byte{} }

// Changes returns how many of the last n (at most 16, at most Checks)
// comparisons found the page changed, and n.
func (p PageState) Changes() (changed, n int) {
	n = min(int(p.Checks), 16)
	for i := range n {
		if p.History&(1<<i) != 0 {
			changed++
		}
	}
	return changed, n
}

// record notes one comparison's outcome in the history.
func (p *PageState) record(c Change) {
	if c == ChangeUnknown {
		return
	}
	p.History <<= 1
	if c == Changed {
		p.History |= 1
	}
	if p.Checks < 255 {
		p.Checks++
	}
}

// Schedule is how a URL is revisited.
type Schedule struct {
	// Interval is the base revisit interval; <= 0: not revisited.
	Interval time.Duration
	// Adaptive: each fetch shrinks the page's interval when it changed and
	// grows it when it did not (Nutch's AdaptiveFetchSchedule: ×0.8 on a
	// change, ×1.4 without), within Min..Max.
	Adaptive bool
	// Min and Max bound an adaptive interval. 0: Interval/2 and 8×Interval.
	Min, Max time.Duration
}

// The factors of an adaptive schedule (Nutch's defaults: dec_rate 0.2,
// inc_rate 0.4).
const (
	adaptiveShrink = 0.8
	adaptiveGrow   = 1.4
)

// Next returns the interval after a fetch whose outcome was c, for a page
// whose current interval is cur (0: never set).
func (s Schedule) Next(cur time.Duration, c Change) time.Duration {
	if s.Interval <= 0 {
		return 0
	}
	if !s.Adaptive {
		return s.Interval
	}
	lo, hi := s.Min, s.Max
	if lo <= 0 {
		lo = s.Interval / 2
	}
	if hi <= 0 {
		hi = 8 * s.Interval
	}
	if hi < lo {
		hi = lo
	}
	if cur <= 0 {
		cur = s.Interval
	}
	switch c {
	case Changed:
		cur = time.Duration(float64(cur) * adaptiveShrink)
	case Unchanged:
		cur = time.Duration(float64(cur) * adaptiveGrow)
	}
	return min(max(cur, lo), hi)
}

// pageTailVersion starts the optional tail of a record value that holds
// Due and Page (absent in records without them, and in records written
// before recurring crawls: those decode with a zero Due and Page). A
// record with a Run has the tail, zero or not, and the run after it
// (appendRecord).
const pageTailVersion = 1

func appendPageTail(buf []byte, s *stored) []byte {
	if s.Due.IsZero() && s.Page.zero() && s.Run <= 0 {
		return buf
	}
	p := &s.Page
	buf = append(buf, pageTailVersion)
	buf = binary.AppendVarint(buf, unixNano(s.Due))
	buf = appendString(buf, p.ETag)
	buf = appendString(buf, p.LastModified)
	if p.HasDigest() {
		buf = binary.AppendUvarint(buf, uint64(len(p.Digest)))
		buf = append(buf, p.Digest[:]...)
	} else {
		buf = binary.AppendUvarint(buf, 0)
	}
	buf = binary.AppendVarint(buf, unixNano(p.Archived))
	buf = binary.AppendVarint(buf, int64(p.Interval))
	buf = binary.AppendUvarint(buf, uint64(p.History))
	return append(buf, p.Checks)
}

func (r *reader) pageTail(s *stored) {
	if r.err != nil || len(r.b) == 0 {
		return
	}
	r.version(pageTailVersion)
	s.Due = fromUnixNano(r.varint())
	p := &s.Page
	p.ETag = r.string()
	p.LastModified = r.string()
	if d := r.string(); len(d) == len(p.Digest) {
		copy(p.Digest[:], d)
	} else if d != "" && r.err == nil {
		r.err = errors.New("bad payload digest length")
	}
	p.Archived = fromUnixNano(r.varint())
	p.Interval = time.Duration(r.varint())
	p.History = uint16(r.uvarint())
	p.Checks = r.byte()
}

// dueKey is due (Unix ns, uint64 BE) | the record's key.
func dueKey(buf []byte, due time.Time, hk uint32, fp uint64) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(max(unixNano(due), 1)))
	return recKey(buf, hk, fp)
}

const dueKeyLen = 8 + recKeyLen

// index puts the COMPLETED record s in the due index at s.Due.
func (st *txState) indexDue(s *stored) error {
	if s.Due.IsZero() {
		return nil
	}
	r := s.ref()
	return st.due.Put(dueKey(st.slab.take(dueKeyLen), s.Due, r.hk, r.fp), nil)
}

// unindexDue removes s's due index entry (if any).
func (st *txState) unindexDue(s *stored) error {
	if s.Due.IsZero() {
		return nil
	}
	r := s.ref()
	return st.due.Delete(dueKey(st.scratch[:0], s.Due, r.hk, r.fp))
}

// finishRevisit applies the revisit part of a result to s, which becomes
// COMPLETED: its Page, its change history, and its next Due (indexed).
func (st *txState) finishRevisit(s *stored, r *Result) error {
	if !s.Due.IsZero() {
		st.revisits-- // a released revisit, fetched now
	}
	if r.Page != nil {
		s.Page.ETag, s.Page.LastModified, s.Page.Archived = r.Page.ETag, r.Page.LastModified, r.Page.Archived
		s.Page.Digest = r.Page.Digest
	}
	s.Page.record(r.Change)
	s.Due = time.Time{}
	if r.Revisit.Interval <= 0 {
		s.Page.Interval = 0
		return nil
	}
	s.Page.Interval = r.Revisit.Next(s.Page.Interval, r.Change)
	s.Due = st.now.Add(s.Page.Interval)
	return st.indexDue(s)
}

// DueFilter decides whether a due COMPLETED record is released here (see
// SetDueFilter).
type DueFilter func(Record) bool

// SetDueFilter makes ReleaseDue release a due record only when fn accepts
// it (nil: every one). A refused record (in a cluster: one another member
// owns now, a replica kept for it) stays COMPLETED and is looked at again
// one interval later. fn runs inside the write transaction: it must be
// quick and must not call the Frontier.
func (f *Frontier) SetDueFilter(fn DueFilter) {
	if fn == nil {
		f.dueFilter.Store(nil)
		return
	}
	f.dueFilter.Store(&fn)
}

// ReleaseDue moves at most limit (<= 0: BatchSize) COMPLETED URLs whose Due
// <= now back to IN_LIST at their original queue position, and reports how
// many it moved. It reads the due index from its first key only as far as
// the first URL not due yet.
func (f *Frontier) ReleaseDue(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = f.opts.BatchSize
	}
	return f.submit(ctx, &op{kind: opFunc, name: "release due", n: limit, fn: func(st *txState) (int, error) {
		return st.releaseDue(now, limit)
	}})
}

// recheckAfter is the least time a refused due record waits before it is
// looked at again; one with a longer interval waits its interval. A
// refused record is another member's (a replica) or waits for an absent
// member: its due time moves on by no more than the owner's own schedule
// would (or this floor, for a record moved here with its due time about
// now, whose interval is not known), so that a member that takes the
// record over (a rebalance ships the due time) is late by at most that.
const recheckAfter = 5 * time.Second

func (st *txState) releaseDue(now time.Time, limit int) (int, error) {
	var keys [][]byte
	c := st.due.Cursor()
	end := uint64(unixNano(now))
	for k, _ := c.First(); k != nil && len(keys) < limit; k, _ = c.Next() {
		if len(k) != dueKeyLen || binary.BigEndian.Uint64(k) > end {
			break
		}
		keys = append(keys, bytes.Clone(k))
	}
	var filter DueFilter
	if p := st.f.dueFilter.Load(); p != nil {
		filter = *p
	}
	n := 0
	for _, k := range keys {
		if err := st.due.Delete(k); err != nil {
			return 0, err
		}
		hk, fp, _ := parseRecKey(k[8:])
		s, ok, err := st.get(keyRef{hk, fp})
		if err != nil {
			return 0, err
		}
		if !ok || s.State != Completed || uint64(max(unixNano(s.Due), 1)) != binary.BigEndian.Uint64(k) {
			st.ignored++ // a stale entry
			continue
		}
		if filter != nil && !filter(s.Record) {
			s.Due = now.Add(max(s.Page.Interval, recheckAfter))
			if err := st.indexDue(&s); err != nil {
				return 0, err
			}
			if err := st.putRecord(&s); err != nil {
				return 0, err
			}
			continue
		}
		s.State, s.Tries = InList, 0 // a new round: its own tries (fetch.max_tries)
		if err := st.enqueue(&s); err != nil {
			return 0, err
		}
		if err := st.putRecord(&s); err != nil {
			return 0, err
		}
		st.cnt[cCompleted]--
		st.cnt[cInList]++
		st.revisits++
		n++
	}
	return n, nil
}

// NextDue returns the earliest Due in the due index, false when no URL is
// waiting for a revisit (or on a read error, which is logged).
func (f *Frontier) NextDue() (time.Time, bool) {
	var t time.Time
	var ok bool
	err := f.view(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bDue).Cursor().First()
		if len(k) == dueKeyLen {
			t, ok = fromUnixNano(int64(binary.BigEndian.Uint64(k))), true
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrClosed) {
		f.log.Error("next due", "error", err)
	}
	return t, ok
}

// DueURLs returns how many URLs are due for a revisit at now and not
// fetched yet: those released to the queue (Revisits) plus those whose
// Due has passed and that wait in the due index (counted up to limit).
func (f *Frontier) DueURLs(now time.Time, limit int) int64 {
	n := 0
	end := uint64(unixNano(now))
	err := f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bDue).Cursor()
		for k, _ := c.First(); k != nil && n < limit; k, _ = c.Next() {
			if len(k) != dueKeyLen || binary.BigEndian.Uint64(k) > end {
				break
			}
			n++
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrClosed) {
		f.log.Error("count due URLs", "error", err)
	}
	return int64(n) + f.Revisits()
}

// Revisits returns how many revisits were released to the queue and not
// fetched yet (persisted).
func (f *Frontier) Revisits() int64 { return f.revisits.Load() }

// requeueDone queues the COMPLETED record of u again as a revisit due at
// u.due (a revisit another member released and moved here); other states
// are left alone.
func (st *txState) requeueDone(u *pendingURL) error {
	s, ok, err := st.get(keyRef{u.hk, u.fp})
	if err != nil || !ok || s.State != Completed {
		return err
	}
	if err := st.unindexDue(&s); err != nil {
		return err
	}
	s.State, s.Due, s.Tries = InList, u.due, 0
	if err := st.enqueue(&s); err != nil {
		return err
	}
	if err := st.putRecord(&s); err != nil {
		return err
	}
	st.cnt[cCompleted]--
	st.cnt[cInList]++
	st.revisits++
	return nil
}

// dueIfModified makes the COMPLETED record of u due now when it waits for
// a revisit (a Due) later than now and its last capture is older than
// u.mod (a sitemap's <lastmod>); other records, and records without a
// capture time, keep their schedule.
func (st *txState) dueIfModified(u *pendingURL) error {
	s, ok, err := st.get(keyRef{u.hk, u.fp})
	if err != nil || !ok || s.State != Completed || s.Due.IsZero() || !s.Due.After(st.now) {
		return err
	}
	if s.Page.Archived.IsZero() || !u.mod.After(s.Page.Archived) {
		return nil
	}
	if err := st.unindexDue(&s); err != nil {
		return err
	}
	s.Due = st.now
	if err := st.indexDue(&s); err != nil {
		return err
	}
	return st.putRecord(&s)
}

// Hosts returns the statistics of at most limit hosts (<= 0: 1000) in
// name order, starting after the host after ("" = from the first); next
// is the last host returned, "" when the end was reached.
func (f *Frontier) Hosts(after string, limit int) (hosts []HostStats, next string, err error) {
	if limit <= 0 {
		limit = 1000
	}
	err = f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bHosts).Cursor()
		var k, v []byte
		if after == "" {
			k, v = c.First()
		} else if k, v = c.Seek([]byte(after)); k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil; k, v = c.Next() {
			if len(hosts) == limit {
				next = hosts[len(hosts)-1].Host
				return nil
			}
			h, err := decodeHost(string(k), v)
			if err != nil {
				return err
			}
			hosts = append(hosts, h)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("frontier: hosts after %q: %w", after, err)
	}
	return hosts, next, nil
}

// maxHostDueScan bounds the records HostNextDue reads.
const maxHostDueScan = 10000

// HostNextDue returns the earliest Due of host's URLs (a COMPLETED URL
// waiting for its revisit, or a queued revisit), false when none has one or
// the host has more than 10,000 records to read.
func (f *Frontier) HostNextDue(host string) (time.Time, bool, error) {
	host = normHost(host)
	prefix := binary.BigEndian.AppendUint32(nil, HostKey(host))
	var t time.Time
	ok := false
	err := f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bURLs).Cursor()
		n := 0
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if n++; n > maxHostDueScan {
				t, ok = time.Time{}, false
				return nil
			}
			_, fp, _ := parseRecKey(k)
			s, err := decodeRecord(fp, v)
			if err != nil {
				return err
			}
			if s.Host == host && !s.Due.IsZero() && (!ok || s.Due.Before(t)) {
				t, ok = s.Due, true
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("frontier: next due of %s: %w", host, err)
	}
	return t, ok, nil
}

// AddRoundTimeAsync adds d, the time one of host's trips held a worker, to
// the host's current round (HostStats.RoundTime), without waiting for the
// commit (see Pending; Pending.Host then has the host's statistics). A host
// without statistics here (another member's, lent) is left alone. Submitted
// after the trip's results, it counts in the round they count in.
func (f *Frontier) AddRoundTimeAsync(ctx context.Context, host string, d time.Duration) *Pending {
	host = normHost(host)
	hs := &HostStats{}
	p := &Pending{reply: make(chan opReply, 1), host: hs}
	if d <= 0 || host == "" {
		p.reply <- opReply{}
		return p
	}
	o := &op{kind: opFunc, name: "round time", ctx: ctx, reply: p.reply, fn: func(st *txState) (int, error) {
		*hs = HostStats{} // only what this run of the write found
		if _, cached := st.hostCache[host]; !cached && st.hosts.Get([]byte(host)) == nil {
			return 0, nil
		}
		h, err := st.host(host)
		if err != nil {
			return 0, fmt.Errorf("round time of %s: %w", host, err)
		}
		h.RoundTime += d
		*hs = *h
		return 1, nil
	}}
	if err := f.send(ctx, o); err != nil {
		p.reply <- opReply{err: err}
	}
	return p
}
