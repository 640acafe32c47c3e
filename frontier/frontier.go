package frontier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket names. See doc.go for the layout.
var (
	bURLs       = []byte("records")
	bQueue      = []byte("queue")
	bInProgress = []byte("running")
	bStalled    = []byte("retry")
	bHosts      = []byte("hosts")
	bMeta       = []byte("meta")
	allBuckets  = [][]byte{bURLs, bQueue, bInProgress, bStalled, bHosts, bMeta}
)

// Keys of the meta bucket.
var (
	mFormat  = []byte("format")  // formatMarker
	mVersion = []byte("version") // formatVersion (1 byte)
	mSeq     = []byte("seq")     // last queue sequence number (uint64 BE)
	mNPhase  = []byte("nphase")  // Nphase the queue is keyed for (uint64 BE)
	mRekey   = []byte("rekey")   // present while SetPhases re-keys the queue
	mUnit    = []byte("unit")    // Options.UnitName the queue is keyed for (absent: "host")
	mCounts  = []byte("counts")  // per-state counters, numCounters × uint64 BE
)

const (
	formatMarker  = "phasecrawl-frontier"
	formatVersion = 2 // 1: records by fingerprint alone (see migrate.go)
)

// Counter slots, in the order they are persisted.
const (
	cInList = iota
	cInProgress
	cCompleted
	cStalled
	cSkipped
	numCounters
)

// scanChunk bounds how many records one Scan read transaction decodes.
const scanChunk = 1024

// opQueue is how many writes may wait for the writer. A commit (apply and
// fsync) takes ~10 ms under load; while it runs, each worker's page write
// waits here, and a full queue stops the worker until the commit ends.
// With room for 64, the workers stalled on it for half of every commit and
// the process was idle for ~12% of a crawl; 1,024 keep them fetching:
// +3-7% pages/s on the large synthetic web (a write is a page's result and
// links, a few KiB: a few MiB at most).
const opQueue = 1024

// Frontier is the node's persistent URL store. All methods are safe for
// concurrent use. Writes go through one writer goroutine (see writer.go);
// reads use short bbolt read transactions.
type Frontier struct {
	opts Options
	db   *bolt.DB
	log  *slog.Logger

	nphase     atomic.Int64
	maxPerHost atomic.Int64              // Options.MaxPerHost, or what SetMaxPerHost set
	cnt        [numCounters]atomic.Int64 // mirrors of the persisted counters

	mu     sync.RWMutex // guards closed against sends on ops
	closed bool
	ops    chan *op
	quit   chan struct{}
	hurry  chan struct{} // Hurry: a caller waits for the writes gathered (cap 1)
	done   chan struct{}
	once   sync.Once
	cerr   error

	beforeCommit atomic.Pointer[func()] // SetBeforeCommit
	fault        atomic.Pointer[Fault]  // SetFault
	undurable    atomic.Int64           // results put back to IN_LIST (Result.Durable), for Undurable
	dueFilter    atomic.Pointer[DueFilter]
	revisits     atomic.Int64 // mirror of the persisted mRevisits
	digests      *digestCache // the digest index's entries in memory (digest.go)

	// Owned by the writer goroutine (and Open, before it starts).
	seq       uint64
	wcnt      [numCounters]int64
	wrevisits int64
}

// SetMaxPerHost changes how many URLs per host Add admits from now on
// (0 = unlimited): in a cluster, this node's part of the cluster's
// scope.max_pages_per_host. URLs admitted before stay.
func (f *Frontier) SetMaxPerHost(n int) { f.maxPerHost.Store(int64(max(n, 0))) }

// SetBeforeCommit makes the writer call fn before each write transaction
// that records callers' changes (nil: none). Whatever fn makes durable is
// so before any change of that transaction is: the node flushes its WARC
// and crawl-log buffers there, so a page recorded as fetched is in both
// files. fn runs on the writer goroutine and delays every commit by its
// duration; it must not write to the Frontier (the write would wait for
// the commit that waits for fn).
func (f *Frontier) SetBeforeCommit(fn func()) {
	if fn == nil {
		f.beforeCommit.Store(nil)
		return
	}
	f.beforeCommit.Store(&fn)
}

