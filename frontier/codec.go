package frontier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// On-disk encodings. Every value starts with a version byte so the layout can
// evolve; integers are encoding/binary varints, strings are uvarint length +
// bytes, times are Unix nanoseconds (0 = zero time). Keys are big-endian so
// bbolt's byte order is numeric order.

const (
	recordVersion = 1
	queueVersion  = 1
	hostVersion   = 1
)

var errShort = errors.New("truncated value")

// stored is a Record plus its queue sequence number: the URL's index in the
// paper's URLStates array, kept for its whole life so Requeue and the retry
// lane put it back at its original position.
type stored struct {
	Record
	seq uint64
}

// recKeyLen is the length of a `records` or `running` key: the host's
// HostKey, then the fingerprint.
const recKeyLen = 12

// HostKey is the first part of a record's key: the top 32 bits of the
// host's HostHash. Records are kept in host order, so the writes of one host
// trip (its pages' results, and the links to their own host they add) touch
// a few bbolt pages instead of one page per URL.
func HostKey(host string) uint32 { return uint32(HostHash(host) >> 32) }

// recKey is the key of the record of the URL with fingerprint fp on the
// host with HostKey hk: hk (uint32 BE) | fp (uint64 BE).
func recKey(buf []byte, hk uint32, fp uint64) []byte {
	buf = binary.BigEndian.AppendUint32(buf, hk)
	return binary.BigEndian.AppendUint64(buf, fp)
}

// parseRecKey splits a record key; ok is false when k is not one.
func parseRecKey(k []byte) (hk uint32, fp uint64, ok bool) {
	if len(k) != recKeyLen {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(k), binary.BigEndian.Uint64(k[4:]), true
}

// queueKey is phase (uint16 BE) | seq (uint64 BE): a phase's entries are one
// contiguous key range in insertion order.
func queueKey(buf []byte, phase int, seq uint64) []byte {
	buf = binary.BigEndian.AppendUint16(buf, uint16(phase))
	return binary.BigEndian.AppendUint64(buf, seq)
}

const queueKeyLen = 10

// stalledKey is retryAt (Unix ns, uint64 BE) | the record's key: the retry
// lane in due order.
func stalledKey(buf []byte, retryAt time.Time, hk uint32, fp uint64) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(unixNano(retryAt)))
	return recKey(buf, hk, fp)
}

const stalledKeyLen = 8 + recKeyLen

