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

// txState is one write transaction's working state.
type txState struct {
	f                                         *Frontier
	now                                       time.Time
	nphase                                    int
	urls, queue, inprog, stalled, hosts, meta *bolt.Bucket
	due, digestB                              *bolt.Bucket
	captures                                  []Capture // added to the digest index, for its cache once committed
	seq                                       uint64
	revisits                                  int64 // released revisits not fetched yet
	cnt                                       [numCounters]int64
	hostCache                                 map[string]*HostStats
	slab                                      slab
	scratch                                   []byte
	ignored                                   int
	undurable                                 int // results put back to IN_LIST: Result.Durable said no
}

func (f *Frontier) newTxState(now time.Time) *txState {
	return &txState{f: f, now: now, nphase: f.Phases(), seq: f.seq, cnt: f.wcnt, revisits: f.wrevisits, scratch: make([]byte, 0, 512)}
}

func (st *txState) begin(tx *bolt.Tx) {
	st.urls = tx.Bucket(bURLs)
	st.queue = tx.Bucket(bQueue)
	st.queue.FillPercent = 0.9 // appended in key order: pack pages
	st.inprog = tx.Bucket(bInProgress)
	st.stalled = tx.Bucket(bStalled)
	st.stalled.FillPercent = 0.9
	st.hosts = tx.Bucket(bHosts)
	st.meta = tx.Bucket(bMeta)
	st.due = tx.Bucket(bDue)
	st.digestB = tx.Bucket(bDigests)
	st.captures = st.captures[:0]
	if st.due != nil {
		st.due.FillPercent = 0.9
	}
	// Start from the committed state: commit runs its function once (DB.Update,
	// never DB.Batch, which may run it twice), and a failed transaction
	// leaves nothing behind.
	st.seq, st.cnt, st.ignored, st.revisits, st.undurable = st.f.seq, st.f.wcnt, 0, st.f.wrevisits, 0
	st.hostCache = make(map[string]*HostStats)
}

// flush writes the cached host stats and the meta counters.
func (st *txState) flush() error {
	for h, hs := range st.hostCache {
		if err := st.hosts.Put(st.slab.copy([]byte(h)), st.slab.copy(appendHost(st.scratch[:0], hs))); err != nil {
			return fmt.Errorf("host %q: %w", h, err)
		}
	}
	c := make([]byte, 0, 8*numCounters)
	for _, v := range st.cnt {
		c = binary.BigEndian.AppendUint64(c, uint64(v))
	}
	err := errors.Join(
		st.meta.Put(mCounts, c),
		st.meta.Put(mSeq, binary.BigEndian.AppendUint64(nil, st.seq)),
	)
	if st.revisits != st.f.wrevisits {
		err = errors.Join(err, st.meta.Put(mRevisits, binary.BigEndian.AppendUint64(nil, uint64(max(st.revisits, 0)))))
	}
	return err
}

func (st *txState) apply(o *op) (int, error) {
	switch o.kind {
	case opAdd:
		return st.add(o.adds, nil, nil)
	case opMark:
		return st.mark(o.refs)
	case opFinish:
		return st.finish(o.results)
	case opRequeue:
		return st.requeue(o.refs)
	case opRelease:
		return st.release(o.now, o.n)
	case opFunc:
		return o.fn(st)
	}
	return 0, fmt.Errorf("unknown op %d", o.kind)
}

func (st *txState) get(r keyRef) (stored, bool, error) {
	v := st.urls.Get(recKey(st.scratch[:0], r.hk, r.fp))
	if v == nil {
		return stored{}, false, nil
	}
	s, err := decodeRecord(r.fp, v)
	return s, err == nil, err
}

// ref is the keyRef of a stored record.
func (s *stored) ref() keyRef { return keyRef{HostKey(s.Host), s.FP} }

func (st *txState) putRecord(s *stored) error {
	st.scratch = appendRecord(st.scratch[:0], s)
	r := s.ref()
	return st.urls.Put(recKey(st.slab.take(recKeyLen), r.hk, r.fp), st.slab.copy(st.scratch))
}

func (st *txState) qkey(s *stored) []byte {
	return queueKey(st.slab.take(queueKeyLen), PhaseOf(st.f.opts.Unit.Hash(s.Host), st.nphase), s.seq)
}