// Fault, when set (SetFault), is asked in each write transaction that
// records callers' changes, after they are applied: an error it returns
// fails the commit as the file system would (ENOSPC), and nothing of the
// transaction is written (fault injection, for tests of what depends on
// the frontier's write errors).
type Fault func() error

// SetFault sets the fault asked in each write transaction (nil: none).
func (f *Frontier) SetFault(fn Fault) {
	if fn == nil {
		f.fault.Store(nil)
		return
	}
	f.fault.Store(&fn)
}

// Undurable returns how many fetch results have been put back to IN_LIST
// since Open because their Result.Durable said their records were lost.
func (f *Frontier) Undurable() int64 { return f.undurable.Load() }

// Open opens or creates the frontier at opts.Path. It checks the file is a
// phasecrawl frontier (a foreign or corrupt file is an error, never a panic),
// waits at most 1s for bbolt's file lock (a second process gets a "locked by
// another process" error), re-keys the queue if opts.Phases differs from the
// stored Nphase (or a SetPhases was interrupted), and puts every IN_PROGRESS
// URL back to IN_LIST at its original queue position (kill -9 recovery).
func Open(opts Options) (*Frontier, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	db, err := openBolt(opts)
	if err != nil {
		return nil, err
	}
	f := &Frontier{
		opts:  opts,
		db:    db,
		log:   slog.Default().With("component", "frontier"),
		ops:   make(chan *op, opQueue),
		quit:  make(chan struct{}),
		hurry: make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	f.maxPerHost.Store(int64(opts.MaxPerHost))
	if f.digests, err = newDigestCache(opts.DigestCache); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("frontier: open %s: %w", opts.Path, err)
	}
	if err := f.init(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("frontier: open %s: %w", opts.Path, err)
	}
	go f.writer()
	return f, nil
}

// openBolt opens the bbolt file. The hashmap freelist keeps allocation cheap
// when the free list is fragmented by queue deletes, and NoFreelistSync
// avoids rewriting the whole free list on every commit (the price is a
// free-page scan at open; see the benchmarks). bbolt may panic on a garbage
// file, so the open is guarded.
func openBolt(o Options) (db *bolt.DB, err error) {
	bo := &bolt.Options{
		Timeout:        time.Second,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
		NoSync:         o.NoSync,
	}
	if o.arrayFreelist {
		bo.FreelistType = bolt.FreelistArrayType
	}
	if o.syncFreelist {
		bo.NoFreelistSync = false
	}
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("frontier: open %s: not a bbolt file or corrupt (%v)", o.Path, p)
		}
	}()
	if err := precheck(o.Path); err != nil {
		return nil, fmt.Errorf("frontier: open %s: not a bbolt file or corrupt: %w", o.Path, err)
	}
	db, err = bolt.Open(o.Path, 0o600, bo)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, bolt.ErrTimeout):
		return nil, fmt.Errorf("frontier: open %s: locked by another process (no lock within %s): %w", o.Path, bo.Timeout, err)
	case errors.Is(err, bolt.ErrInvalid), errors.Is(err, bolt.ErrChecksum), errors.Is(err, bolt.ErrVersionMismatch):
		return nil, fmt.Errorf("frontier: open %s: not a bbolt file or corrupt: %w", o.Path, err)
	default:
		return nil, fmt.Errorf("frontier: open %s: %w", o.Path, err)
	}
}

// guard turns a panic inside bbolt (a corrupt page) into an error.
func guard(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("frontier: corrupt database (%v)", p)
		}
	}()
	return fn()
}

func (f *Frontier) view(fn func(*bolt.Tx) error) error {
	f.mu.RLock()
	closed := f.closed
	f.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	err := guard(func() error { return f.db.View(fn) })
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return ErrClosed // Close ran between the check and the transaction
	}
	return err
}

func (f *Frontier) update(fn func(*bolt.Tx) error) error {
	return guard(func() error { return f.db.Update(fn) })
}

