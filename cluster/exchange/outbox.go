package exchange

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// ErrOutboxFull is wrapped by Outbox.Put when storing the URLs would exceed
// OutboxConfig.MaxURLs. The caller decides (drop, retry later, slow down).
var ErrOutboxFull = errors.New("outbox full")

// ErrOutboxClosed is returned by calls on a closed Outbox.
var ErrOutboxClosed = errors.New("cluster: outbox closed")

// OutboxConfig configures OpenOutbox.
type OutboxConfig struct {
	// Path of the bbolt file (e.g. <data>/outbox.db). Required.
	Path string
	// MaxURLs bounds the URLs waiting on disk, all peers together.
	// Default 10,000,000; valid 1..1,000,000,000.
	MaxURLs int
	// Gather is the longest the writer waits for more writes after the
	// first one before it commits them together (one fsync for all); it
	// commits sooner when no write arrives for a tenth of Gather (light
	// load) or 256 writes wait. Default 10ms; valid 0 (commit at once, one
	// commit per writer pass)..1s. Every write waits up to this long
	// for its fsync; on a busy member it is what keeps the fsyncs per
	// second bounded.
	Gather time.Duration
	// NoSync skips fsync on commit: tests and benchmarks only.
	NoSync bool
	// Logger, default slog.Default().
	Logger *slog.Logger
}

// DefaultOutboxConfig returns the defaults for an outbox at path.
func DefaultOutboxConfig(path string) OutboxConfig {
	return OutboxConfig{Path: path, MaxURLs: 10_000_000, Gather: DefaultOutboxGather}
}

// DefaultOutboxGather is OutboxConfig.Gather's default.
const DefaultOutboxGather = 10 * time.Millisecond

// Outbox is the durable per-peer queue of URLs waiting to be sent to their
// owner. URLs are filed under the peer that owned them when they were put; the
// Stream re-checks the owner when it takes them (Outbox.take) and re-files
// those whose owner changed. Writes are group-committed by one writer
// goroutine; every call returns once its change is durable. Safe for
// concurrent use; one Stream at a time may send from an Outbox.
type Outbox struct {
	db      *bolt.DB
	cfg     OutboxConfig
	log     *slog.Logger
	ops     chan *obOp
	quit    chan struct{}
	stopped chan struct{} // closed when the writer has exited
	commits atomic.Uint64 // write transactions committed (or attempted)
	batchID atomic.Uint64 // the last batch ID take gave (IDs match acks to batches on one connection)
	wg      sync.WaitGroup

	// unsynced is set once a write is queued without waiting
	// (QueueEntries), cleared by Sync.
	unsynced atomic.Bool

	mu     sync.Mutex // guards counts, total, wake, closed
	counts map[string]int
	total  int
	wake   func(peer string)
	closed bool
}

var (
	bkQueue    = []byte("q")        // nested bucket per peer name: seq (8 bytes BE) -> entry
	bkInflight = []byte("inflight") // older files only: a durable record of the batch in flight, dropped at open
	bkCounts   = []byte("counts")   // peer -> uvarint entries waiting
	bkMeta     = []byte("meta")
	keyFormat  = []byte("format")
	keyBatchID = []byte("batch_id") // older files only, dropped at open
	outboxFmt  = []byte("phasecrawl-outbox-1")
)

// OpenOutbox opens or creates the outbox file.
func OpenOutbox(cfg OutboxConfig) (*Outbox, error) {
	if cfg.Path == "" {
		return nil, errors.New("cluster: outbox path: required")
	}
	if cfg.MaxURLs == 0 {
		cfg.MaxURLs = 10_000_000
	}
	if cfg.MaxURLs < 1 || cfg.MaxURLs > 1_000_000_000 {
		return nil, fmt.Errorf("cluster: outbox max_urls=%d: must be 1..1000000000", cfg.MaxURLs)
	}
	if cfg.Gather < 0 || cfg.Gather > time.Second {
		return nil, fmt.Errorf("cluster: outbox gather=%s: must be 0..1s", cfg.Gather)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	db, err := bolt.Open(cfg.Path, 0o600, &bolt.Options{
		Timeout:        time.Second,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
		NoSync:         cfg.NoSync,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: open outbox %s: %w", cfg.Path, err)
	}
	o := &Outbox{db: db, cfg: cfg, log: cfg.Logger.With("component", "outbox"),
		ops: make(chan *obOp, 64), quit: make(chan struct{}), stopped: make(chan struct{}), counts: map[string]int{}}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bkMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return errors.New("not a phasecrawl outbox (no meta bucket)")
			}
			if meta, err = tx.CreateBucket(bkMeta); err != nil {
				return err
			}
			if err := meta.Put(keyFormat, outboxFmt); err != nil {
				return err
			}
		} else if f := meta.Get(keyFormat); !bytes.Equal(f, outboxFmt) {
			return fmt.Errorf("not a phasecrawl outbox (format %q)", f)
		}
		for _, name := range [][]byte{bkQueue, bkCounts} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		// A batch in flight is the sender's to remember (take): what older
		// files recorded of it goes.
		if tx.Bucket(bkInflight) != nil {
			if err := tx.DeleteBucket(bkInflight); err != nil {
				return err
			}
		}
		if err := meta.Delete(keyBatchID); err != nil {
			return err
		}
		return tx.Bucket(bkCounts).ForEach(func(k, v []byte) error {
			n, w := binary.Uvarint(v)
			if w <= 0 {
				return fmt.Errorf("bad count for peer %q", k)
			}
			o.counts[string(k)] = int(n)
			o.total += int(n)
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cluster: open outbox %s: %w", cfg.Path, err)
	}
	o.wg.Add(1)
	go o.writer()
	return o, nil
}

// Close stops the writer and closes the file. Calls in flight get ErrOutboxClosed.
func (o *Outbox) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.mu.Unlock()
	close(o.quit)
	o.wg.Wait()
	if err := o.db.Close(); err != nil {
		return fmt.Errorf("cluster: close outbox: %w", err)
	}
	return nil
}