func (st *txState) enqueue(s *stored) error {
	st.scratch = appendQueueValue(st.scratch[:0], s)
	return st.queue.Put(st.qkey(s), st.slab.copy(st.scratch))
}

func (st *txState) dequeue(s *stored) error {
	return st.queue.Delete(st.qkey(s))
}

func (st *txState) host(h string) (*HostStats, error) {
	if hs, ok := st.hostCache[h]; ok {
		return hs, nil
	}
	hs := &HostStats{Host: h}
	if v := st.hosts.Get([]byte(h)); v != nil {
		d, err := decodeHost(h, v)
		if err != nil {
			return nil, err
		}
		*hs = d
	}
	st.hostCache[h] = hs
	return hs, nil
}

// add inserts the new URLs of adds IN_LIST; with tk, up to tk.room new URLs
// of tk.host go IN_PROGRESS instead, for the caller's trip (tk.got).
// add inserts the URLs of adds not known yet; inserted, when not nil (as
// long as adds), is set for each one inserted.
func (st *txState) add(adds []pendingURL, tk *taking, inserted []bool) (int, error) {
	added := 0
	maxPer := st.f.maxPerHost.Load()
	for i := range adds {
		u := &adds[i]
		if st.urls.Get(recKey(st.scratch[:0], u.hk, u.fp)) != nil {
			if !u.due.IsZero() {
				// A revisit moved here by a rebalance, for a URL kept
				// here as COMPLETED (a replica): queue it now.
				if err := st.requeueDone(u); err != nil {
					return 0, err
				}
			} else if !u.mod.IsZero() {
				if err := st.dueIfModified(u); err != nil {
					return 0, err
				}
			}
			continue // known (also when added earlier in this transaction)
		}
		hs, err := st.host(u.host)
		if err != nil {
			return 0, err
		}
		if maxPer > 0 && hs.Admitted >= maxPer {
			st.cnt[cSkipped]++
			if fn := st.f.opts.OnSkipped; fn != nil {
				fn(u.host)
			}
			continue
		}
		st.seq++
		s := stored{Record: Record{FP: u.fp, URL: u.url, Host: u.host, Depth: u.depth, Run: u.run, State: InList, Discovered: st.now, Due: u.due}, seq: st.seq}
		if !u.due.IsZero() {
			st.revisits++
		}
		hs.Admitted++
		added++
		if inserted != nil {
			inserted[i] = true
		}
		if tk != nil && len(tk.got) < tk.room && u.host == tk.host {
			if err := st.putInProgress(&s); err != nil {
				return 0, err
			}
			tk.got = append(tk.got, Taken{FP: u.fp, URL: u.url, Depth: u.depth, Run: u.run})
			continue
		}
		if err := st.putRecord(&s); err != nil {
			return 0, err
		}
		if err := st.enqueue(&s); err != nil {
			return 0, err
		}
		st.cnt[cInList]++
	}
	return added, nil
}

// start moves the IN_LIST record s out of the queue to IN_PROGRESS.
func (st *txState) start(s *stored) error {
	if err := st.dequeue(s); err != nil {
		return err
	}
	if err := st.putInProgress(s); err != nil {
		return err
	}
	st.cnt[cInList]--
	return nil
}