// unixNano maps t to non-negative Unix nanoseconds (0 for the zero time and
// anything before 1970).
func unixNano(t time.Time) int64 {
	if t.IsZero() || t.Unix() < 0 {
		return 0
	}
	if t.Year() > 2262 {
		return 1<<63 - 1
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n <= 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// reader decodes a value; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.err = errShort
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errShort
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

// maxRun bounds a stored run (Record.Run): scope.max_pattern_depth is at
// most 100,000, and no admitted URL's run is over it.
const maxRun = 1 << 20

// run reads a uvarint Record.Run.
func (r *reader) run() int {
	v := r.uvarint()
	if r.err == nil && v > maxRun {
		r.err = fmt.Errorf("run %d exceeds %d", v, maxRun)
		return 0
	}
	return int(v)
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errShort
		return ""
	}
	s := string(r.b[:n]) // copies out of the mmap
	r.b = r.b[n:]
	return s
}

func (r *reader) version(want byte) {
	if v := r.byte(); r.err == nil && v != want {
		r.err = fmt.Errorf("unknown version %d", v)
	}
}

// appendRecord encodes the `records` bucket value (the key is recKey).
func appendRecord(buf []byte, s *stored) []byte {
	buf = append(buf, recordVersion, byte(s.State))
	buf = binary.AppendUvarint(buf, s.seq)
	buf = binary.AppendVarint(buf, int64(s.Depth))
	buf = binary.AppendVarint(buf, int64(s.Tries))
	buf = binary.AppendVarint(buf, int64(s.Status))
	buf = binary.AppendVarint(buf, unixNano(s.Discovered))
	buf = binary.AppendVarint(buf, unixNano(s.Fetched))
	buf = binary.AppendVarint(buf, unixNano(s.NextTry))
	buf = appendString(buf, s.Reason)
	buf = appendString(buf, s.Host)
	buf = appendString(buf, s.URL)
	buf = appendPageTail(buf, s)
	if s.Run > 0 {
		// After the page tail, which a record with a Run always has:
		// a version that reads no run ignores it, and a record
		// without one (0, or written before runs were kept) ends there.
		buf = binary.AppendUvarint(buf, uint64(s.Run))
	}
	return buf
}

func decodeRecord(fp uint64, v []byte) (stored, error) {
	r := reader{b: v}
	r.version(recordVersion)
	var s stored
	s.FP = fp
	s.State = State(r.byte())
	s.seq = r.uvarint()
	s.Depth = int(r.varint())
	s.Tries = int(r.varint())
	s.Status = int(r.varint())
	s.Discovered = fromUnixNano(r.varint())
	s.Fetched = fromUnixNano(r.varint())
	s.NextTry = fromUnixNano(r.varint())
	s.Reason = r.string()
	s.Host = r.string()
	s.URL = r.string()
	r.pageTail(&s)
	if r.err == nil && len(r.b) > 0 {
		s.Run = r.run()
	}
	if r.err == nil && (s.State < InList || s.State > Stalled) {
		r.err = fmt.Errorf("bad state %d", s.State)
	}
	if r.err != nil {
		return stored{}, fmt.Errorf("frontier: record %016x: corrupt: %w", fp, r.err)
	}
	return s, nil
}

// appendQueueValue encodes a `queue` entry: a compact copy of what Scan
// returns, so a scan never looks up the `records` bucket.
func appendQueueValue(buf []byte, s *stored) []byte {
	buf = append(buf, queueVersion)
	buf = binary.BigEndian.AppendUint64(buf, s.FP)
	buf = binary.AppendVarint(buf, int64(s.Depth))
	buf = binary.AppendVarint(buf, int64(s.Tries))
	buf = binary.AppendVarint(buf, unixNano(s.Discovered))
	buf = appendString(buf, s.Host)
	buf = appendString(buf, s.URL)
	if !s.Due.IsZero() || s.Run > 0 { // a revisit's Due (0 before a run; absent otherwise, and before recurring crawls)
		buf = binary.AppendVarint(buf, unixNano(s.Due))
	}
	if s.Run > 0 { // after the Due (0: none); absent when 0, and before runs were kept
		buf = binary.AppendUvarint(buf, uint64(s.Run))
	}
	return buf
}

func decodeQueueValue(v []byte) (Record, error) {
	r := reader{b: v}
	r.version(queueVersion)
	rec := Record{State: InList}
	rec.FP = r.u64()
	rec.Depth = int(r.varint())
	rec.Tries = int(r.varint())
	rec.Discovered = fromUnixNano(r.varint())
	rec.Host = r.string()
	rec.URL = r.string()
	if r.err == nil && len(r.b) > 0 {
		rec.Due = fromUnixNano(r.varint())
	}
	if r.err == nil && len(r.b) > 0 {
		rec.Run = r.run()
	}
	if r.err != nil {
		return Record{}, fmt.Errorf("frontier: queue entry: corrupt: %w", r.err)
	}
	return rec, nil
}

// queueValueHost returns the host of a queue entry without decoding the rest.
func queueValueHost(v []byte) (string, error) {
	h, err := queueValueHostBytes(v)
	return string(h), err
}

// queueValueHostBytes is queueValueHost without a copy: the result aliases v.
// The scheduler calls it for every record it scans, so the three varints
// before the host are skipped, not decoded (same errors as decoding them).
func queueValueHostBytes(v []byte) ([]byte, error) {
	r := reader{b: v}
	r.version(queueVersion)
	r.u64()
	for range 3 { // depth, tries, discovered
		if r.err != nil {
			break
		}
		k := varintLen(r.b)
		if k <= 0 {
			r.err = errShort
			break
		}
		r.b = r.b[k:]
	}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = errShort
	}
	if r.err != nil {
		return nil, fmt.Errorf("frontier: queue entry: corrupt: %w", r.err)
	}
	return r.b[:n], nil
}