// Put files urls as discovered URLs (KindNew) for peer; it returns once they
// are durable. Over MaxURLs it stores nothing and returns an error wrapping
// ErrOutboxFull.
func (o *Outbox) Put(ctx context.Context, peer string, urls []frontier.NewURL) error {
	return o.put(ctx, peer, KindNew, urls)
}

// PutDone files COMPLETED records (KindDone, rebalance) for peer.
func (o *Outbox) PutDone(ctx context.Context, peer string, urls []frontier.NewURL) error {
	return o.put(ctx, peer, KindDone, urls)
}

// PutKind files urls as kind for peer (the other kinds' entries, as the
// cluster layer files them).
func (o *Outbox) PutKind(ctx context.Context, peer string, kind Kind, urls []frontier.NewURL) error {
	return o.put(ctx, peer, kind, urls)
}

func (o *Outbox) put(ctx context.Context, peer string, kind Kind, urls []frontier.NewURL) error {
	if peer == "" {
		return errors.New("cluster: outbox put: empty peer name")
	}
	if len(urls) == 0 {
		return nil
	}
	vals := make([][]byte, len(urls))
	for i, u := range urls {
		e := Entry{Kind: kind, NewURL: u}
		if err := checkEntry(e); err != nil {
			return fmt.Errorf("cluster: outbox put %q: %w", u.URL, err)
		}
		vals[i] = appendEntry(nil, e)
	}
	return o.do(ctx, func(tx *bolt.Tx, d *obDelta) error {
		if n := o.total + d.total + len(vals); n > o.cfg.MaxURLs {
			return opError{fmt.Errorf("cluster: outbox put %d URLs for %s: %d waiting, max_urls=%d: %w",
				len(vals), peer, o.total+d.total, o.cfg.MaxURLs, ErrOutboxFull)}
		}
		q, err := tx.Bucket(bkQueue).CreateBucketIfNotExists([]byte(peer))
		if err != nil {
			return err
		}
		q.FillPercent = 0.95 // keys are appended in order
		for _, v := range vals {
			if err := appendSeq(q, v); err != nil {
				return err
			}
		}
		d.add(peer, len(vals))
		return nil
	})
}

// PutEntries files entries of any kinds for several peers in one durable
// write: all of them, or (on error) none.
func (o *Outbox) PutEntries(ctx context.Context, files map[string][]Entry) error {
	fn, err := o.entriesWrite(files)
	if err != nil || fn == nil {
		return err
	}
	return o.do(ctx, fn)
}