// init validates or creates the layout, then re-keys and recovers.
func (f *Frontier) init() error {
	var fresh, rekey, v1 bool
	var nphase uint64
	unit := "host"
	err := f.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if meta == nil {
			foreign := false
			_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				foreign = true
				return errors.New("stop")
			})
			if foreign {
				return fmt.Errorf("not a phasecrawl frontier: bbolt file without a %q bucket", bMeta)
			}
			fresh = true
			return nil
		}
		if m := meta.Get(mFormat); string(m) != formatMarker {
			return fmt.Errorf("not a phasecrawl frontier: format marker %q, want %q", m, formatMarker)
		}
		if v := meta.Get(mVersion); len(v) != 1 || v[0] != formatVersion && v[0] != 1 {
			return fmt.Errorf("unsupported frontier format version %v (this build reads 1 and %d)", v, formatVersion)
		} else {
			v1 = v[0] == 1
		}
		buckets := allBuckets
		if v1 {
			buckets = sharedBuckets // migrateV1 creates the others
		}
		if err := missingBucket(tx, buckets); err != nil {
			return err
		}
		var ok bool
		if f.seq, ok = metaU64(meta, mSeq); !ok {
			return errors.New("corrupt frontier: meta seq")
		}
		if nphase, ok = metaU64(meta, mNPhase); !ok || nphase < 1 || nphase > maxPhases {
			return errors.New("corrupt frontier: meta nphase")
		}
		rekey = meta.Get(mRekey) != nil
		if u := meta.Get(mUnit); u != nil {
			unit = string(u)
		}
		if v := meta.Get(mRevisits); len(v) == 8 {
			f.wrevisits = int64(binary.BigEndian.Uint64(v))
		}
		c := meta.Get(mCounts)
		if len(c) != 8*numCounters {
			return errors.New("corrupt frontier: meta counts")
		}
		for i := range f.wcnt {
			f.wcnt[i] = int64(binary.BigEndian.Uint64(c[8*i:]))
			if f.wcnt[i] < 0 {
				return errors.New("corrupt frontier: negative meta counts")
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if fresh {
		nphase = uint64(f.opts.Phases)
		err := f.update(func(tx *bolt.Tx) error {
			for _, name := range allBuckets {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			meta := tx.Bucket(bMeta)
			return errors.Join(
				meta.Put(mFormat, []byte(formatMarker)),
				meta.Put(mVersion, []byte{formatVersion}),
				meta.Put(mSeq, binary.BigEndian.AppendUint64(nil, 0)),
				meta.Put(mNPhase, binary.BigEndian.AppendUint64(nil, nphase)),
				meta.Put(mUnit, []byte(f.unitName())),
				meta.Put(mCounts, make([]byte, 8*numCounters)),
			)
		})
		if err != nil {
			return fmt.Errorf("create buckets: %w", err)
		}
	}
	if v1 {
		if err := f.migrateV1(); err != nil {
			return err
		}
		err := f.view(func(tx *bolt.Tx) error {
			if v := tx.Bucket(bMeta).Get(mVersion); len(v) != 1 || v[0] != formatVersion {
				return fmt.Errorf("corrupt frontier: format 1 without a %q bucket", v1URLs)
			}
			return missingBucket(tx, allBuckets)
		})
		if err != nil {
			return err
		}
	}
	f.nphase.Store(int64(nphase))
	f.publishCounts()
	if !fresh && unit != f.unitName() {
		f.log.Info("politeness unit changed: re-keying the queue", "was", unit, "now", f.unitName())
		rekey = true
	}
	if rekey || int(nphase) != f.opts.Phases {
		if err := f.rekey(f.opts.Phases); err != nil {
			return err
		}
	}
	n, err := f.recoverInProgress()
	if err != nil {
		return err
	}
	if n > 0 {
		f.log.Info("recovered in-progress URLs to the queue", "urls", n)
	}
	// Files written before recurring crawls have no due index.
	var haveDue bool
	if err := f.view(func(tx *bolt.Tx) error { haveDue = tx.Bucket(bDue) != nil; return nil }); err != nil {
		return err
	}
	if !haveDue {
		err := f.update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket(bDue)
			return err
		})
		if err != nil {
			return fmt.Errorf("create the due index: %w", err)
		}
	}
	return f.ensureDigests()
}

// missingBucket returns an error naming the first of names tx lacks.
func missingBucket(tx *bolt.Tx, names [][]byte) error {
	for _, name := range names {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("corrupt frontier: bucket %q missing", name)
		}
	}
	return nil
}