// varintLen is the length of the varint b starts with, as binary.Varint
// would read it: 0 if b is too short, -1 on overflow.
func varintLen(b []byte) int {
	for i, c := range b {
		if i == binary.MaxVarintLen64 {
			return -1
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return -1
			}
			return i + 1
		}
	}
	return 0
}

func appendHost(buf []byte, h *HostStats) []byte {
	buf = append(buf, hostVersion)
	buf = binary.AppendVarint(buf, h.Admitted)
	buf = binary.AppendVarint(buf, h.Fetched)
	buf = binary.AppendVarint(buf, h.Errors)
	buf = binary.AppendVarint(buf, h.Bytes)
	buf = binary.AppendVarint(buf, unixNano(h.LastFetch))
	buf = binary.AppendVarint(buf, int64(h.Delay))
	if h.RoundFetched == 0 && h.LastRoundFetched == 0 && h.RoundTime == 0 && h.LastRoundTime == 0 {
		return buf // as before rounds were kept
	}
	for _, v := range []int64{h.RoundFetched, h.RoundBytes, h.LastRoundFetched, h.LastRoundBytes} {
		buf = binary.AppendVarint(buf, v)
	}
	if h.RoundTime == 0 && h.LastRoundTime == 0 {
		return buf // as before round times were kept
	}
	buf = binary.AppendVarint(buf, int64(h.RoundTime))
	return binary.AppendVarint(buf, int64(h.LastRoundTime))
}

func decodeHost(host string, v []byte) (HostStats, error) {
	r := reader{b: v}
	r.version(hostVersion)
	h := HostStats{Host: host}
	h.Admitted = r.varint()
	h.Fetched = r.varint()
	h.Errors = r.varint()
	h.Bytes = r.varint()
	h.LastFetch = fromUnixNano(r.varint())
	if len(r.b) > 0 { // absent in records written before Delay was kept
		h.Delay = time.Duration(r.varint())
	}
	if len(r.b) > 0 { // absent before rounds were kept, and before a host's first fetch
		h.RoundFetched, h.RoundBytes = r.varint(), r.varint()
		h.LastRoundFetched, h.LastRoundBytes = r.varint(), r.varint()
	}
	if len(r.b) > 0 { // absent before round times were kept, and before a host's first trip time
		h.RoundTime, h.LastRoundTime = time.Duration(r.varint()), time.Duration(r.varint())
	}
	if r.err != nil {
		return HostStats{}, fmt.Errorf("frontier: host %q: corrupt stats: %w", host, r.err)
	}
	return h, nil
}

// slab hands out byte slices that stay valid until the transaction commits:
// bbolt keeps references to Put's key and value until then, so buffers must
// not be reused within a transaction.
type slab struct{ cur []byte }

const slabChunk = 64 << 10

// take returns a zero-length slice with capacity n carved from the slab.
func (s *slab) take(n int) []byte {
	if n > slabChunk/4 {
		return make([]byte, 0, n)
	}
	if cap(s.cur)-len(s.cur) < n {
		s.cur = make([]byte, 0, slabChunk)
	}
	b := s.cur[len(s.cur) : len(s.cur) : len(s.cur)+n]
	s.cur = s.cur[:len(s.cur)+n]
	return b
}

// copy returns a slab-backed copy of b.
func (s *slab) copy(b []byte) []byte {
	return append(s.take(len(b)), b...)
}
