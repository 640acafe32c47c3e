package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// Kind tells the owner how to file an exchanged URL.
type Kind uint8

const (
	// KindNew is a discovered URL: the owner adds it as IN_LIST (dedup).
	KindNew Kind = 0
	// KindDone is a COMPLETED record moved by a rebalance: the owner keeps
	// it as completed so that it is never crawled again.
	KindDone Kind = 1
	// KindMoved is an IN_LIST (or STALLED) record moved by a rebalance or a
	// leave's hand-off: the receiver adds it as IN_LIST (dedup) without
	// forwarding it, since the sender chose it as the owner. Receivers
	// before this kind refuse such batches; the sender keeps them and
	// retries until the receiver is upgraded.
	KindMoved Kind = 2
	// KindReplica is the fingerprint (with its URL) of a page its owner
	// fetched, sent to the URL's second-ranked member (Ring.Top2), which
	// keeps it as COMPLETED (reason "replica") so that, should the owner
	// fail, the URL is not crawled again by the member that takes its share.
	KindReplica Kind = 3
	// KindScope carries a seed host (Host; URL empty) to every member: with
	// no allow_hosts or allow_domains configured the seeds' hosts are the
	// crawl's scope, and every member must judge links by the same set.
	// A member files the entries under every other member before it routes
	// the seeds on those hosts, and sends its whole set to a member it sees
	// come alive (a join, a restart, a heal) before it moves records to it:
	// a member's queue is delivered in order, so a member knows a seed's
	// host before it fetches the seed or anything found from it.
	KindScope Kind = 4
	// KindRobots carries a robots.txt a member fetched (robots.Record)
	// to every other member, so that a host's robots.txt is fetched once
	// per TTL by the whole cluster: Host is the record's key
	// (scheme://host[:port]), Depth its HTTP status (0: unreachable), URL
	// the fetch time in Unix milliseconds, a newline and the canonical
	// body.
	KindRobots Kind = 5
	// KindLend lends an IN_LIST URL to the member that works on its
	// host's phase now (cluster.lend, lend.go); the owner keeps the
	// record. Host is the URL's host, a newline, the epoch it is lent for
	// and the URL's tries; Depth and Redirects as KindNew. For that member
	// alone: dropped once it is gone, and by it when the epoch is over.
	KindLend Kind = 6
	// KindOutcome reports the outcome of a lent URL's fetch to its owner,
	// which settles the record as if it had fetched it. Host is the URL's
	// host, a newline, then state, HTTP status, retry time (Unix ms), body
	// bytes, delay (ms) and reason; routed to the URL's owner as KindNew.
	KindOutcome Kind = 7
	// KindFacets carries facet sets a member admitted (scope.max_query_sets,
	// urlscope.FacetSet) to every other member, which counts them as its own
	// (facets.go): URL is the sets' Path and Set hashes, 16 bytes a set,
	// big-endian; Host and Depth are empty. A receiver that predates it
	// refuses the batch and the sender keeps it until the receiver is
	// upgraded (as for the other kinds; members run the same version).
	KindFacets Kind = 8
	// KindCopied is a COMPLETED record moved by a rebalance from a member
	// that kept it only as a replica (or as such a copy), sent to the
	// URL's owner and to its second-ranked member: its due time may be
	// behind the owner's, so it does not replace a COMPLETED record there
	// (frontier.ReasonCopied), and the owner's own copy (KindDone)
	// replaces it when it comes.
	KindCopied Kind = 9
	maxKind         = KindCopied
)

// Limits of an exchanged entry, enforced by Outbox.Put and by the decoder.
const (
	MaxEntryURL   = 64 << 10 // bytes of a URL
	MaxEntryHost  = 1 << 10  // bytes of a host
	MaxEntryDepth = 1 << 20
)

// Entry is one URL in the outbox or in a batch.
type Entry struct {
	Kind Kind
	frontier.NewURL
}

// Batch is the unit the exchange sends: an ID unique per sender (kept in the
// outbox, so a resend after a lost ack has the same ID) and its entries.
type Batch struct {
	ID      uint64
	Entries []Entry
}

// Message types on the wire.
const (
	msgBatch byte = 1
	msgAck   byte = 2
)

// ack answers a batch. Status 0 = stored (Added new); otherwise the receiver
// could not store it (Msg says why) and the sender retries later. Lent are
// new URLs of the batch that the receiver, their owner, lends back to the
// sender at once (KindLend entries, Config.Lender).
type ack struct {
	ID     uint64
	Added  uint64
	Status uint64
	Msg    string
	Lent   []Entry
}

var errTrunc = errors.New("truncated")

// FacetSize is the bytes of one set in a KindFacets entry: its Path and
// Set hashes, big-endian.
const FacetSize = 16

