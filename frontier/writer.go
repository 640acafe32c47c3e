package frontier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit. Every write (Add, MarkInProgress, Finish, Requeue,
// ReleaseStalled, SetPhases, Settle, Update...) becomes an op sent to the
// single writer goroutine. The writer takes the first op, keeps gathering
// until the batch holds BatchSize items or BatchDelay has passed, applies
// all ops in arrival order inside ONE db.Update, and only then answers
// every caller: a call returns after its changes are durable. db.Batch is
// not used because it may run its function twice. One writer also means the read-modify-write of
// records, host stats and counters never races, and counters can be
// published after the commit succeeded.

type opKind uint8

const (
	opAdd opKind = iota
	opMark
	opFinish
	opRequeue
	opRelease
	opSetPhases
	opFunc // a write given as a function (Settle, Update): op.fn
)

var opNames = [...]string{"add", "mark in progress", "finish", "requeue", "release stalled", "set phases", "write"}

type op struct {
	kind    opKind
	ctx     context.Context
	adds    []pendingURL
	refs    []keyRef
	results []Result
	now     time.Time
	n       int // limit (release), nphase (set phases) or Write.Items (update)
	reply   chan opReply

	fn   func(*txState) (int, error) // opFunc: the write
	name string                      // opFunc: its name in errors ("" = "write")
}

// label names o in errors.
func (o *op) label() string {
	if o.name != "" {
		return o.name
	}
	return opNames[o.kind]
}

type opReply struct {
	n   int
	err error
}

// pendingURL is a NewURL prepared by the caller's goroutine (hashing is done
// there, not in the writer).
type pendingURL struct {
	fp    uint64
	hk    uint32 // HostKey(host)
	url   string
	host  string
	depth int
	run   int
	due   time.Time
	mod   time.Time // NewURL.LastMod
	// back: a record moved here that this node owns, whose claim (a
	// rebalance moving it away) it undoes (AddMoved).
	back bool
}

// newPendingURL prepares the URL u of host for the writer.
func newPendingURL(u NewURL, host string) pendingURL {
	host = normHost(host)
	return pendingURL{fp: Fingerprint(u.URL), hk: HostKey(host), url: u.URL, host: host, depth: max(u.Depth, 0), run: min(max(u.Run, 0), maxRun), due: u.Due, mod: u.LastMod}
}

func (o *op) items() int {
	return len(o.adds) + len(o.refs) + len(o.results) + o.n
}

// keyRef is a Ref prepared by the caller's goroutine: its host's HostKey.
type keyRef struct {
	hk uint32
	fp uint64
}

// keyRefs prepares refs for the writer.
func keyRefs(refs []Ref) []keyRef {
	out := make([]keyRef, len(refs))
	for i, r := range refs {
		out[i] = keyRef{HostKey(r.Host), r.FP}
	}
	return out
}

// normHost is the host as stored and hashed: lower case.
func normHost(h string) string { return strings.ToLower(h) }

// submit hands o to the writer and waits for its answer. When ctx ends first
// the error is ctx's and the op may or may not have been committed (an op
// whose ctx has ended before the writer applies it is dropped).
func (f *Frontier) submit(ctx context.Context, o *op) (int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	name := o.label()
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("frontier: %s: %w", name, err)
	}
	o.ctx = ctx
	o.reply = make(chan opReply, 1)
	f.mu.RLock()
	if f.closed {
		f.mu.RUnlock()
		return 0, ErrClosed
	}
	select {
	case f.ops <- o:
		f.mu.RUnlock()
	case <-ctx.Done():
		f.mu.RUnlock()
		return 0, fmt.Errorf("frontier: %s: %w", name, ctx.Err())
	}
	select {
	case r := <-o.reply:
		return r.n, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("frontier: %s: %w", name, ctx.Err())
	}
}

// Add inserts URLs not seen before (dedup by Fingerprint, kept in bbolt) as
// IN_LIST at the end of their phase's queue. It returns after the batch is
// committed (durable), with how many were new. URLs whose host has reached
// MaxPerHost are not inserted (see Skipped); URLs without a host are
// ignored. Safe for concurrent callers; calls are coalesced by one writer
// goroutine into few transactions (group commit).
func (f *Frontier) Add(ctx context.Context, urls []NewURL) (added int, err error) {
	adds := prepareURLs(urls)
	if len(adds) == 0 {
		return 0, nil
	}
	return f.submit(ctx, &op{kind: opAdd, adds: adds})
}

