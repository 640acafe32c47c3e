package frontier

import (
	"context"
	"fmt"
)

// Settle records the outcome of one host trip in ONE transaction: the new
// URLs it discovered (as Add), then its fetch results (as Finish), then the
// URLs it did not get to (as Requeue). One transaction instead of three
// saves two group commits per trip, and a crash can never keep a page's
// result without the links found on it. It returns how many URLs were new.
func (f *Frontier) Settle(ctx context.Context, found []NewURL, rs []Result, requeue []uint64) (added int, err error) {
	o, err := f.settleOp(found, rs, requeue)
	if err != nil || o == nil {
		return 0, err
	}
	return f.submit(ctx, o)
}

// settleOp builds the write of Settle; nil when there is nothing to write.
func (f *Frontier) settleOp(found []NewURL, rs []Result, requeue []uint64) (*op, error) {
	for _, r := range rs {
		if r.State != Completed && r.State != Stalled {
			return nil, fmt.Errorf("frontier: settle %016x: state=%s: must be completed or stalled", r.FP, r.State)
		}
	}
	adds := prepareURLs(found)
	if len(adds) == 0 && len(rs) == 0 && len(requeue) == 0 {
		return nil, nil
	}
	return &op{kind: opFunc, adds: adds, results: rs, fps: requeue, fn: func(st *txState) (int, error) {
		n, err := st.add(adds)
		if err != nil {
			return 0, fmt.Errorf("settle: add: %w", err)
		}
		if _, err := st.finish(rs); err != nil {
			return 0, fmt.Errorf("settle: finish: %w", err)
		}
		if _, err := st.requeue(requeue); err != nil {
			return 0, fmt.Errorf("settle: requeue: %w", err)
		}
		return n, nil
	}}, nil
}

// Pending is a write submitted without waiting (MarkInProgressAsync).
type Pending struct{ reply chan opReply }

// Poll reports whether the write has been committed (or has failed) without
// blocking; once done, n and err are its outcome (as Wait's). Poll returns
// done only once.
func (p *Pending) Poll() (done bool, n int, err error) {
	select {
	case r := <-p.reply:
		return true, r.n, r.err
	default:
		return false, 0, nil
	}
}

// Wait blocks until the write is committed or has failed; n is what the
// write reports (for SettleAsync: how many URLs were new).
func (p *Pending) Wait() (n int, err error) {
	r := <-p.reply
	return r.n, r.err
}

// SettleAsync is Settle without waiting for the commit (see Pending). The
// writer applies writes in submission order, so a later write never
// overtakes it.
func (f *Frontier) SettleAsync(ctx context.Context, found []NewURL, rs []Result, requeue []uint64) *Pending {
	p := &Pending{reply: make(chan opReply, 1)}
	o, err := f.settleOp(found, rs, requeue)
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

// MarkInProgressAsync is MarkInProgress without waiting for the commit.
// Writes are applied in the order they are submitted, so a Settle or
// Requeue submitted after this call is applied after it. Until the write
// is done, a Scan may still return these URLs as IN_LIST: the caller must
// skip them itself. Every submitted write is answered, also at Close.
func (f *Frontier) MarkInProgressAsync(ctx context.Context, fps []uint64) *Pending {
	p := &Pending{reply: make(chan opReply, 1)}
	if len(fps) == 0 {
		p.reply <- opReply{}
		return p
	}
	o := &op{kind: opMark, fps: fps, ctx: ctx, reply: p.reply}
	if err := f.send(ctx, o); err != nil {
		p.reply <- opReply{err: err}
	}
	return p
}

// send hands o (ctx and reply set) to the writer without waiting for it.
func (f *Frontier) send(ctx context.Context, o *op) error {
	name := opNames[o.kind]
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