// checkFacets checks a KindFacets entry's fields (checkEntry).
func checkFacets(e Entry) error {
	if e.Host != "" || len(e.URL)%FacetSize != 0 || e.Depth != 0 {
		return fmt.Errorf("facets entry: must have no host, no depth and %d bytes a set (has %d bytes)", FacetSize, len(e.URL))
	}
	return nil
}

func checkEntry(e Entry) error {
	switch {
	case e.Kind > maxKind:
		return fmt.Errorf("kind %d: must be 0 (new), 1 (done), 2 (moved), 3 (replica), 4 (scope), 5 (robots), 6 (lend), 7 (outcome), 8 (facets) or 9 (copied)", e.Kind)
	case e.Kind == KindRobots && e.Host == "":
		return fmt.Errorf("robots entry: must have a host")
	case e.Kind == KindScope && (e.Host == "" || e.URL != ""):
		return fmt.Errorf("scope entry: must have a host and no URL")
	case e.Kind != KindScope && (e.URL == "" || len(e.URL) > MaxEntryURL):
		return fmt.Errorf("url of %d bytes: must be 1..%d", len(e.URL), MaxEntryURL)
	case e.Kind == KindFacets:
		return checkFacets(e)
	case len(e.Host) > MaxEntryHost:
		return fmt.Errorf("host of %d bytes: at most %d", len(e.Host), MaxEntryHost)
	case e.Depth < 0 || e.Depth > MaxEntryDepth:
		return fmt.Errorf("depth %d: must be 0..%d", e.Depth, MaxEntryDepth)
	}
	return nil
}

// kindRedirects, set in an entry's kind byte, says that a byte with the
// redirect chain length (NewURL.Redirects) follows it. Entries without it
// are encoded as before it existed, so an outbox written then still reads.
const kindRedirects = 0x80

// MaxEntryRedirects is the longest redirect chain an entry carries.
const MaxEntryRedirects = 255

// kindDue, set in an entry's kind byte, says that a uvarint follows (after
// the redirect byte, if any): NewURL.Due in Unix milliseconds, when a
// record moved by a rebalance is due to be fetched again (recurring
// crawls). Entries without a Due are encoded as before it existed; a
// receiver that predates it refuses the batch (an unknown kind) and the
// sender keeps it until the receiver is upgraded. A KindNew entry, which
// never has a Due, carries its NewURL.LastMod (a sitemap's <lastmod>) in
// the same field.
const kindDue = 0x40

// kindRun, set in an entry's kind byte, says that a uvarint follows (after
// the Due, if any): NewURL.Run, the steps on the way the URL was found
// (urlscope.TrapConfig.Run), which its owner keeps in its record so that the
// member that fetches the URL counts the runs of its links from it.
// Entries with run 0 are encoded as before it existed; a receiver that
// predates it refuses a batch with a run (an unknown kind) and the sender
// keeps it until the receiver is upgraded.
const kindRun = 0x20

// MaxEntryRun is the largest run an entry carries
// (scope.max_pattern_depth is at most 100,000).
const MaxEntryRun = 1 << 20

// appendEntry encodes e: kind (| kindRedirects, kindDue, kindRun for the
// fields that follow when set), the redirect chain length, the Due or
// LastMod (uvarint Unix ms), the run (uvarint), then uvarint depth,
// uvarint-length host, uvarint-length URL.
func appendEntry(b []byte, e Entry) []byte {
	k := byte(e.Kind)
	r := min(max(e.Redirects, 0), MaxEntryRedirects)
	if r > 0 {
		k |= kindRedirects
	}
	run := min(max(e.Run, 0), MaxEntryRun)
	if run > 0 {
		k |= kindRun
	}
	at := e.Due
	if e.Kind == KindNew {
		at = e.LastMod
	}
	due := at.UnixMilli()
	if !at.IsZero() && due > 0 {
		k |= kindDue
	}
	b = append(b, k)
	if r > 0 {
		b = append(b, byte(r))
	}
	if k&kindDue != 0 {
		b = binary.AppendUvarint(b, uint64(due))
	}
	if run > 0 {
		b = binary.AppendUvarint(b, uint64(run))
	}
	b = binary.AppendUvarint(b, uint64(e.Depth))
	b = binary.AppendUvarint(b, uint64(len(e.Host)))
	b = append(b, e.Host...)
	b = binary.AppendUvarint(b, uint64(len(e.URL)))
	return append(b, e.URL...)
}