// QueueEntries is PutEntries without the wait: the write is queued for
// the writer (which may block while its queue is full) and its Filing
// tells the outcome, final once a Sync called after QueueEntries returned
// has returned. onCommit, if not nil, is called (from the writer) once the
// write is durable, before Durable reports it; onFail, if not nil, once it
// failed. Neither may wait for the outbox. A nil Filing and no error:
// nothing to write.
func (o *Outbox) QueueEntries(ctx context.Context, files map[string][]Entry, onCommit func(), onFail func(error)) (*Filing, error) {
	fn, err := o.entriesWrite(files)
	if err != nil || fn == nil {
		return nil, err
	}
	f := &Filing{onCommit: onCommit, onFail: onFail}
	op := &obOp{fn: fn, done: make(chan error, 1), filing: f}
	select {
	case <-o.quit:
		return nil, ErrOutboxClosed
	default:
	}
	select {
	case o.ops <- op:
	case <-o.quit:
		return nil, ErrOutboxClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	o.unsynced.Store(true)
	return f, nil
}

// Sync returns once every write queued (QueueEntries) before the call is
// committed or failed: the writer commits what it gathered at once. It
// returns at once when nothing was queued since the last Sync, or once
// the outbox is closed (a write it did not commit failed).
func (o *Outbox) Sync() {
	if !o.unsynced.Swap(false) {
		return
	}
	op := &obOp{sync: true, done: make(chan error, 1)}
	select {
	case o.ops <- op:
	case <-o.quit:
		return
	}
	select {
	case <-op.done:
	case <-o.stopped:
	}
}

// entriesWrite is the write of PutEntries (nil: nothing to write).
func (o *Outbox) entriesWrite(files map[string][]Entry) (func(tx *bolt.Tx, d *obDelta) error, error) {
	vals := map[string][][]byte{}
	total := 0
	for peer, es := range files {
		if peer == "" {
			return nil, errors.New("cluster: outbox put: empty peer name")
		}
		for _, e := range es {
			if err := checkEntry(e); err != nil {
				return nil, fmt.Errorf("cluster: outbox put %q: %w", e.URL, err)
			}
			vals[peer] = append(vals[peer], appendEntry(nil, e))
			total++
		}
	}
	if total == 0 {
		return nil, nil
	}
	return func(tx *bolt.Tx, d *obDelta) error {
		if n := o.total + d.total + total; n > o.cfg.MaxURLs {
			return opError{fmt.Errorf("cluster: outbox put %d URLs: %d waiting, max_urls=%d: %w",
				total, o.total+d.total, o.cfg.MaxURLs, ErrOutboxFull)}
		}
		for peer, vs := range vals {
			q, err := tx.Bucket(bkQueue).CreateBucketIfNotExists([]byte(peer))
			if err != nil {
				return err
			}
			q.FillPercent = 0.95 // keys are appended in order
			for _, v := range vs {
				if err := appendSeq(q, v); err != nil {
					return err
				}
			}
			d.add(peer, len(vs))
		}
		return nil
	}, nil
}

// Pending returns the URLs waiting per peer (peers with none are left out).
func (o *Outbox) Pending() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := make(map[string]int, len(o.counts))
	for k, v := range o.counts {
		if v > 0 {
			m[k] = v
		}
	}
	return m
}