// AddMoved is Add for records a rebalance moved here (another member's,
// or this node's own outbox giving back what it had filed for a member
// that left). A URL that this node claimed to move away (Tx.Claim) and
// that mine says it owns now is queued here again: the claim's removal
// then leaves it. A claimed URL that mine says another member owns is
// left to its removal (a member whose view is behind sent it here).
func (f *Frontier) AddMoved(ctx context.Context, urls []NewURL, mine func(fp uint64) bool) (int, error) {
	adds := prepareURLs(urls)
	if len(adds) == 0 {
		return 0, nil
	}
	for i := range adds {
		adds[i].back = mine(adds[i].fp)
	}
	return f.submit(ctx, &op{kind: opAdd, adds: adds})
}

// AddNew is Add, returning the URLs it inserted (those not known before
// and admitted under MaxPerHost), in their order in urls.
func (f *Frontier) AddNew(ctx context.Context, urls []NewURL) ([]NewURL, error) {
	adds := make([]pendingURL, 0, len(urls))
	from := make([]int, 0, len(urls)) // index in urls of each of adds
	for i, u := range urls {
		if pu, ok := prepareURL(u); ok {
			adds = append(adds, pu)
			from = append(from, i)
		}
	}
	if len(adds) == 0 {
		return nil, nil
	}
	var inserted []bool
	_, err := f.submit(ctx, &op{kind: opFunc, name: "add", n: len(adds), fn: func(st *txState) (int, error) {
		inserted = make([]bool, len(adds)) // the writer may apply a write again after a failed commit
		return st.add(adds, nil, inserted)
	}})
	if err != nil {
		return nil, err
	}
	var out []NewURL
	for i, ok := range inserted {
		if ok {
			out = append(out, urls[from[i]])
		}
	}
	return out, nil
}

// prepareURLs hashes and normalizes the host of URLs to add, in the
// caller's goroutine; URLs without a host are dropped.
func prepareURLs(urls []NewURL) []pendingURL {
	adds := make([]pendingURL, 0, len(urls))
	for _, u := range urls {
		if pu, ok := prepareURL(u); ok {
			adds = append(adds, pu)
		}
	}
	return adds
}

// prepareURL is prepareURLs for one URL; false when it has no host.
func prepareURL(u NewURL) (pendingURL, bool) {
	if u.URL == "" {
		return pendingURL{}, false
	}
	host := u.Host
	if host == "" {
		if pu, err := url.Parse(u.URL); err == nil {
			host = pu.Host
		}
		if host == "" {
			return pendingURL{}, false
		}
	}
	return newPendingURL(u, host), true
}

// MarkInProgress moves IN_LIST URLs to IN_PROGRESS, removing them from the
// scan queue. URLs that are unknown or not IN_LIST are ignored.
func (f *Frontier) MarkInProgress(ctx context.Context, refs []Ref) error {
	if len(refs) == 0 {
		return nil
	}
	_, err := f.submit(ctx, &op{kind: opMark, refs: keyRefs(refs)})
	return err
}

// Finish records fetch results: IN_PROGRESS -> COMPLETED, or -> STALLED
// (retry lane, at RetryAt) unless this was the MaxTries-th attempt, in which
// case the URL is COMPLETED with the stall's reason. Tries is incremented for
// every result but a Free stall, and the host's statistics are updated. Results for URLs that
// are not IN_PROGRESS (stale) are ignored; a State other than Completed or
// Stalled is an error and nothing is written.
func (f *Frontier) Finish(ctx context.Context, rs []Result) error {
	if len(rs) == 0 {
		return nil
	}
	if err := checkResults("finish", rs); err != nil {
		return err
	}
	_, err := f.submit(ctx, &op{kind: opFinish, results: rs})
	return err
}

// Check returns an error when r cannot be recorded (Finish, Settle,
// Tx.Finish): a State other than Completed or Stalled, or no Host.
func (r Result) Check() error { return checkResults("result", []Result{r}) }

// checkResults checks the results given to Finish or a settle: a state of
// Completed or Stalled, and a host.
func checkResults(call string, rs []Result) error {
	for _, r := range rs {
		if r.State != Completed && r.State != Stalled {
			return fmt.Errorf("frontier: %s %016x: state=%s: must be completed or stalled", call, r.FP, r.State)
		}
		if r.Host == "" {
			return fmt.Errorf("frontier: %s %016x: result without a host", call, r.FP)
		}
	}
	return nil
}

// Requeue moves IN_PROGRESS URLs back to IN_LIST at their ORIGINAL queue
// position (phase swap, shutdown). Others are ignored.
func (f *Frontier) Requeue(ctx context.Context, refs []Ref) error {
	if len(refs) == 0 {
		return nil
	}
	_, err := f.submit(ctx, &op{kind: opRequeue, refs: keyRefs(refs)})
	return err
}

