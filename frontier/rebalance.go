package frontier

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Moving records between nodes (cluster rebalance). When the cluster's
// membership changes, a node hands the records another member now owns to
// that member: IN_LIST and STALLED URLs to be crawled there, and the
// fingerprints of COMPLETED ones so that they are never crawled again. The
// move is safe against crashes and against the node's own scheduler:
//
//  1. ScanRecords finds the records to move (short read transactions).
//  2. Claim takes them out of the crawl in one write: an IN_LIST or STALLED
//     record becomes IN_PROGRESS with a claim mark, so neither the scheduler
//     nor the retry lane picks it any more; COMPLETED records stay as they are.
//  3. The caller files them durably elsewhere (the cluster's outbox).
//  4. Remove deletes each record only if it is still as Claim left it. A
//     record the scheduler had read just before the claim and fetched anyway
//     is COMPLETED by then: it stays, and the next pass moves its fingerprint.
//
// A crash between 2 and 4 leaves claimed records IN_PROGRESS, which Open
// puts back to IN_LIST like any other: the next rebalance moves them again
// (the receiver deduplicates). Requeue undoes a claim whose step 3 failed.
// The receiving node stores moved COMPLETED records with AddDone.

// claimMarker ends the value of a running entry written by Claim (seq,
// then this byte); MarkInProgress writes the seq alone.
const claimMarker = 0xC1

// DefaultScanRecords is the number of records ScanRecords visits when its
// limit is <= 0.
const DefaultScanRecords = 4096

// ScanRecords visits the records (every state) in key order (by HostKey,
// then fingerprint), from cursor from on (nil: from the first), at most
// limit of them (<= 0: DefaultScanRecords) in one read transaction, and
// returns those whose fingerprint match accepts (every one when match is
// nil), decoded. Only the keys of the others are read. next is the cursor
// to start the following call from; end is true when the last record was
// visited. match must be fast; it runs inside the read transaction.
func (f *Frontier) ScanRecords(from Cursor, limit int, match func(fp uint64) bool) (recs []Record, next Cursor, end bool, err error) {
	if limit <= 0 {
		limit = DefaultScanRecords
	}
	err = f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bURLs).Cursor()
		visited := 0
		var k, v []byte
		if from == nil {
			k, v = c.First()
		} else {
			k, v = c.Seek(from)
		}
		for ; k != nil; k, v = c.Next() {
			if visited == limit {
				next = bytes.Clone(k)
				return nil
			}
			visited++
			_, fp, ok := parseRecKey(k)
			if !ok {
				return fmt.Errorf("corrupt %s key %x", bURLs, k)
			}
			if match != nil && !match(fp) {
				continue
			}
			s, err := decodeRecord(fp, v)
			if err != nil {
				return err
			}
			recs = append(recs, s.Record)
		}
		end = true
		return nil
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("frontier: scan records from %x: %w", []byte(from), err)
	}
	return recs, next, end, nil
}

