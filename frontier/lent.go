package frontier

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

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
