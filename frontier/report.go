package frontier

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// QueuedByHost counts the URLs not fetched yet (IN_LIST, IN_PROGRESS or
// STALLED) of every host that has one, reading every record in one read
// transaction: its cost grows with the frontier (about a second per
// million records), so callers keep the answer a while.
func (f *Frontier) QueuedByHost() (map[string]int64, error) {
	out := map[string]int64{}
	err := f.view(func(tx *bolt.Tx) error { return queuedByHost(tx, out) })
	if err != nil {
		return nil, fmt.Errorf("frontier: queued URLs by host: %w", err)
	}
	return out, nil
}

// QueuedByHost is Frontier.QueuedByHost for a file opened read-only.
func (r *ReadOnly) QueuedByHost() (map[string]int64, error) {
	out := map[string]int64{}
	err := r.Records(func(s State) bool { return s != Completed }, func(rec Record) error {
		out[rec.Host]++
		return nil
	})
	return out, err
}

func queuedByHost(tx *bolt.Tx, out map[string]int64) error {
	b := tx.Bucket(bURLs)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != recKeyLen {
			return fmt.Errorf("corrupt %s key %x", bURLs, k)
		}
		s, err := decodeRecord(binary.BigEndian.Uint64(k[4:]), v)
		if err != nil {
			return err
		}
		if s.State != Completed {
			out[s.Host]++
		}
	}
	return nil
}
