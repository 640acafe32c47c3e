package frontier

import (
	"bytes"
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
//  2. Tx.Claim takes them out of the crawl in one write: an IN_LIST or
//     STALLED record becomes IN_PROGRESS with a claim mark, so neither the
//     scheduler nor the retry lane picks it any more; COMPLETED records
//     stay as they are.
//  3. The caller files them durably elsewhere (the cluster's outbox).
//  4. Tx.Remove deletes each record only if it is still as Claim left it.
//     A record the scheduler had read just before the claim and fetched
//     anyway is COMPLETED by then: it stays, and the next pass moves its
//     fingerprint.
//
// A crash between 2 and 4 leaves claimed records IN_PROGRESS, which Open
// puts back to IN_LIST like any other: the next rebalance moves them again
// (the receiver deduplicates). Requeue undoes a claim whose step 3 failed;
// AddMoved of a claimed record this node owns again (it came back: its new
// owner left) undoes it too, and the removal then leaves it queued here.
// The receiving node stores moved COMPLETED records with Tx.AddCompleted.
// The writes themselves are the cluster's (cluster.RecordWriter), made with
// Update; the steps of a record are here, in tx.go.

// claimMarker ends the value of a running entry written by claim (seq,
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

// claim takes the record of r out of the crawl so it can be moved to
// another node (see Tx.Claim).
func (st *txState) claim(r keyRef) (Record, bool, error) {
	s, ok, err := st.get(r)
	if err != nil {
		return Record{}, false, err
	}
	if !ok {
		st.ignored++
		return Record{}, false, nil
	}
	prev := s.Record
	switch s.State {
	case Completed:
		return prev, true, nil
	case InList:
		if err := st.dequeue(&s); err != nil {
			return Record{}, false, err
		}
		st.cnt[cInList]--
	case Stalled:
		if err := st.stalled.Delete(stalledKey(st.scratch[:0], s.NextTry, r.hk, r.fp)); err != nil {
			return Record{}, false, err
		}
		st.cnt[cStalled]--
	default: // IN_PROGRESS: being fetched here
		st.ignored++
		return Record{}, false, nil
	}
	v := append(binary.BigEndian.AppendUint64(st.slab.take(9), s.seq), claimMarker)
	if err := st.inprog.Put(recKey(st.slab.take(recKeyLen), r.hk, r.fp), v); err != nil {
		return Record{}, false, err
	}
	s.State = InProgress
	if err := st.putRecord(&s); err != nil {
		return Record{}, false, err
	}
	st.cnt[cInProgress]++
	return prev, true, nil
}

// remove deletes a claimed record if it is still as claim left it (see
// Tx.Remove).
func (st *txState) remove(r Record) (bool, error) {
	key := keyRef{HostKey(r.Host), r.FP}
	s, ok, err := st.get(key)
	if err != nil {
		return false, err
	}
	if !ok {
		st.ignored++
		return false, nil
	}
	switch {
	case r.State == Completed && s.State == Completed:
		if err := st.unindexDue(&s); err != nil {
			return false, err
		}
		st.cnt[cCompleted]--
	case r.State != Completed && s.State == InProgress && st.claimed(key):
		if err := st.inprog.Delete(recKey(st.scratch[:0], key.hk, key.fp)); err != nil {
			return false, err
		}
		st.cnt[cInProgress]--
		if !s.Due.IsZero() {
			st.revisits-- // a queued revisit, filed for its new owner
		}
	default:
		st.ignored++
		return false, nil
	}
	if err := st.urls.Delete(recKey(st.scratch[:0], key.hk, key.fp)); err != nil {
		return false, err
	}
	return true, nil
}

// relabel sets the Reason of the COMPLETED record of r (see Tx.Relabel).
func (st *txState) relabel(r keyRef, reason string) (bool, error) {
	s, ok, err := st.get(r)
	if err != nil {
		return false, err
	}
	if !ok || s.State != Completed || s.Reason == reason {
		st.ignored++
		return false, nil
	}
	s.Reason = reason
	if err := st.putRecord(&s); err != nil {
		return false, err
	}
	return true, nil
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

// unclaim puts the claimed record of r back in the queue (see add).
func (st *txState) unclaim(r keyRef) error {
	s, ok, err := st.get(r)
	if err != nil || !ok || s.State != InProgress {
		return err
	}
	return st.toList(&s)
}

// claimed reports whether r's running entry was written by claim.
func (st *txState) claimed(r keyRef) bool {
	v := st.inprog.Get(recKey(st.scratch[:0], r.hk, r.fp))
	return len(v) == 9 && v[8] == claimMarker
}

// Reasons of COMPLETED records this node did not fetch itself.
const (
	// ReasonMoved: fetched by another node, moved here by a rebalance
	// (Tx.AddCompleted).
	ReasonMoved = "moved"
	// ReasonReplica: fetched by the URL's owner, kept here as its second
	// copy so that the URL is not crawled again should the owner fail
	// (Tx.AddCompleted).
	ReasonReplica = "replica"
	// ReasonCopied: fetched by another node, moved here by a rebalance
	// from a member that kept it only as a replica (Tx.AddCompleted). Its
	// due time may be behind the owner's: it does not replace a COMPLETED
	// record, and the owner's copy, when it comes, replaces it.
	ReasonCopied = "copied"
	// reasonDoneElsewhere: queued here, fetched by another node
	// (Tx.AddCompleted with ReasonMoved).
	reasonDoneElsewhere = "done_elsewhere"
)

// addCompleted stores u as COMPLETED, fetched elsewhere (see
// Tx.AddCompleted); admit counts a new record against its host's
// MaxPerHost.
func (st *txState) addCompleted(u *pendingURL, reason string, admit bool) (bool, error) {
	s, ok, err := st.get(keyRef{u.hk, u.fp})
	if err != nil {
		return false, err
	}
	if !ok {
		hs, err := st.host(u.host)
		if err != nil {
			return false, err
		}
		st.seq++
		s = stored{Record: Record{FP: u.fp, URL: u.url, Host: u.host, Depth: u.depth, Run: u.run, State: Completed,
			Reason: reason, Discovered: st.now, Due: u.due}, seq: st.seq}
		if admit {
			hs.Admitted++
		}
	} else {
		switch s.State {
		case InList:
			if err := st.dequeue(&s); err != nil {
				return false, err
			}
			st.cnt[cInList]--
		case Stalled:
			if err := st.stalled.Delete(stalledKey(st.scratch[:0], s.NextTry, u.hk, u.fp)); err != nil {
				return false, err
			}
			st.cnt[cStalled]--
		case Completed:
			if reason == ReasonCopied {
				// A replica holder's copy does not replace a completed
				// record: it is the owner's word, or came with it.
				st.ignored++
				return false, nil
			}
			if s.Reason == ReasonCopied {
				// Filed from a replica holder's copy: the owner's (its
				// moved record, or its replica) replaces it, due time
				// and all.
				s.Reason = reason
				if err := st.redue(&s, u.due, true); err != nil {
					return false, err
				}
				return false, st.putRecord(&s)
			}
			return false, st.redue(&s, u.due, reason == ReasonReplica)
		default:
			st.ignored++
			return false, nil
		}
		if !s.Due.IsZero() {
			st.revisits-- // a queued revisit: the other member fetched it
		}
		s.State, s.Reason, s.NextTry, s.Due = Completed, reasonDoneElsewhere, time.Time{}, u.due
		if reason == ReasonReplica || reason == ReasonCopied {
			s.Reason = reason
		}
	}
	if !u.due.IsZero() && s.Page.Interval == 0 {
		// Not sent along: the time to its due time stands in for
		// it (a refused release is looked at again this much later).
		s.Page.Interval = max(u.due.Sub(st.now), 0)
	}
	if err := st.indexDue(&s); err != nil {
		return false, err
	}
	if err := st.putRecord(&s); err != nil {
		return false, err
	}
	st.cnt[cCompleted]++
	return true, nil
}