// ReleaseStalled moves at most limit (<= 0: BatchSize) STALLED URLs whose
// RetryAt <= now back to IN_LIST at their original queue position (the retry
// lane), and reports how many it moved.
func (f *Frontier) ReleaseStalled(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		limit = f.opts.BatchSize
	}
	return f.submit(ctx, &op{kind: opRelease, now: now, n: limit})
}

// SetPhases re-keys the queue for a new Nphase (cluster phase count). It
// runs in chunked transactions inside the writer, so no other write
// interleaves; a crash in the middle is finished by the next Open. Scans of
// the old phase numbering during the re-key see a partial view: restart
// scanning from a nil cursor afterwards.
func (f *Frontier) SetPhases(n int) error {
	if n < 1 || n > maxPhases {
		return fmt.Errorf("frontier: set phases=%d: must be in 1..%d", n, maxPhases)
	}
	_, err := f.submit(context.Background(), &op{kind: opSetPhases, n: n})
	return err
}

// writer is the single writer goroutine; Close stops it after the ops
// already sent are committed.
func (f *Frontier) writer() {
	defer close(f.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	quietGap := f.opts.BatchDelay / 4
	var batch []*op
	for {
		var first *op
		select {
		case first = <-f.ops:
		case <-f.quit:
			f.drain()
			return
		}
		batch = append(batch[:0], first)
		items := first.items()
		ctrl := first.kind == opSetPhases
		var timeout, lull <-chan time.Time
		if f.opts.BatchDelay > 0 {
			timer.Reset(f.opts.BatchDelay)
			timeout = timer.C
			quiet.Reset(quietGap)
			lull = quiet.C
		}
	gather:
		for items < f.opts.BatchSize && !ctrl {
			if timeout == nil {
				select {
				case o := <-f.ops:
					batch, items, ctrl = append(batch, o), items+o.items(), o.kind == opSetPhases
				default:
					break gather
				}
				continue
			}
			select {
			case o := <-f.ops:
				batch, items, ctrl = append(batch, o), items+o.items(), o.kind == opSetPhases
				quiet.Reset(quietGap)
			case <-timeout:
				timeout = nil // take what is queued right now, then commit
			case <-lull:
				// No write for a quarter of the delay: the load is light
				// (the end of a crawl, a few hosts left), and waiting longer
				// would only hold their trips.
				timeout = nil
			case <-f.hurry:
				timeout = nil // a caller waits for these writes (Hurry)
			case <-f.quit:
				break gather
			}
		}
		timer.Stop()
		quiet.Stop()
		f.run(batch)
		clear(batch)
	}
}

// Hurry tells the writer that a caller has nothing to do until writes it
// sent are committed (a host trip whose list is done, waiting for the URLs
// its pages' writes take for it): the writer commits what it has gathered
// at once instead of waiting up to BatchDelay for more. A Hurry while
// nothing is being gathered applies to the next batch. It never blocks.
func (f *Frontier) Hurry() {
	select {
	case f.hurry <- struct{}{}:
	default:
	}
}

// drain commits what was sent before Close marked the frontier closed (no
// sender can add more after that).
func (f *Frontier) drain() {
	var batch []*op
	for {
		select {
		case o := <-f.ops:
			batch = append(batch, o)
		default:
			if len(batch) > 0 {
				f.run(batch)
			}
			return
		}
	}
}

// run commits ops in order; a SetPhases op splits the batch.
func (f *Frontier) run(batch []*op) {
	start := 0
	for i, o := range batch {
		if o.kind != opSetPhases {
			continue
		}
		f.commit(batch[start:i])
		start = i + 1
		if err := o.ctx.Err(); err != nil {
			o.reply <- opReply{err: fmt.Errorf("frontier: set phases: %w", err)}
			continue
		}
		err := f.rekey(o.n)
		if err != nil {
			err = fmt.Errorf("frontier: set phases=%d: %w", o.n, err)
		}
		o.reply <- opReply{n: o.n, err: err}
	}
	f.commit(batch[start:])
}

// commit applies ops in one write transaction and answers their callers.
func (f *Frontier) commit(ops []*op) {
	live := ops[:0:0]
	for _, o := range ops {
		if err := o.ctx.Err(); err != nil {
			o.reply <- opReply{err: fmt.Errorf("frontier: %s: %w", o.label(), err)}
			continue
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	if fn := f.beforeCommit.Load(); fn != nil {
		(*fn)()
	}
	res := make([]int, len(live))
	st := f.newTxState(time.Now())
	err := f.update(func(tx *bolt.Tx) error {
		st.begin(tx)
		for i, o := range live {
			n, err := st.apply(o)
			if err != nil {
				return fmt.Errorf("%s: %w", o.label(), err)
			}
			res[i] = n
		}
		if fault := f.fault.Load(); fault != nil {
			if err := (*fault)(); err != nil {
				return err
			}
		}
		return st.flush()
	})
	if err == nil {
		f.committed(st)
		if st.ignored > 0 {
			f.log.Debug("ignored stale state transitions", "count", st.ignored)
		}
		if st.undurable > 0 {
			f.undurable.Add(int64(st.undurable))
			f.log.Warn("fetched URLs back to the queue: their records were not written", "count", st.undurable)
		}
	} else {
		err = fmt.Errorf("frontier: commit: %w", err)
		f.log.Error("write transaction failed", "ops", len(live), "error", err)
	}
	for i, o := range live {
		if err != nil {
			res[i] = 0
		}
		o.reply <- opReply{n: res[i], err: err}
	}
}

// committed publishes a committed transaction's sequence and counters.
func (f *Frontier) committed(st *txState) {
	f.seq = st.seq
	f.wcnt = st.cnt
	f.wrevisits = st.revisits
	f.publishCounts()
	for _, c := range st.captures {
		f.digests.Add(c.Digest, c)
	}
}

// recoverChunk bounds the IN_PROGRESS entries recovered per transaction.
const recoverChunk = 10000

// recoverInProgress puts every IN_PROGRESS URL back to IN_LIST (Open only,
// before the writer starts).
func (f *Frontier) recoverInProgress() (int, error) {
	total := 0
	for {
		n := 0
		st := f.newTxState(time.Now())
		err := f.update(func(tx *bolt.Tx) error {
			st.begin(tx)
			n = 0
			var refs []keyRef
			c := st.inprog.Cursor()
			for k, _ := c.First(); k != nil && len(refs) < recoverChunk; k, _ = c.Next() {
				hk, fp, ok := parseRecKey(k)
				if !ok {
					return fmt.Errorf("corrupt inprogress key %x", k)
				}
				refs = append(refs, keyRef{hk, fp})
			}
			for _, r := range refs {
				s, ok, err := st.get(r)
				if err != nil {
					return err
				}
				if !ok || s.State != InProgress {
					if err := st.inprog.Delete(recKey(nil, r.hk, r.fp)); err != nil {
						return err
					}
					continue
				}
				if err := st.toList(&s); err != nil {
					return err
				}
			}
			n = len(refs)
			return st.flush()
		})
		if err != nil {
			return total, fmt.Errorf("recover in-progress URLs: %w", err)
		}
		f.committed(st)
		total += n
		if n < recoverChunk {
			return total, nil
		}
	}
}

// rekeyChunk bounds the queue entries examined per SetPhases transaction.
const rekeyChunk = 20000

// rekey moves every queue entry to the key prefix of its phase under n
// phases. The meta "rekey" mark makes an interrupted re-key resume at Open.
func (f *Frontier) rekey(n int) error {
	err := f.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		return errors.Join(
			meta.Put(mRekey, []byte{1}),
			meta.Put(mNPhase, binary.BigEndian.AppendUint64(nil, uint64(n))),
			meta.Put(mUnit, []byte(f.unitName())),
		)
	})
	if err != nil {
		return fmt.Errorf("re-key queue: %w", err)
	}
	f.nphase.Store(int64(n))
	var pos []byte
	moved := 0
	for done := false; !done; {
		err := f.update(func(tx *bolt.Tx) error {
			q := tx.Bucket(bQueue)
			q.FillPercent = 0.9
			type move struct{ old, new, val []byte }
			var moves []move
			c := q.Cursor()
			var k, v []byte
			if pos == nil {
				k, v = c.First()
			} else if k, v = c.Seek(pos); k != nil && bytes.Equal(k, pos) {
				k, v = c.Next()
			}
			next := pos
			for seen := 0; k != nil && seen < rekeyChunk; k, v = c.Next() {
				seen++
				next = bytes.Clone(k)
				if len(k) != queueKeyLen {
					return fmt.Errorf("corrupt queue key %x", k)
				}
				host, err := queueValueHost(v)
				if err != nil {
					return err
				}
				p := PhaseOf(f.opts.Unit.Hash(host), n)
				if p != int(binary.BigEndian.Uint16(k)) {
					moves = append(moves, move{next, queueKey(nil, p, binary.BigEndian.Uint64(k[2:])), bytes.Clone(v)})
				}
			}
			end := k == nil
			for _, m := range moves {
				if err := q.Delete(m.old); err != nil {
					return err
				}
				if err := q.Put(m.new, m.val); err != nil {
					return err
				}
			}
			if end {
				if err := tx.Bucket(bMeta).Delete(mRekey); err != nil {
					return err
				}
			}
			pos, done = next, end
			moved += len(moves)
			return nil
		})
		if err != nil {
			return fmt.Errorf("re-key queue: %w", err)
		}
	}
	f.log.Info("queue re-keyed", "phases", n, "moved", moved)
	return nil
}