// Claim takes the records of refs out of the crawl so they can be moved to
// another node, in one write: IN_LIST and STALLED records become IN_PROGRESS
// (claimed: off the scan queue and the retry lane), COMPLETED ones are left
// as they are. IN_PROGRESS records (being fetched) and unknown fingerprints
// are skipped. It returns the claimed records with the State they had
// before the claim (InList, Stalled or Completed).
func (f *Frontier) Claim(ctx context.Context, refs []Ref) ([]Record, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	var out []Record
	krs := keyRefs(refs)
	_, err := f.submit(ctx, &op{kind: opFunc, refs: krs, fn: func(st *txState) (int, error) {
		out = out[:0]
		for _, r := range krs {
			s, ok, err := st.get(r)
			if err != nil {
				return 0, err
			}
			if !ok {
				st.ignored++
				continue
			}
			prev := s.Record
			switch s.State {
			case Completed:
				out = append(out, prev)
				continue
			case InList:
				if err := st.dequeue(&s); err != nil {
					return 0, err
				}
				st.cnt[cInList]--
			case Stalled:
				if err := st.stalled.Delete(stalledKey(st.scratch[:0], s.NextTry, r.hk, r.fp)); err != nil {
					return 0, err
				}
				st.cnt[cStalled]--
			default: // IN_PROGRESS: being fetched here
				st.ignored++
				continue
			}
			v := append(binary.BigEndian.AppendUint64(st.slab.take(9), s.seq), claimMarker)
			if err := st.inprog.Put(recKey(st.slab.take(recKeyLen), r.hk, r.fp), v); err != nil {
				return 0, err
			}
			s.State = InProgress
			if err := st.putRecord(&s); err != nil {
				return 0, err
			}
			st.cnt[cInProgress]++
			out = append(out, prev)
		}
		return len(out), nil
	}})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Remove deletes records that were claimed (Claim's answer) and filed
// elsewhere, each only if it is still as Claim left it: a COMPLETED record
// still COMPLETED, an IN_LIST or STALLED one still claimed. It returns how
// many it deleted; the others (fetched in the meantime, or requeued) stay.
func (f *Frontier) Remove(ctx context.Context, claimed []Record) (int, error) {
	if len(claimed) == 0 {
		return 0, nil
	}
	krs := make([]keyRef, len(claimed))
	for i, r := range claimed {
		krs[i] = keyRef{HostKey(r.Host), r.FP}
	}
	return f.submit(ctx, &op{kind: opFunc, refs: krs, fn: func(st *txState) (int, error) {
		n := 0
		for i, r := range claimed {
			key := krs[i]
			s, ok, err := st.get(key)
			if err != nil {
				return 0, err
			}
			if !ok {
				st.ignored++
				continue
			}
			switch {
			case r.State == Completed && s.State == Completed:
				if err := st.unindexDue(&s); err != nil {
					return 0, err
				}
				st.cnt[cCompleted]--
			case r.State != Completed && s.State == InProgress && st.claimed(key):
				if err := st.inprog.Delete(recKey(st.scratch[:0], key.hk, key.fp)); err != nil {
					return 0, err
				}
				st.cnt[cInProgress]--
				if !s.Due.IsZero() {
					st.revisits-- // a queued revisit, filed for its new owner
				}
			default:
				st.ignored++
				continue
			}
			if err := st.urls.Delete(recKey(st.scratch[:0], key.hk, key.fp)); err != nil {
				return 0, err
			}
			n++
		}
		return n, nil
	}})
}

// MarkReplicas relabels COMPLETED records as replicas (reason "replica")
// once their owner has been sent them: this node keeps them as the second
// copy, and a later rebalance does not send them again. Records no longer
// COMPLETED are left alone. It returns how many it relabelled.
func (f *Frontier) MarkReplicas(ctx context.Context, refs []Ref) (int, error) {
	if len(refs) == 0 {
		return 0, nil
	}
	krs := keyRefs(refs)
	return f.submit(ctx, &op{kind: opFunc, refs: krs, fn: func(st *txState) (int, error) {
		n := 0
		for _, r := range krs {
			s, ok, err := st.get(r)
			if err != nil {
				return 0, err
			}
			if !ok || s.State != Completed || s.Reason == ReasonReplica {
				st.ignored++
				continue
			}
			s.Reason = ReasonReplica
			if err := st.putRecord(&s); err != nil {
				return 0, err
			}
			n++
		}
		return n, nil
	}})
}

// redue updates the due time of the COMPLETED record s from a copy another
// member sent (due; zero: none). A replica (fresh) takes the owner's due
// time as it is: the owner sends it after each fetch. A record moved by a
// rebalance takes it when it is earlier and this node did not fetch the
// page itself: the moved copy may be the owner's and this one a replica
// whose release was refused (pushed back); a page fetched here keeps the
// due time of that fetch (the moved copy may be a replica the fetch's
// update has not reached yet). Otherwise it is left alone (counted as
// ignored).
func (st *txState) redue(s *stored, due time.Time, fresh bool) error {
	copied := s.Reason == ReasonReplica || s.Reason == ReasonMoved || s.Reason == reasonDoneElsewhere
	if due.IsZero() || due.Equal(s.Due) || (!fresh && (!copied || !s.Due.IsZero() && !due.Before(s.Due))) {
		st.ignored++
		return nil
	}
	if err := st.unindexDue(s); err != nil {
		return err
	}
	s.Due = due
	if s.Page.Interval == 0 {
		s.Page.Interval = max(due.Sub(st.now), 0)
	}
	if err := st.indexDue(s); err != nil {
		return err
	}
	return st.putRecord(s)
}

// claimed reports whether r's running entry was written by Claim.
func (st *txState) claimed(r keyRef) bool {
	v := st.inprog.Get(recKey(st.scratch[:0], r.hk, r.fp))
	return len(v) == 9 && v[8] == claimMarker
}

// AddDone stores URLs that were fetched (or given up on) by another node
// and moved here by a rebalance, as COMPLETED, so that they are never
// crawled here: an unknown URL is inserted COMPLETED (reason "moved"; the
// host's MaxPerHost does not apply, the URL was admitted elsewhere), an
// IN_LIST or STALLED one becomes COMPLETED (reason "done_elsewhere"), a
// COMPLETED one takes the sent due time when it is earlier (redue), an
// IN_PROGRESS one is left alone. It returns how many
// records it inserted or completed, once durable.
func (f *Frontier) AddDone(ctx context.Context, urls []NewURL) (int, error) {
	return f.addDone(ctx, urls, ReasonMoved, true)
}

// Reasons of COMPLETED records this node did not fetch itself.
const (
	// ReasonMoved: fetched by another node, moved here by a rebalance (AddDone).
	ReasonMoved = "moved"
	// ReasonReplica: fetched by the URL's owner, kept here as its second
	// copy so that the URL is not crawled again should the owner fail
	// (AddReplicas).
	ReasonReplica = "replica"
	// reasonDoneElsewhere: queued here, fetched by another node (AddDone).
	reasonDoneElsewhere = "done_elsewhere"
)

// AddReplicas stores the fingerprints of URLs their owner fetched, kept
// here as the second copy (reason "replica"): like AddDone, but a replica
// counts against no host's MaxPerHost here, and a COMPLETED record takes
// the sent due time (the owner's next revisit) as it is.
func (f *Frontier) AddReplicas(ctx context.Context, urls []NewURL) (int, error) {
	return f.addDone(ctx, urls, ReasonReplica, false)
}

func (f *Frontier) addDone(ctx context.Context, urls []NewURL, reason string, admit bool) (int, error) {
	adds := prepareURLs(urls)
	if len(adds) == 0 {
		return 0, nil
	}
	return f.submit(ctx, &op{kind: opFunc, adds: adds, fn: func(st *txState) (int, error) {
		n := 0
		for i := range adds {
			u := &adds[i]
			s, ok, err := st.get(keyRef{u.hk, u.fp})
			if err != nil {
				return 0, err
			}
			if !ok {
				hs, err := st.host(u.host)
				if err != nil {
					return 0, err
				}
				st.seq++
				s = stored{Record: Record{FP: u.fp, URL: u.url, Host: u.host, Depth: u.depth, State: Completed,
					Reason: reason, Discovered: st.now, Due: u.due}, seq: st.seq}
				if admit {
					hs.Admitted++
				}
			} else {
				switch s.State {
				case InList:
					if err := st.dequeue(&s); err != nil {
						return 0, err
					}
					st.cnt[cInList]--
				case Stalled:
					if err := st.stalled.Delete(stalledKey(st.scratch[:0], s.NextTry, u.hk, u.fp)); err != nil {
						return 0, err
					}
					st.cnt[cStalled]--
				case Completed:
					if err := st.redue(&s, u.due, reason == ReasonReplica); err != nil {
						return 0, err
					}
					continue
				default:
					st.ignored++
					continue
				}
				if !s.Due.IsZero() {
					st.revisits-- // a queued revisit: the other member fetched it
				}
				s.State, s.Reason, s.NextTry, s.Due = Completed, reasonDoneElsewhere, time.Time{}, u.due
				if reason == ReasonReplica {
					s.Reason = ReasonReplica
				}
			}
			if !u.due.IsZero() && s.Page.Interval == 0 {
				// Not sent along: the time to its due time stands in for
				// it (a refused release is looked at again this much later).
				s.Page.Interval = max(u.due.Sub(st.now), 0)
			}
			if err := st.indexDue(&s); err != nil {
				return 0, err
			}
			if err := st.putRecord(&s); err != nil {
				return 0, err
			}
			st.cnt[cCompleted]++
			n++
		}
		return n, nil
	}})
}
