package frontier

import (
	"context"
	"fmt"
)

// Writes defined outside the store. The frontier's own methods are what
// one node needs; the cluster's operations on the records (moving them in
// a rebalance, keeping replicas, recording the outcomes of lent URLs) are
// writes the cluster package defines (cluster.RecordWriter) and hands to Update.
// They go through the same single writer as every other write, share its
// group commits, and see the records through Tx, whose steps keep the
// queue, the running and retry entries, the due index and the counters
// consistent.

// Write is a write transaction step defined outside the store (see Update).
type Write struct {
	// Name names the write in errors ("claim", "settle lent").
	Name string
	// Items is how many URLs, records or results the write touches: what
	// it counts against Options.BatchSize when the writer gathers a batch.
	Items int
	// Apply makes the write's changes through tx and returns what Update
	// returns. It runs on the writer goroutine inside the write
	// transaction, with the other writes of the batch: it must be quick,
	// must not call the Frontier, and must not keep tx. It may run more
	// than once, as a function given to bbolt's DB.Batch may: it must
	// start over each time, resetting whatever it collects, and read the
	// records from tx only. An error fails the whole transaction, every
	// write of the batch with it: check the input before Update (see
	// Result.Check), so that Apply's errors are the store's (a corrupt
	// record, a failed bbolt write).
	Apply func(tx *Tx) (int, error)
}

// Update applies w in the writer's next group commit and returns once it
// is committed (durable), with what w.Apply returned. When ctx ends first
// the error is ctx's and the write may or may not have been committed (a
// write whose ctx has ended before the writer applies it is dropped).
func (f *Frontier) Update(ctx context.Context, w Write) (int, error) {
	name := w.Name
	if name == "" {
		name = "write"
	}
	if w.Apply == nil {
		return 0, fmt.Errorf("frontier: %s: no Apply", name)
	}
	return f.submit(ctx, &op{kind: opFunc, name: name, n: max(w.Items, 0), fn: func(st *txState) (int, error) {
		return w.Apply(&Tx{st: st})
	}})
}

// Tx is a Write's view of the write transaction: record-level steps that
// keep the store's indexes and counters consistent. A Tx is valid only
// during the Apply it was given to.
type Tx struct {
	st *txState
}

// Get returns the record of r as the transaction sees it (the writes
// applied before in the same batch included).
func (tx *Tx) Get(r Ref) (Record, bool, error) {
	s, ok, err := tx.st.get(keyRef{HostKey(r.Host), r.FP})
	if err != nil {
		return Record{}, false, fmt.Errorf("get %016x: %w", r.FP, err)
	}
	return s.Record, ok, nil
}

// MarkInProgress is Frontier.MarkInProgress inside the transaction; it
// returns how many URLs it moved.
func (tx *Tx) MarkInProgress(refs []Ref) (int, error) {
	return tx.st.mark(keyRefs(refs))
}

// Finish is Frontier.Finish inside the transaction; it returns how many
// results it recorded (the others were stale). A result that fails
// Result.Check is an error.
func (tx *Tx) Finish(rs []Result) (int, error) {
	if err := checkResults("finish", rs); err != nil {
		return 0, err
	}
	return tx.st.finish(rs)
}

// Claimed reports whether the record of r is IN_PROGRESS because Claim
// took it out of the crawl (it is being moved to another node), not
// because it is being fetched.
func (tx *Tx) Claimed(r Ref) bool {
	return tx.st.claimed(keyRef{HostKey(r.Host), r.FP})
}

// Claim takes the record of r out of the crawl so it can be moved to
// another node (see rebalance.go): an IN_LIST or STALLED record becomes
// IN_PROGRESS with a claim mark (off the scan queue and the retry lane), a
// COMPLETED one is left as it is. It returns the record with the State it
// had before; ok is false, and nothing is written, for an IN_PROGRESS
// record (being fetched) or an unknown one. Requeue undoes a claim, and so
// does Open after a crash.
func (tx *Tx) Claim(r Ref) (rec Record, ok bool, err error) {
	rec, ok, err = tx.st.claim(keyRef{HostKey(r.Host), r.FP})
	if err != nil {
		return Record{}, false, fmt.Errorf("claim %016x: %w", r.FP, err)
	}
	return rec, ok, nil
}

// Remove deletes a record that Claim returned (claimed) and that was filed
// elsewhere, only if it is still as Claim left it: a COMPLETED record
// still COMPLETED, an IN_LIST or STALLED one still claimed. It reports
// whether it deleted it; one fetched in the meantime, or requeued, stays.
func (tx *Tx) Remove(claimed Record) (bool, error) {
	ok, err := tx.st.remove(claimed)
	if err != nil {
		return false, fmt.Errorf("remove %016x: %w", claimed.FP, err)
	}
	return ok, nil
}

// Relabel sets the Reason of the COMPLETED record of r (e.g. ReasonReplica
// once its owner has been sent it). It reports whether it changed it: a
// record that is not COMPLETED, or has that reason already, is left alone.
func (tx *Tx) Relabel(r Ref, reason string) (bool, error) {
	ok, err := tx.st.relabel(keyRef{HostKey(r.Host), r.FP}, reason)
	if err != nil {
		return false, fmt.Errorf("relabel %016x: %w", r.FP, err)
	}
	return ok, nil
}

// AddCompleted stores u, fetched (or given up on) by another node, as
// COMPLETED, so that it is never crawled here; reason is ReasonMoved (a
// record moved here by a rebalance), ReasonReplica (the second copy of
// a page its owner fetched) or ReasonCopied (a record moved here by a
// member that kept it only as a replica). An unknown URL is inserted
// COMPLETED with reason (a moved or copied one counts against its host's
// MaxPerHost, past the limit, as it was admitted elsewhere; a replica
// counts against none). An IN_LIST or STALLED record becomes COMPLETED
// ("done_elsewhere", ReasonReplica or ReasonCopied). A COMPLETED one takes
// u.Due as its due time: a replica's as it is, a moved record's when it
// is earlier and this node did not fetch the page itself, either when the
// record was copied; a copied one's never. An IN_PROGRESS one is left
// alone. A URL without
// a host is ignored. It reports whether it inserted or completed a record.
func (tx *Tx) AddCompleted(u NewURL, reason string) (bool, error) {
	if reason != ReasonMoved && reason != ReasonReplica && reason != ReasonCopied {
		return false, fmt.Errorf("add completed %s: reason %q: must be %q, %q or %q", u.URL, reason, ReasonMoved, ReasonReplica, ReasonCopied)
	}
	pu, ok := prepareURL(u)
	if !ok {
		return false, nil
	}
	done, err := tx.st.addCompleted(&pu, reason, reason != ReasonReplica)
	if err != nil {
		return false, fmt.Errorf("add completed %016x: %w", pu.fp, err)
	}
	return done, nil
}
