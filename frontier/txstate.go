package frontier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

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
			if u.back && st.claimed(keyRef{u.hk, u.fp}) {
				// Claimed to be moved away, and moved back to this node,
				// its owner now (AddMoved: the member it was filed for
				// left, and the outbox gave it back). It stays, queued:
				// the removal leaves a record no longer as its claim
				// left it, and a next pass moves it if another member
				// owns it.
				if err := st.unclaim(keyRef{u.hk, u.fp}); err != nil {
					return 0, err
				}
				continue
			}
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
