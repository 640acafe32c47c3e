package frontier

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// queuedChunk is how many records one read transaction of QueuedByHost
// reads: a long read transaction would hold up the growth of the file
// (bbolt remaps it only once every reader is done).
const queuedChunk = 4096

// QueuedByHost counts the URLs not fetched yet (IN_LIST, IN_PROGRESS or
// STALLED) of every host that has one, reading every record, in read
// transactions of queuedChunk records: its cost grows with the frontier
// (about a second per million records), so callers keep the answer a
// while. Records written during the walk may be counted or not.
func (f *Frontier) QueuedByHost() (map[string]int64, error) {
	out := map[string]int64{}
	var from []byte
	for {
		var next []byte
		err := f.view(func(tx *bolt.Tx) error {
			var err error
			next, err = queuedByHost(tx, from, queuedChunk, out)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("frontier: queued URLs by host: %w", err)
		}
		if next == nil {
			return out, nil
		}
		from = next
	}
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

// queuedByHost counts into out the queued records among at most limit
// records from the key from on (nil: from the first); it returns the key
// to start the next chunk at, nil at the end.
func queuedByHost(tx *bolt.Tx, from []byte, limit int, out map[string]int64) ([]byte, error) {
	b := tx.Bucket(bURLs)
	if b == nil {
		return nil, nil
	}
	c := b.Cursor()
	k, v := c.First()
	if from != nil {
		k, v = c.Seek(from)
	}
	for n := 0; k != nil; k, v = c.Next() {
		if n == limit {
			return append([]byte(nil), k...), nil // not read: the next chunk starts with it
		}
		n++
		if len(k) != recKeyLen {
			return nil, fmt.Errorf("corrupt %s key %x", bURLs, k)
		}
		s, err := decodeRecord(binary.BigEndian.Uint64(k[4:]), v)
		if err != nil {
			return nil, err
		}
		if s.State != Completed {
			out[s.Host]++
		}
	}
	return nil, nil
}
