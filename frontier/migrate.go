package frontier

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Format version 1 kept the records by fingerprint alone:
//
//	urls        fp (8B BE)             -> record
//	inprogress  fp (8B BE)             -> seq [claim marker]
//	stalled     retryAt (8B BE) | fp   -> nil
//
// Version 2 keeps them in host order (recKey: HostKey | fp) in buckets of new
// names, so that a write of one host trip touches few bbolt pages. Open
// migrates a version 1 file in chunked transactions that move entries from
// the old buckets to the new ones (and delete them from the old): a crash
// in the middle leaves both, and the next Open goes on where it stopped.
// The version mark is set to 2 in the transaction that removes the last old
// bucket. The queue, hosts and meta buckets are the same in both versions.
var (
	v1URLs       = []byte("urls")
	v1InProgress = []byte("inprogress")
	v1Stalled    = []byte("stalled")
)

// migrateChunk bounds the entries one migration transaction moves (a
// variable for tests).
var migrateChunk = 10000

// migrateV1 moves a version 1 file's records to the version 2 layout. The
// inprogress and stalled entries go first: their new keys need the host,
// read from the record under its old key.
func (f *Frontier) migrateV1() error {
	steps := []struct {
		old, new []byte
		oldLen   int                                                  // length of an old key
		rekey    func(k []byte, host string) []byte                   // new key from the old one and the record's host
		host     func(tx *bolt.Tx, k, v []byte) (string, bool, error) // the host of an old entry
	}{
		{v1InProgress, bInProgress, 8, func(k []byte, host string) []byte {
			return recKey(nil, HostKey(host), binary.BigEndian.Uint64(k))
		}, v1HostOf(0)},
		{v1Stalled, bStalled, 16, func(k []byte, host string) []byte {
			return recKey(append([]byte(nil), k[:8]...), HostKey(host), binary.BigEndian.Uint64(k[8:]))
		}, v1HostOf(8)},
		{v1URLs, bURLs, 8, func(k []byte, host string) []byte {
			return recKey(nil, HostKey(host), binary.BigEndian.Uint64(k))
		}, func(_ *bolt.Tx, k, v []byte) (string, bool, error) {
			s, err := decodeRecord(binary.BigEndian.Uint64(k), v)
			return s.Host, err == nil, err
		}},
	}
	moved, dropped := 0, 0
	for _, st := range steps {
		for done := false; !done; {
			err := f.update(func(tx *bolt.Tx) error {
				old := tx.Bucket(st.old)
				if old == nil {
					done = true
					return nil
				}
				nb, err := tx.CreateBucketIfNotExists(st.new)
				if err != nil {
					return err
				}
				var olds [][]byte
				c := old.Cursor()
				for k, v := c.First(); k != nil && len(olds) < migrateChunk; k, v = c.Next() {
					olds = append(olds, append([]byte(nil), k...))
					if len(k) != st.oldLen {
						return fmt.Errorf("corrupt %s key %x", st.old, k)
					}
					host, ok, err := st.host(tx, k, v)
					if err != nil {
						return fmt.Errorf("%s key %x: %w", st.old, k, err)
					}
					if !ok {
						dropped++ // an entry without a record: Open would drop it too
						continue
					}
					if err := nb.Put(st.rekey(k, host), append([]byte(nil), v...)); err != nil {
						return err
					}
					moved++
				}
				for _, k := range olds {
					if err := old.Delete(k); err != nil {
						return err
					}
				}
				if len(olds) < migrateChunk {
					done = true
					if err := tx.DeleteBucket(st.old); err != nil {
						return err
					}
					if string(st.old) == string(v1URLs) {
						return tx.Bucket(bMeta).Put(mVersion, []byte{formatVersion})
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("migrate format 1 to %d: %w", formatVersion, err)
			}
		}
	}
	f.log.Info("frontier migrated to format 2 (records in host order)", "entries", moved, "dropped", dropped)
	return nil
}

// v1HostOf returns the host lookup of a version 1 inprogress or stalled
// entry, whose fingerprint is at offset off of its key: the host of its
// record in the version 1 urls bucket.
func v1HostOf(off int) func(tx *bolt.Tx, k, _ []byte) (string, bool, error) {
	return func(tx *bolt.Tx, k, _ []byte) (string, bool, error) {
		urls := tx.Bucket(v1URLs)
		if urls == nil {
			return "", false, nil
		}
		fp := binary.BigEndian.Uint64(k[off:])
		v := urls.Get(k[off : off+8])
		if v == nil {
			return "", false, nil
		}
		s, err := decodeRecord(fp, v)
		return s.Host, err == nil, err
	}
}