func metaU64(meta *bolt.Bucket, key []byte) (uint64, bool) {
	v := meta.Get(key)
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// publishCounts copies the writer's committed counters to the atomics read by
// Counts.
func (f *Frontier) publishCounts() {
	for i := range f.wcnt {
		f.cnt[i].Store(f.wcnt[i])
	}
	f.revisits.Store(f.wrevisits)
}

// Close stops the writer (writes already queued are still committed) and
// closes the bbolt file. Later calls return ErrClosed; Close is idempotent.
func (f *Frontier) Close() error {
	f.once.Do(func() {
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		close(f.quit)
		<-f.done
		if err := f.db.Close(); err != nil {
			f.cerr = fmt.Errorf("frontier: close %s: %w", f.opts.Path, err)
		}
	})
	return f.cerr
}

// Counts returns how many URLs are in each state. It reads in-memory
// counters that are persisted in the same transactions that change states.
func (f *Frontier) Counts() Counts {
	return Counts{
		InList:     f.cnt[cInList].Load(),
		InProgress: f.cnt[cInProgress].Load(),
		Completed:  f.cnt[cCompleted].Load(),
		Stalled:    f.cnt[cStalled].Load(),
	}
}

// Skipped is how many new URLs Add refused (ever, persisted) because their
// host had reached MaxPerHost.
func (f *Frontier) Skipped() int64 { return f.cnt[cSkipped].Load() }

// unitName is Options.UnitName, "host" when empty.
func (f *Frontier) unitName() string {
	if f.opts.UnitName == "" {
		return "host"
	}
	return f.opts.UnitName
}

// UnitHash is the hash of host's politeness unit (Options.Unit): the hash
// its phase is taken from.
func (f *Frontier) UnitHash(host string) uint64 { return f.opts.Unit.Hash(host) }

// Phases is the Nphase the queue is currently keyed for.
func (f *Frontier) Phases() int { return int(f.nphase.Load()) }

// Path is the bbolt file.
func (f *Frontier) Path() string { return f.opts.Path }

// Scan calls fn with IN_LIST records of phase in insertion (oldest-first)
// order, starting after cursor after (nil = from the oldest), visiting at
// most limit records (limit <= 0: no limit); fn returns false to stop, and
// the record it stopped on counts as visited. Scan returns the cursor after
// the last visited record, or nil when the end of the phase was reached.
//
// Records are read in chunks of up to 1024 per read transaction and fn is
// called outside any transaction, so fn may call other Frontier methods and
// no read transaction blocks a remap of the file.
func (f *Frontier) Scan(phase int, after Cursor, limit int, fn func(Record) bool) (Cursor, error) {
	return f.ScanFiltered(phase, after, limit, nil, fn)
}

// ScanFiltered is Scan with a cheap pre-filter: accept, if not nil, is called
// with each record's host (inside the read transaction: it must be quick
// and must not call the Frontier; its answer for a host is reused for the
// rest of the chunk read in that transaction, fn being called only after
// it), and records it refuses are counted as visited but neither decoded
// nor passed to fn. The scheduler uses it to
// skip the URLs of hosts the bucket cannot take now.
func (f *Frontier) ScanFiltered(phase int, after Cursor, limit int, accept func(host string) bool, fn func(Record) bool) (Cursor, error) {
	np := f.Phases()
	if phase < 0 || phase >= np {
		return nil, fmt.Errorf("frontier: scan phase=%d: must be in 0..%d", phase, np-1)
	}
	prefix := binary.BigEndian.AppendUint16(nil, uint16(phase))
	var pos []byte
	if after != nil {
		if len(after) != queueKeyLen || !bytes.HasPrefix(after, prefix) {
			return nil, fmt.Errorf("frontier: scan phase=%d: cursor %x is not a cursor of this phase", phase, []byte(after))
		}
		pos = bytes.Clone(after)
	}
	if limit <= 0 {
		limit = int(^uint(0) >> 1)
	}
	recs := make([]Record, 0, min(limit, 64)) // grows on demand: most scheduler scans keep few records
	keys := make([][]byte, 0, cap(recs))
	visited := 0
	var verdict map[string]bool // host -> accept(host), for the chunk being read
	var lastHost []byte         // the previous record's host in this chunk, and its verdict
	var lastOK, haveLast bool
	if accept != nil {
		verdict = make(map[string]bool)
	}
	for {
		recs, keys = recs[:0], keys[:0]
		want := min(scanChunk, limit-visited)
		end := false
		skipped := 0
		var last []byte // key of the last skipped record after the last kept one
		clear(verdict)
		haveLast = false
		err := f.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bQueue).Cursor()
			var k, v []byte
			if pos == nil {
				k, v = c.Seek(prefix)
			} else if k, v = c.Seek(pos); k != nil && bytes.Equal(k, pos) {
				k, v = c.Next()
			}
			for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				if len(recs)+skipped == want {
					return nil // more remain
				}
				if accept != nil {
					h, err := queueValueHostBytes(v)
					if err != nil {
						return fmt.Errorf("%w (key %x)", err, k)
					}
					// The bucket does not change while one chunk is read
					// (fn runs after the transaction): ask once per host.
					var ok bool
					if haveLast && bytes.Equal(h, lastHost) {
						ok = lastOK // runs of one host are common (a page's links are added together)
					} else {
						var known bool
						if ok, known = verdict[string(h)]; !known {
							hs := string(h)
							ok = accept(hs)
							verdict[hs] = ok
						}
						lastHost, lastOK, haveLast = append(lastHost[:0], h...), ok, true
					}
					if !ok {
						skipped++
						last = append(last[:0], k...)
						continue
					}
				}
				rec, err := decodeQueueValue(v)
				if err != nil {
					return fmt.Errorf("%w (key %x)", err, k)
				}
				recs = append(recs, rec)
				keys = append(keys, bytes.Clone(k))
				last = last[:0]
			}
			end = true
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("frontier: scan phase %d: %w", phase, err)
		}
		for i, rec := range recs {
			visited++
			pos = keys[i]
			if !fn(rec) {
				return pos, nil
			}
		}
		visited += skipped
		if len(last) > 0 {
			pos = bytes.Clone(last)
		}
		if end {
			return nil, nil
		}
		if visited >= limit {
			return pos, nil
		}
	}
}

