package frontier

import (
	"context"
	"fmt"
	"time"
)

// Settle records the outcome of one host trip in ONE transaction: the new
// URLs it discovered (as Add), then its fetch results (as Finish), then the
// URLs it did not get to (as Requeue). One transaction instead of three
// saves two group commits per trip, and a crash can never keep a page's
// result without the links found on it. It returns how many URLs were new.
func (f *Frontier) Settle(ctx context.Context, found []NewURL, rs []Result, requeue []Ref) (added int, err error) {
	o, err := f.settleOp(found, rs, requeue, nil)
	if err != nil || o == nil {
		return 0, err
	}
	return f.submit(ctx, o)
}

// settleOp builds the write of Settle; nil when there is nothing to write.
// With tk, new URLs of tk's host are taken for the caller's trip (see
// SettleAsyncTaking).
func (f *Frontier) settleOp(found []NewURL, rs []Result, requeue []Ref, tk *taking) (*op, error) {
	if err := checkResults("settle", rs); err != nil {
		return nil, err
	}
	adds := prepareURLs(found)
	if len(adds) == 0 && len(rs) == 0 && len(requeue) == 0 {
		return nil, nil
	}
	krs := keyRefs(requeue)
	return &op{kind: opFunc, adds: adds, results: rs, refs: krs, fn: func(st *txState) (int, error) {
		if tk != nil {
			tk.got = tk.got[:0] // only what this run of the write took
		}
		n, err := st.add(adds, tk)
		if err != nil {
			return 0, fmt.Errorf("settle: add: %w", err)
		}
		if tk != nil && tk.claim {
			if err := st.claimQueued(tk); err != nil {
				return 0, fmt.Errorf("settle: claim queued URLs of %s: %w", tk.host, err)
			}
		}
		if _, err := st.finish(rs); err != nil {
			return 0, fmt.Errorf("settle: finish: %w", err)
		}
		if _, err := st.requeue(krs); err != nil {
			return 0, fmt.Errorf("settle: requeue: %w", err)
		}
		return n, nil
	}}, nil
}

// Pending is a write submitted without waiting (MarkInProgressAsync,
// SettleAsync).
type Pending struct {
	reply chan opReply
	tk    *taking    // SettleAsyncTaking
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
	host  string // as stored (lower case)
	room  int
	claim bool // also queued URLs of host (SettleAsyncClaiming)
	got   []Taken
}

// Taken is a URL a settle write inserted IN_PROGRESS for the caller's trip
// (SettleAsyncTaking) instead of queueing it.
type Taken struct {
	FP    uint64
	URL   string
	Depth int
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
// write reports (for SettleAsync: how many URLs were new).
func (p *Pending) Wait() (n int, err error) {
	r := <-p.reply
	p.done = r.err == nil
	return r.n, r.err
}

// SettleAsync is Settle without waiting for the commit (see Pending). The
// writer applies writes in submission order, so a later write never
// overtakes it.
func (f *Frontier) SettleAsync(ctx context.Context, found []NewURL, rs []Result, requeue []Ref) *Pending {
	return f.SettleAsyncTaking(ctx, "", 0, found, rs, requeue)
}

// SettleAsyncTaking is SettleAsync for a trip to host with room for more
// URLs: up to room of the URLs of host in found that are new are inserted
// IN_PROGRESS, not queued, for the caller to fetch in the same trip
// (Pending.Taken lists them once the write is done). A host's trip thus
// goes on with the pages its own pages link to instead of ending and
// waiting for another scan, dispatch and worker. The caller owns them as it
// owns its dispatched URLs: it must record each one's result, or Requeue
// it; after a crash they return to IN_LIST like every IN_PROGRESS URL.
// They count as added.
func (f *Frontier) SettleAsyncTaking(ctx context.Context, host string, room int, found []NewURL, rs []Result, requeue []Ref) *Pending {
	return f.settleAsyncTaking(ctx, host, room, false, found, rs, requeue)
}

// SettleAsyncClaiming is SettleAsyncTaking that, when the new URLs of host
// leave room, also takes queued (IN_LIST) URLs of host, up to room in all:
// for the last page of a trip's list, so the trip goes on with what its host
// still has queued (URLs found by other hosts' pages, or by its own beyond
// an earlier trip's room) instead of ending and waiting for another scan,
// dispatch and worker. Such a URL leaves the queue; the caller owns it like
// a taken one. At most claimScan of the host's records are read, so a host
// with many finished URLs costs a bounded read; the queue keeps what they
// miss.
func (f *Frontier) SettleAsyncClaiming(ctx context.Context, host string, room int, found []NewURL, rs []Result, requeue []Ref) *Pending {
	return f.settleAsyncTaking(ctx, host, room, true, found, rs, requeue)
}

func (f *Frontier) settleAsyncTaking(ctx context.Context, host string, room int, claim bool, found []NewURL, rs []Result, requeue []Ref) *Pending {
	p := &Pending{reply: make(chan opReply, 1)}
	var tk *taking
	if room > 0 && host != "" {
		tk = &taking{host: normHost(host), room: room, claim: claim}
		p.tk = tk
	}
	o, err := f.settleOp(found, rs, requeue, tk)
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