// Len returns the URLs waiting, all peers together.
func (o *Outbox) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// WaitEmpty blocks until no URL is waiting (e.g. a graceful leave waits for
// its hand-off to be acknowledged) or ctx ends.
func (o *Outbox) WaitEmpty(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for o.Len() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: outbox: %d URLs still waiting: %w", o.Len(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

func (o *Outbox) pending(peer string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[peer]
}

// setWake installs the function called (outside any lock, from the writer)
// for each peer whose queue grew.
func (o *Outbox) setWake(f func(peer string)) {
	o.mu.Lock()
	o.wake = f
	o.mu.Unlock()
}

// taken is what take handed out: the entries of batch id, which are exactly
// the entries of the peer's queue with keys <= lastSeq.
type taken struct {
	id      uint64
	lastSeq uint64
	entries []Entry
	resend  bool // the same entries were sent before and not acked (set by the sender)
	moved   int  // entries re-filed under another peer
	dropped int  // undecodable entries removed
}

// dropEntry, returned by take's ownerOf, removes an entry that is owed to
// nobody any more.
const dropEntry = "\x00drop"

// queueScan is one pass over the oldest entries of a peer's queue (scan).
type queueScan struct {
	entries []Entry
	lastSeq uint64
	moves   []queueMove
	drop    [][]byte
}

// queueMove is an entry to re-file under another peer.
type queueMove struct {
	key []byte
	to  string
	val []byte
}

// scan reads up to max entries (maxBytes encoded) of queue q that ownerOf
// keeps for peer, and the entries before the last of them that it re-files
// or drops; at most 4*max entries are examined. dropping: the caller
// drops what it finds undecodable, and scan logs each.
func (o *Outbox) scan(q *bolt.Bucket, peer string, max, maxBytes int, ownerOf func(Entry) string, dropping bool) queueScan {
	var s queueScan
	size, visited := 0, 0
	c := q.Cursor()
	for k, v := c.First(); k != nil && len(s.entries) < max && visited < 4*max; k, v = c.Next() {
		visited++
		e, err := decodeEntry(v)
		if err != nil {
			if dropping {
				o.log.Error("dropping undecodable outbox entry", "peer", peer, "err", err)
			}
			s.drop = append(s.drop, bytes.Clone(k))
			continue
		}
		owner := ownerOf(e)
		if owner == dropEntry {
			s.drop = append(s.drop, bytes.Clone(k))
			continue
		}
		if owner != "" && owner != peer {
			s.moves = append(s.moves, queueMove{bytes.Clone(k), owner, bytes.Clone(v)})
			continue
		}
		if size+len(v) > maxBytes && len(s.entries) > 0 {
			break
		}
		size += len(v)
		s.entries = append(s.entries, e)
		s.lastSeq = binary.BigEndian.Uint64(k)
	}
	return s
}

// take re-checks the owner of the oldest entries of peer's queue, re-files
// those that moved to another owner (ownerOf; "" keeps them, dropEntry
// removes them), and returns up to max entries (maxBytes encoded) still
// owned by peer as one batch. The batch stays in the queue until ack
// deletes it: taking it again before (after a failed send, or after a
// restart) returns the same entries and more. At most 4*max entries are
// examined per call; ownerOf must be fast.
//
// Taking writes nothing when no entry moved or was dropped (the common
// case): the batch in flight is the sender's to remember, and the receiver
// stores what it is sent again as often as it comes.
func (o *Outbox) take(ctx context.Context, peer string, max, maxBytes int, ownerOf func(Entry) string) (taken, error) {
	var s queueScan
	err := o.db.View(func(tx *bolt.Tx) error {
		if q := tx.Bucket(bkQueue).Bucket([]byte(peer)); q != nil {
			s = o.scan(q, peer, max, maxBytes, ownerOf, false)
		}
		return nil
	})
	if err != nil {
		return taken{}, fmt.Errorf("cluster: outbox take %s: %w", peer, err)
	}
	if len(s.moves) > 0 || len(s.drop) > 0 {
		err = o.do(ctx, func(tx *bolt.Tx, d *obDelta) error {
			s = queueScan{}
			q := tx.Bucket(bkQueue).Bucket([]byte(peer))
			if q == nil {
				return nil
			}
			s = o.scan(q, peer, max, maxBytes, ownerOf, true)
			for _, k := range s.drop {
				if err := q.Delete(k); err != nil {
					return err
				}
			}
			d.add(peer, -len(s.drop))
			for _, m := range s.moves {
				if err := q.Delete(m.key); err != nil {
					return err
				}
				dst, err := tx.Bucket(bkQueue).CreateBucketIfNotExists([]byte(m.to))
				if err != nil {
					return err
				}
				if err := appendSeq(dst, m.val); err != nil {
					return err
				}
				d.add(peer, -1)
				d.add(m.to, 1)
			}
			return nil
		})
		if err != nil { // s may still be written by the writer (ctx ended)
			return taken{}, err
		}
	}
	t := taken{lastSeq: s.lastSeq, entries: s.entries, moved: len(s.moves), dropped: len(s.drop)}
	if len(t.entries) > 0 {
		t.id = o.batchID.Add(1)
	}
	return t, nil
}

// ack deletes the entries of peer's queue up to lastSeq (a batch take
// returned) once the peer acknowledged them.
func (o *Outbox) ack(ctx context.Context, peer string, lastSeq uint64) (int, error) {
	n := 0
	err := o.do(ctx, func(tx *bolt.Tx, d *obDelta) error {
		n = 0
		q := tx.Bucket(bkQueue).Bucket([]byte(peer))
		if q == nil {
			return nil
		}
		var keys [][]byte
		c := q.Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= lastSeq; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := q.Delete(k); err != nil {
				return err
			}
		}
		n = len(keys)
		d.add(peer, -n)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Mark returns the position of the newest entry filed for peer so far (0
// when none ever was); Passed tells when every entry up to it has left
// peer's queue.
func (o *Outbox) Mark(peer string) (uint64, error) {
	var seq uint64
	err := o.db.View(func(tx *bolt.Tx) error {
		if q := tx.Bucket(bkQueue).Bucket([]byte(peer)); q != nil {
			seq = q.Sequence()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cluster: outbox mark %s: %w", peer, err)
	}
	return seq, nil
}

// Passed reports whether every entry filed for peer up to mark (see Mark)
// has left peer's queue: acknowledged by peer, or re-filed under another
// owner when the membership changed.
func (o *Outbox) Passed(peer string, mark uint64) (bool, error) {
	passed := true
	err := o.db.View(func(tx *bolt.Tx) error {
		if q := tx.Bucket(bkQueue).Bucket([]byte(peer)); q != nil {
			if k, _ := q.Cursor().First(); k != nil && binary.BigEndian.Uint64(k) <= mark {
				passed = false
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("cluster: outbox passed %s: %w", peer, err)
	}
	return passed, nil
}

func appendSeq(q *bolt.Bucket, v []byte) error {
	seq, err := q.NextSequence()
	if err != nil {
		return err
	}
	return q.Put(be64(seq), v)
}

func be64(x uint64) []byte { return binary.BigEndian.AppendUint64(nil, x) }
