package frontier

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

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
// fingerprints are left alone. It returns, for each result,
// whether it was recorded.
func (f *Frontier) SettleLent(ctx context.Context, rs []Result) ([]bool, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if err := checkResults("settle lent", rs); err != nil {
		return nil, err
	}
	var done []bool
	_, err := f.submit(ctx, &op{kind: opFunc, results: rs, fn: func(st *txState) (int, error) {
		done = make([]bool, len(rs)) // this run's answer (a failed commit runs it again)
		n := 0
		for i, r := range rs {
			key := keyRef{HostKey(r.Host), r.FP}
			if st.claimed(key) {
				continue // being moved to another node: the result goes there
			}
			r := rs[i]
			if r.Change == ChangeUnknown && r.Page != nil && r.Page.HasDigest() {
				// The holder had no earlier capture to compare with: the
				// record has it.
				if s, ok, err := st.get(key); err != nil {
					return 0, fmt.Errorf("settle lent: %w", err)
				} else if ok && s.Page.HasDigest() {
					r.Change = Changed
					if s.Page.Digest == r.Page.Digest {
						r.Change = Unchanged
					}
				}
			}
			if _, err := st.mark([]keyRef{key}); err != nil {
				return 0, fmt.Errorf("settle lent: %w", err)
			}
			k, err := st.finish([]Result{r})
			if err != nil {
				return 0, fmt.Errorf("settle lent: %w", err)
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

// ScanSince returns up to limit IN_LIST records of phase queued after
// cursor after (nil: from the oldest), oldest first, and the cursor of the
// last one returned (after itself when none is): a caller that keeps it
// reads only the records queued since its last call. One read transaction.
func (f *Frontier) ScanSince(phase int, after Cursor, limit int) ([]Record, Cursor, error) {
	np := f.Phases()
	if phase < 0 || phase >= np {
		return nil, nil, fmt.Errorf("frontier: scan since, phase=%d: must be in 0..%d", phase, np-1)
	}
	prefix := binary.BigEndian.AppendUint16(nil, uint16(phase))
	if after != nil && (len(after) != queueKeyLen || !bytes.HasPrefix(after, prefix)) {
		return nil, nil, fmt.Errorf("frontier: scan since, phase=%d: cursor %x is not a cursor of this phase", phase, []byte(after))
	}
	var recs []Record
	last := after
	err := f.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bQueue).Cursor()
		var k, v []byte
		if after == nil {
			k, v = c.Seek(prefix)
		} else if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(recs) < limit; k, v = c.Next() {
			rec, err := decodeQueueValue(v)
			if err != nil {
				return fmt.Errorf("%w (key %x)", err, k)
			}
			recs = append(recs, rec)
			last = bytes.Clone(k)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("frontier: scan since, phase %d: %w", phase, err)
	}
	return recs, last, nil
}
