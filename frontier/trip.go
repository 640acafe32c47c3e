package frontier

import (
	"context"
	"fmt"
	"time"
)

// SettleRequest is what one host trip, or one page of it, records in ONE
// transaction (Settle): the new URLs it discovered (as Add), then its fetch
// results (as Finish), then the URLs it did not get to (as Requeue). One
// transaction instead of three saves two group commits per trip, and a
// crash can never keep a page's result without the links found on it.
type SettleRequest struct {
	Found   []NewURL // discovered URLs; the known ones are ignored
	Results []Result // fetch results: State Completed or Stalled, with a Host
	Requeue []Ref    // IN_PROGRESS URLs back to IN_LIST at their original position
	// Take, when not nil, asks for more URLs of the trip's host to fetch in
	// the same trip (Pending.Taken lists them once the write is done).
	Take *Take
}

// Take is a settle write's request for URLs of the trip's host: up to Room
// of the URLs of Host in Found that are new are inserted IN_PROGRESS, not
// queued, for the caller to fetch in the same trip. A host's trip thus goes
// on with the pages its own pages link to instead of ending and waiting for
// another scan, dispatch and worker. The caller owns them as it owns its
// dispatched URLs: it must record each one's result, or Requeue it; after
// a crash they return to IN_LIST like every IN_PROGRESS URL. They count as
// added. Nothing is taken when Room <= 0 or Host is empty.
type Take struct {
	Host string
	Room int
}

// Settle submits req's write and returns without waiting for its commit
// (see Pending; Wait for a synchronous call: n is how many URLs were new).
// The writer applies writes in submission order, so a later write never
// overtakes it. A result in a state other than Completed or Stalled, or
// without a host, is an error and nothing is written. ctx bounds the
// submission; a write whose ctx has ended before the writer applies it is
// dropped and answered with ctx's error.
func (f *Frontier) Settle(ctx context.Context, req SettleRequest) *Pending {
	if ctx == nil {
		ctx = context.Background()
	}
	p := &Pending{reply: make(chan opReply, 1)}
	var tk *taking
	if t := req.Take; t != nil && t.Room > 0 && t.Host != "" {
		tk = &taking{host: normHost(t.Host), room: t.Room}
		p.tk = tk
	}
	o, err := f.settleOp(req.Found, req.Results, req.Requeue, tk)
	if err != nil || o == nil {
		p.reply <- opReply{err: err}
		return p
	}
	o.ctx, o.reply = ctx, p.reply
	if err := f.send(ctx, o); err != nil {
		p.reply <- opReply{err: err}
	}
	return p
}

// settleOp builds the write of Settle; nil when there is nothing to write.
// With tk, URLs of tk's host are taken for the caller's trip (see Take).
func (f *Frontier) settleOp(found []NewURL, rs []Result, requeue []Ref, tk *taking) (*op, error) {
	if err := checkResults("settle", rs); err != nil {
		return nil, err
	}
	adds := prepareURLs(found)
	if len(adds) == 0 && len(rs) == 0 && len(requeue) == 0 {
		return nil, nil
	}
	krs := keyRefs(requeue)
	return &op{kind: opFunc, name: "settle", adds: adds, results: rs, refs: krs, fn: func(st *txState) (int, error) {
		if tk != nil {
			tk.got = tk.got[:0] // only what this run of the write took
		}
		n, err := st.add(adds, tk, nil)
		if err != nil {
			return 0, fmt.Errorf("add: %w", err)
		}
		if _, err := st.finish(rs); err != nil {
			return 0, fmt.Errorf("finish: %w", err)
		}
		if _, err := st.requeue(krs); err != nil {
			return 0, fmt.Errorf("requeue: %w", err)
		}
		return n, nil
	}}, nil
}

// Pending is a write submitted without waiting (Settle,
// MarkInProgressAsync, AddRoundTimeAsync). Every submitted write is
// answered, also at Close.
type Pending struct {
	reply chan opReply
	tk    *taking    // Settle with a Take
	host  *HostStats // AddRoundTimeAsync: the host's stats after the write (nil: none)
	done  bool
}

// Host returns, once an AddRoundTimeAsync write is done, the host's
// statistics as the write left them; false for other writes, a host
// without statistics, or before the write is done.
func (p *Pending) Host() (HostStats, bool) {
	if p.host == nil || !p.done || p.host.Host == "" {
		return HostStats{}, false
	}
	return *p.host, true
}

// taking is a settle write's request for the new URLs of the trip's host.
type taking struct {
	host string // as stored (lower case)
	room int
	got  []Taken
}

// Taken is a URL a settle write took IN_PROGRESS for the caller's trip
// (Take): a new one inserted so instead of queued.
type Taken struct {
	FP    uint64
	URL   string
	Depth int
	Run   int
	Due   time.Time // a queued revisit's Due (zero: a first visit)
}

// Taken returns the URLs the write took for the caller's trip, once Poll or
// Wait has reported it done without an error (nil before, or after a failed
// write: then nothing was taken).
func (p *Pending) Taken() []Taken {
	if p.tk == nil || !p.done {
		return nil
	}
	return p.tk.got
}

// Poll reports whether the write has been committed (or has failed) without
// blocking; once done, n and err are its outcome (as Wait's). Poll returns
// done only once.
func (p *Pending) Poll() (done bool, n int, err error) {
	select {
	case r := <-p.reply:
		p.done = r.err == nil
		return true, r.n, r.err
	default:
		return false, 0, nil
	}
}

// Wait blocks until the write is committed or has failed; n is what the
// write reports (for Settle: how many URLs were new).
func (p *Pending) Wait() (n int, err error) {
	r := <-p.reply
	p.done = r.err == nil
	return r.n, r.err
}

// MarkInProgressAsync is MarkInProgress without waiting for the commit.
// Writes are applied in the order they are submitted, so a Settle or
// Requeue submitted after this call is applied after it. Until the write
// is done, a Scan may still return these URLs as IN_LIST: the caller must
// skip them itself. Every submitted write is answered, also at Close.
func (f *Frontier) MarkInProgressAsync(ctx context.Context, refs []Ref) *Pending {
	p := &Pending{reply: make(chan opReply, 1)}
	if len(refs) == 0 {
		p.reply <- opReply{}
		return p
	}
	o := &op{kind: opMark, refs: keyRefs(refs), ctx: ctx, reply: p.reply}
	if err := f.send(ctx, o); err != nil {
		p.reply <- opReply{err: err}
	}
	return p
}

// send hands o (ctx and reply set) to the writer without waiting for it.
func (f *Frontier) send(ctx context.Context, o *op) error {
	name := o.label()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("frontier: %s: %w", name, err)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return ErrClosed
	}
	select {
	case f.ops <- o:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("frontier: %s: %w", name, ctx.Err())
	}
}