// Get returns the record of the URL r (see RefOf).
func (f *Frontier) Get(r Ref) (Record, bool, error) {
	var s stored
	var ok bool
	err := f.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bURLs).Get(recKey(nil, HostKey(r.Host), r.FP))
		if v == nil {
			return nil
		}
		ok = true
		var err error
		s, err = decodeRecord(r.FP, v)
		return err
	})
	if err != nil {
		return Record{}, false, fmt.Errorf("frontier: get %016x: %w", r.FP, err)
	}
	return s.Record, ok, nil
}

// Known reports, for each of refs, whether the frontier has a record of
// it (in any state), in one read transaction.
func (f *Frontier) Known(refs []Ref) ([]bool, error) {
	out := make([]bool, len(refs))
	err := f.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bURLs)
		var key []byte
		for i, r := range refs {
			key = recKey(key[:0], HostKey(normHost(r.Host)), r.FP)
			out[i] = b.Get(key) != nil
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("frontier: known: %w", err)
	}
	return out, nil
}

// Host returns the statistics of host (as in the URL, host[:port]).
func (f *Frontier) Host(host string) (HostStats, bool, error) {
	host = normHost(host)
	var h HostStats
	var ok bool
	err := f.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bHosts).Get([]byte(host))
		if v == nil {
			return nil
		}
		ok = true
		var err error
		h, err = decodeHost(host, v)
		return err
	})
	if err != nil {
		return HostStats{}, false, fmt.Errorf("frontier: host %q: %w", host, err)
	}
	return h, ok, nil
}

// NextStalled returns the earliest RetryAt of a STALLED URL, false when none
// is stalled (or on a read error, which is logged).
func (f *Frontier) NextStalled() (time.Time, bool) {
	var t time.Time
	var ok bool
	err := f.view(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bStalled).Cursor().First()
		if len(k) == stalledKeyLen {
			t, ok = fromUnixNano(int64(binary.BigEndian.Uint64(k))), true
			if t.IsZero() {
				t = time.Unix(0, 0)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrClosed) {
		f.log.Error("next stalled", "error", err)
	}
	return t, ok
}
