package cluster

import (
	"context"
	"fmt"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// Records is the frontier the cluster layer works on, a node's
// *frontier.Frontier: the only frontier methods the cluster calls.
//   - Add, AddNew and AddMoved file the URLs received for this node
//     (route.go, lentoutcome.go);
//   - Get, Known, ScanSince and Phases read the waiting URLs to lend
//     (lend.go, lendback.go);
//   - ScanRecords reads the records another member now owns, Requeue puts
//     back those a rebalance could not move (rebalance.go);
//   - SetMaxPerHost sets this node's share of scope.max_pages_per_host
//     (view.go);
//   - Update applies the cluster's own writes (RecordWriter).
type Records interface {
	Add(ctx context.Context, urls []frontier.NewURL) (added int, err error)
	AddNew(ctx context.Context, urls []frontier.NewURL) ([]frontier.NewURL, error)
	AddMoved(ctx context.Context, urls []frontier.NewURL, mine func(fp uint64) bool) (int, error)
	Get(r frontier.Ref) (frontier.Record, bool, error)
	Known(refs []frontier.Ref) ([]bool, error)
	ScanSince(phase int, after frontier.Cursor, limit int) ([]frontier.Record, frontier.Cursor, error)
	ScanRecords(from frontier.Cursor, limit int, match func(fp uint64) bool) (recs []frontier.Record, next frontier.Cursor, end bool, err error)
	Requeue(ctx context.Context, refs []frontier.Ref) error
	Phases() int
	SetMaxPerHost(n int)
	Update(ctx context.Context, w frontier.Write) (int, error)
}

// RecordWriter is Records with the writes the cluster makes on them:
// moving records in a rebalance (Claim, Remove, AddDone), keeping the
// second copies of pages other members fetched (AddReplicas, MarkReplicas)
// and recording the outcomes of lent URLs (SettleLent). Each is one write
// given to Records.Update: the frontier's single writer applies it in its
// turn, in a group commit with the node's own writes, and it returns once
// that commit is durable. The records' steps (frontier.Tx) keep the
// frontier's indexes and counters consistent.
//
// RecordWriter is an exchange.URLStore: an exchange can file batches into
// it directly (without the cluster's forwarding).
type RecordWriter struct {
	Records
}

// Claim takes the records of refs out of the crawl so they can be moved to
// another node, in one write (frontier.Tx.Claim): IN_LIST and STALLED
// records become IN_PROGRESS (claimed: off the scan queue and the retry
// lane), COMPLETED ones are left as they are. IN_PROGRESS records (being
// fetched) and unknown fingerprints are skipped. It returns the claimed
// records with the State they had before the claim (InList, Stalled or
// Completed).
func (s RecordWriter) Claim(ctx context.Context, refs []frontier.Ref) ([]frontier.Record, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	var out []frontier.Record
	_, err := s.Update(ctx, frontier.Write{Name: "claim", Items: len(refs), Apply: func(tx *frontier.Tx) (int, error) {
		out = out[:0]
		for _, r := range refs {
			rec, ok, err := tx.Claim(r)
			if err != nil {
				return 0, err
			}
			if ok {
				out = append(out, rec)
			}
		}
		return len(out), nil
	}})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Remove deletes records that were claimed (Claim's answer) and filed
// elsewhere, each only if it is still as Claim left it (frontier.Tx.Remove).
// It returns how many it deleted; the others (fetched in the meantime, or
// requeued) stay.
func (s RecordWriter) Remove(ctx context.Context, claimed []frontier.Record) (int, error) {
	if len(claimed) == 0 {
		return 0, nil
	}
	return s.Update(ctx, frontier.Write{Name: "remove", Items: len(claimed), Apply: func(tx *frontier.Tx) (int, error) {
		n := 0
		for _, r := range claimed {
			ok, err := tx.Remove(r)
			if err != nil {
				return 0, err
			}
			if ok {
				n++
			}
		}
		return n, nil
	}})
}

// MarkReplicas relabels COMPLETED records as replicas (reason "replica")
// once their owner has been sent them: this node keeps them as the second
// copy, and a later rebalance does not send them again. Records no longer
// COMPLETED are left alone. It returns how many it relabelled.
func (s RecordWriter) MarkReplicas(ctx context.Context, refs []frontier.Ref) (int, error) {
	if len(refs) == 0 {
		return 0, nil
	}
	return s.Update(ctx, frontier.Write{Name: "mark replicas", Items: len(refs), Apply: func(tx *frontier.Tx) (int, error) {
		n := 0
		for _, r := range refs {
			ok, err := tx.Relabel(r, frontier.ReasonReplica)
			if err != nil {
				return 0, err
			}
			if ok {
				n++
			}
		}
		return n, nil
	}})
}

// AddDone stores URLs that were fetched (or given up on) by another node
// and moved here by a rebalance, as COMPLETED, so that they are never
// crawled here (frontier.Tx.AddCompleted with frontier.ReasonMoved: an
// unknown URL is inserted past its host's MaxPerHost, an IN_LIST or
// STALLED record is completed, a COMPLETED one may take the sent due time,
// an IN_PROGRESS one is left alone). It returns how many records it
// inserted or completed, once durable.
func (s RecordWriter) AddDone(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return s.addCompleted(ctx, "add done", urls, frontier.ReasonMoved)
}

// AddCopied stores COMPLETED records moved here by a member that kept
// them only as replicas (exchange.KindCopied, frontier.ReasonCopied): as
// AddDone, but a COMPLETED record here stays as it is, and the owner's own
// copy (AddDone, AddReplicas) replaces them when it comes.
func (s RecordWriter) AddCopied(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return s.addCompleted(ctx, "add copied", urls, frontier.ReasonCopied)
}

// AddReplicas stores the fingerprints of URLs their owner fetched, kept
// here as the second copy (frontier.ReasonReplica): like AddDone, but a
// replica counts against no host's MaxPerHost here, and a COMPLETED record
// takes the sent due time (the owner's next revisit) as it is.
func (s RecordWriter) AddReplicas(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return s.addCompleted(ctx, "add replicas", urls, frontier.ReasonReplica)
}

func (s RecordWriter) addCompleted(ctx context.Context, name string, urls []frontier.NewURL, reason string) (int, error) {
	if len(urls) == 0 {
		return 0, nil
	}
	return s.Update(ctx, frontier.Write{Name: name, Items: len(urls), Apply: func(tx *frontier.Tx) (int, error) {
		n := 0
		for _, u := range urls {
			ok, err := tx.AddCompleted(u, reason)
			if err != nil {
				return 0, err
			}
			if ok {
				n++
			}
		}
		return n, nil
	}})
}

// Barrier returns once every write submitted to the frontier before it
// is committed (the writer applies writes in order): a read after it sees
// them, the scheduler's asynchronous IN_PROGRESS marks included.
func (s RecordWriter) Barrier(ctx context.Context) error {
	_, err := s.Update(ctx, frontier.Write{Name: "barrier", Apply: func(*frontier.Tx) (int, error) { return 0, nil }})
	return err
}

// SettleLent records the results of URLs of this frontier that another
// node fetched on its behalf (the cluster lends a waiting URL to the member
// that works on its host's phase now, and keeps the record here): an
// IN_LIST record takes the result as if it had been fetched here (IN_LIST
// -> COMPLETED, or STALLED for a retry, Tries counted, host statistics
// updated); an IN_PROGRESS one (being fetched here as well) takes it too,
// and its own result is then ignored as stale. A result with a page
// digest and no change known (the holder had no earlier capture) is
// compared with the record's digest. Records in any other state,
// records a rebalance claimed (being moved to another node) and unknown
// fingerprints are left alone. It returns, for each result, whether it
// was recorded. A result the frontier cannot record (frontier.Result.Check)
// is an error, and nothing is written.
func (s RecordWriter) SettleLent(ctx context.Context, rs []frontier.Result) ([]bool, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	for _, r := range rs {
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("cluster: settle lent: %w", err)
		}
	}
	var done []bool
	_, err := s.Update(ctx, frontier.Write{Name: "settle lent", Items: len(rs), Apply: func(tx *frontier.Tx) (int, error) {
		done = make([]bool, len(rs)) // this run's answer
		n := 0
		for i, r := range rs {
			ref := frontier.Ref{FP: r.FP, Host: r.Host}
			if tx.Claimed(ref) {
				continue // being moved to another node: the result goes there
			}
			r := rs[i]
			if r.Change == frontier.ChangeUnknown && r.Page != nil && r.Page.HasDigest() {
				// The holder had no earlier capture to compare with: the
				// record has it.
				if rec, ok, err := tx.Get(ref); err != nil {
					return 0, err
				} else if ok && rec.Page.HasDigest() {
					r.Change = frontier.Changed
					if rec.Page.Digest == r.Page.Digest {
						r.Change = frontier.Unchanged
					}
				}
			}
			if _, err := tx.MarkInProgress([]frontier.Ref{ref}); err != nil {
				return 0, err
			}
			k, err := tx.Finish([]frontier.Result{r})
			if err != nil {
				return 0, err
			}
			done[i] = k == 1
			n += k
		}
		return n, nil
	}})
	if err != nil {
		return nil, err
	}
	return done, nil
}
