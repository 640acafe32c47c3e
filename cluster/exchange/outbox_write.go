package exchange

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// opError marks an error of one operation that wrote nothing: the other
// operations of the same transaction go on.
type opError struct{ error }

func (e opError) Unwrap() error { return e.error }

// obDelta collects the count changes of one transaction, applied in memory
// after it commits.
type obDelta struct {
	counts map[string]int
	total  int
}

func (d *obDelta) add(peer string, n int) {
	if n == 0 {
		return
	}
	d.counts[peer] += n
	d.total += n
}

type obOp struct {
	fn   func(tx *bolt.Tx, d *obDelta) error
	done chan error
	// filing, for a write queued without waiting (QueueEntries), is told
	// its outcome; nil for the others.
	filing *Filing
	// sync marks Sync's op: it writes nothing, and the writer commits
	// what it gathered as soon as it comes (someone waits for it).
	sync bool
}

// answer tells op's caller (and its Filing) the outcome err.
func (op *obOp) answer(err error) {
	if op.filing != nil {
		op.filing.settle(err)
	}
	op.done <- err
}

// Filing is an outbox write queued without waiting for it
// (Outbox.QueueEntries). Its outcome is known once the writer has
// committed it or failed, at the latest when a Sync called after the
// write was queued returns.
type Filing struct {
	state    atomic.Int32 // filingQueued, filingDurable, filingFailed
	onCommit func()       // called once the write is durable (from the writer)
	onFail   func(error)  // called once the write failed (from the writer)
}

const (
	filingQueued int32 = iota
	filingDurable
	filingFailed
)

// Durable reports whether the write is committed; false while it is
// queued or once it failed.
func (f *Filing) Durable() bool { return f != nil && f.state.Load() == filingDurable }

// settle records the write's outcome err.
func (f *Filing) settle(err error) {
	if err != nil {
		f.state.Store(filingFailed)
		if f.onFail != nil {
			f.onFail(err)
		}
		return
	}
	if f.onCommit != nil {
		f.onCommit()
	}
	f.state.Store(filingDurable)
}

// do runs fn in the writer's next transaction and waits until it committed.
// When ctx ends first, do returns ctx.Err() and the change may still commit.
func (o *Outbox) do(ctx context.Context, fn func(tx *bolt.Tx, d *obDelta) error) error {
	op := &obOp{fn: fn, done: make(chan error, 1)}
	select {
	case <-o.quit:
		return ErrOutboxClosed
	default:
	}
	select {
	case o.ops <- op:
	case <-o.quit:
		return ErrOutboxClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-o.stopped: // the writer is gone: op ran before, or never will
		select {
		case err := <-op.done:
			return err
		default:
			return ErrOutboxClosed
		}
	}
}

// writer is the only goroutine writing the file: it coalesces the queued
// operations into one transaction (group commit).
func (o *Outbox) writer() {
	defer o.wg.Done()
	defer close(o.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	gap := o.cfg.Gather / 10
	for {
		var batch []*obOp
		select {
		case op := <-o.ops:
			batch = append(batch, op)
		case <-o.quit:
			o.failQueued()
			return
		}
		var timeout, lull <-chan time.Time
		if o.cfg.Gather > 0 {
			timer.Reset(o.cfg.Gather)
			quiet.Reset(gap)
			timeout, lull = timer.C, quiet.C
		}
	more:
		for len(batch) < 256 {
			if timeout == nil {
				select {
				case op := <-o.ops:
					batch = append(batch, op)
				default:
					break more
				}
				continue
			}
			if batch[len(batch)-1].sync {
				// Sync waits: commit what is here (the ops queued after
				// it go in the next batch).
				break more
			}
			select {
			case op := <-o.ops:
				batch = append(batch, op)
				quiet.Reset(gap)
			case <-timeout:
				timeout = nil // take what is queued now, then commit
			case <-lull:
				timeout = nil // no write for a while: the load is light
			case <-o.quit:
				break more
			}
		}
		timer.Stop()
		quiet.Stop()
		o.commit(batch)
	}
}

func (o *Outbox) failQueued() {
	for {
		select {
		case op := <-o.ops:
			op.answer(ErrOutboxClosed)
		default:
			return
		}
	}
}

func (o *Outbox) commit(batch []*obOp) {
	if !slices.ContainsFunc(batch, func(op *obOp) bool { return !op.sync }) {
		for _, op := range batch {
			op.answer(nil) // Sync alone: the writes before it are committed
		}
		return
	}
	o.commits.Add(1)
	d := &obDelta{counts: map[string]int{}}
	errs := make([]error, len(batch))
	err := o.db.Update(func(tx *bolt.Tx) error {
		for i, op := range batch {
			if op.sync {
				continue
			}
			if err := op.fn(tx, d); err != nil {
				var oe opError
				if errors.As(err, &oe) {
					errs[i] = oe.error
					continue
				}
				return err
			}
		}
		cb := tx.Bucket(bkCounts)
		o.mu.Lock()
		defer o.mu.Unlock()
		for peer, n := range d.counts {
			v := o.counts[peer] + n
			var err error
			if v <= 0 {
				err = cb.Delete([]byte(peer))
			} else {
				err = cb.Put([]byte(peer), binary.AppendUvarint(nil, uint64(v)))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if len(batch) > 1 { // find the culprit: run each alone
			for _, op := range batch {
				o.commit([]*obOp{op})
			}
			return
		}
		batch[0].answer(fmt.Errorf("cluster: outbox commit: %w", err))
		return
	}
	o.mu.Lock()
	for peer, n := range d.counts {
		o.counts[peer] += n
		if o.counts[peer] <= 0 {
			delete(o.counts, peer)
		}
	}
	o.total += d.total
	wake := o.wake
	o.mu.Unlock()
	for i, op := range batch {
		op.answer(errs[i])
	}
	if wake != nil {
		for _, peer := range slices.Sorted(maps.Keys(d.counts)) {
			if d.counts[peer] > 0 {
				wake(peer)
			}
		}
	}
}