func (st *txState) mark(refs []keyRef) (int, error) {
	n := 0
	for _, r := range refs {
		s, ok, err := st.get(r)
		if err != nil {
			return 0, err
		}
		if !ok || s.State != InList {
			st.ignored++
			continue
		}
		if err := st.start(&s); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// putInProgress writes s as IN_PROGRESS with its running entry (record
// key -> seq) and counts it; s must have no queue entry (dequeued, or new).
func (st *txState) putInProgress(s *stored) error {
	r := s.ref()
	if err := st.inprog.Put(recKey(st.slab.take(recKeyLen), r.hk, r.fp), binary.BigEndian.AppendUint64(st.slab.take(8), s.seq)); err != nil {
		return err
	}
	s.State = InProgress
	if err := st.putRecord(s); err != nil {
		return err
	}
	st.cnt[cInProgress]++
	return nil
}

// toList puts an IN_PROGRESS record back in the queue at its original seq.
func (st *txState) toList(s *stored) error {
	r := s.ref()
	if err := st.inprog.Delete(recKey(st.scratch[:0], r.hk, r.fp)); err != nil {
		return err
	}
	s.State = InList
	if err := st.enqueue(s); err != nil {
		return err
	}
	if err := st.putRecord(s); err != nil {
		return err
	}
	st.cnt[cInProgress]--
	st.cnt[cInList]++
	return nil
}

func (st *txState) requeue(refs []keyRef) (int, error) {
	n := 0
	for _, r := range refs {
		s, ok, err := st.get(r)
		if err != nil {
			return 0, err
		}
		if !ok || s.State != InProgress {
			st.ignored++
			continue
		}
		if err := st.toList(&s); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

func (st *txState) finish(rs []Result) (int, error) {
	n := 0
	for _, r := range rs {
		key := keyRef{HostKey(r.Host), r.FP}
		s, ok, err := st.get(key)
		if err != nil {
			return 0, err
		}
		if !ok || s.State != InProgress {
			st.ignored++
			continue
		}
		if r.Durable != nil && !r.Durable() {
			// Its records were lost (a full disk): fetched again later.
			if err := st.toList(&s); err != nil {
				return 0, err
			}
			st.undurable++
			continue
		}
		if err := st.inprog.Delete(recKey(st.scratch[:0], key.hk, key.fp)); err != nil {
			return 0, err
		}
		// Its records are durable: a payload archived in full is in the
		// digest index from now on.
		if err := st.recordCapture(r.Captured); err != nil {
			return 0, err
		}
		st.cnt[cInProgress]--
		revisit := !s.Due.IsZero()
		free := r.Free && r.State == Stalled
		if !free {
			s.Tries++
		}
		s.Status, s.Reason, s.Fetched = r.Status, r.Reason, st.now
		if r.State == Stalled && (free || s.Tries < st.f.opts.MaxTries) {
			s.State = Stalled
			s.NextTry = r.RetryAt
			if s.NextTry.IsZero() {
				s.NextTry = st.now
			}
			if err := st.stalled.Put(stalledKey(st.slab.take(stalledKeyLen), s.NextTry, key.hk, key.fp), nil); err != nil {
				return 0, err
			}
			st.cnt[cStalled]++
		} else {
			s.State, s.NextTry = Completed, time.Time{}
			st.cnt[cCompleted]++
			if err := st.finishRevisit(&s, &r); err != nil {
				return 0, err
			}
		}
		if err := st.putRecord(&s); err != nil {
			return 0, err
		}
		hs, err := st.host(s.Host)
		if err != nil {
			return 0, err
		}
		hs.Fetched++
		if revisit && hs.RoundFetched > 0 && (hs.LastRoundFetched == 0 || hs.RoundFetched >= hs.Admitted) {
			// A new round: the one before is the host's last round.
			hs.LastRoundFetched, hs.LastRoundBytes = hs.RoundFetched, hs.RoundBytes
			hs.RoundFetched, hs.RoundBytes = 0, 0
			hs.LastRoundTime, hs.RoundTime = hs.RoundTime, 0
		}
		hs.RoundFetched++
		hs.RoundBytes += max(r.Bytes, 0)
		if r.State == Stalled || r.Status >= 400 || (r.Reason != "" && r.Reason != "ok") {
			hs.Errors++
		}
		hs.Bytes += max(r.Bytes, 0)
		hs.LastFetch = st.now
		if r.Delay > 0 {
			hs.Delay = r.Delay
		}
		n++
	}
	return n, nil
}

func (st *txState) release(now time.Time, limit int) (int, error) {
	var due [][]byte
	c := st.stalled.Cursor()
	end := uint64(unixNano(now))
	for k, _ := c.First(); k != nil && len(due) < limit; k, _ = c.Next() {
		if len(k) != stalledKeyLen || binary.BigEndian.Uint64(k) > end {
			break
		}
		due = append(due, bytes.Clone(k))
	}
	n := 0
	for _, k := range due {
		if err := st.stalled.Delete(k); err != nil {
			return 0, err
		}
		hk, fp, _ := parseRecKey(k[8:])
		s, ok, err := st.get(keyRef{hk, fp})
		if err != nil {
			return 0, err
		}
		if !ok || s.State != Stalled {
			st.ignored++
			continue
		}
		s.State = InList
		if err := st.enqueue(&s); err != nil {
			return 0, err
		}
		if err := st.putRecord(&s); err != nil {
			return 0, err
		}
		st.cnt[cStalled]--
		st.cnt[cInList]++
		n++
	}
	return n, nil
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