// decoder reads a buffer without ever panicking.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.err = errTrunc
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str(max int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(max) {
		d.err = fmt.Errorf("string of %d bytes exceeds %d", n, max)
		return ""
	}
	if uint64(len(d.b)) < n {
		d.err = errTrunc
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) entry() Entry {
	var e Entry
	k := d.byte()
	if k&kindRedirects != 0 {
		e.Redirects = int(d.byte())
	}
	e.Kind = Kind(k &^ kindRedirects) // an unknown kind is reported whole by checkEntry
	base := Kind(k &^ (kindRedirects | kindDue | kindRun))
	if base <= maxKind {
		e.Kind = Kind(k &^ (kindRedirects | kindRun))
	}
	if base <= maxKind && k&kindDue != 0 {
		e.Kind = base
		if ms := d.uvarint(); d.err == nil {
			if ms > 1<<53 {
				d.err = fmt.Errorf("due %d ms out of range", ms)
				return e
			}
			// ms 0 is never encoded (a Due at or before the epoch is not
			// sent): read as none, so the entry re-encodes the same.
			if ms > 0 {
				e.Due = time.UnixMilli(int64(ms))
				if base == KindNew {
					e.Due, e.LastMod = time.Time{}, e.Due
				}
			}
		}
	}
	if base <= maxKind && k&kindRun != 0 {
		run := d.uvarint()
		if d.err == nil && (run == 0 || run > MaxEntryRun) {
			// 0 is never encoded: an entry decodes to what re-encodes the same.
			d.err = fmt.Errorf("run %d: must be 1..%d", run, MaxEntryRun)
			return e
		}
		e.Run = int(run)
	}
	depth := d.uvarint()
	e.Host = d.str(MaxEntryHost)
	e.URL = d.str(MaxEntryURL)
	if d.err != nil {
		return e
	}
	if depth > MaxEntryDepth {
		d.err = fmt.Errorf("depth %d exceeds %d", depth, MaxEntryDepth)
		return e
	}
	e.Depth = int(depth)
	if err := checkEntry(e); err != nil {
		d.err = err
	}
	return e
}

// entries reads a uvarint count and that many entries.
func (d *decoder) entries() []Entry {
	n := d.uvarint()
	// Each entry takes at least 4 bytes: bound the allocation by the input.
	if d.err == nil && n > uint64(len(d.b)/4) {
		d.err = fmt.Errorf("count %d does not fit in %d bytes", n, len(d.b))
	}
	if d.err != nil {
		return nil
	}
	es := make([]Entry, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		es = append(es, d.entry())
	}
	return es
}

// decodeEntry decodes one stored entry.
func decodeEntry(b []byte) (Entry, error) {
	d := decoder{b: b}
	e := d.entry()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return Entry{}, fmt.Errorf("cluster: decode entry: %w", d.err)
	}
	return e, nil
}

// EncodeBatch encodes a batch message: type 1, uvarint ID, uvarint count, entries.
func EncodeBatch(b Batch) []byte {
	n := 16
	for _, e := range b.Entries {
		n += 8 + len(e.Host) + len(e.URL)
	}
	buf := make([]byte, 0, n)
	buf = append(buf, msgBatch)
	buf = binary.AppendUvarint(buf, b.ID)
	buf = binary.AppendUvarint(buf, uint64(len(b.Entries)))
	for _, e := range b.Entries {
		buf = appendEntry(buf, e)
	}
	return buf
}

// DecodeBatch decodes a batch message. It returns an error, never panics, on
// malformed input, and never allocates more than the input can describe.
func DecodeBatch(p []byte) (Batch, error) {
	d := decoder{b: p}
	if t := d.byte(); d.err == nil && t != msgBatch {
		return Batch{}, fmt.Errorf("cluster: decode batch: message type %d, want %d", t, msgBatch)
	}
	var b Batch
	b.ID = d.uvarint()
	b.Entries = d.entries()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return Batch{}, fmt.Errorf("cluster: decode batch: %w", d.err)
	}
	return b, nil
}

func encodeAck(a ack) []byte {
	b := []byte{msgAck}
	b = binary.AppendUvarint(b, a.ID)
	b = binary.AppendUvarint(b, a.Added)
	b = binary.AppendUvarint(b, a.Status)
	b = binary.AppendUvarint(b, uint64(len(a.Msg)))
	b = append(b, a.Msg...)
	b = binary.AppendUvarint(b, uint64(len(a.Lent)))
	for _, e := range a.Lent {
		b = appendEntry(b, e)
	}
	return b
}

func decodeAck(p []byte) (ack, error) {
	d := decoder{b: p}
	if t := d.byte(); d.err == nil && t != msgAck {
		return ack{}, fmt.Errorf("cluster: decode ack: message type %d, want %d", t, msgAck)
	}
	a := ack{ID: d.uvarint(), Added: d.uvarint(), Status: d.uvarint(), Msg: d.str(4096)}
	if a.Lent = d.entries(); len(a.Lent) == 0 {
		a.Lent = nil
	}
	for _, e := range a.Lent {
		if d.err == nil && e.Kind != KindLend {
			d.err = fmt.Errorf("lent entry of kind %d, want %d (lend)", e.Kind, KindLend)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return ack{}, fmt.Errorf("cluster: decode ack: %w", d.err)
	}
	return a, nil
}
