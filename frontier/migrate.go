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
	// sharedBuckets are the buckets of both versions.
	sharedBuckets = [][]byte{bQueue, bHosts, bMeta}
)

// migrateChunk bounds the entries one migration transaction moves (a
// variable for tests).
var migrateChunk = 10000

// migrateV1 moves a version 1 file's records to the version 2 layout. An
// old key is a prefix (the retry time of a stalled entry, else nothing)
// and a fingerprint; its new key is the prefix and the record's key. The
// inprogress and stalled entries go first: their records, which give the
// host, are still under their old keys then.
func (f *Frontier) migrateV1() error {
	steps := []struct {
		old, new []byte
		fpAt     int // length of the prefix before the fingerprint
	}{{v1InProgress, bInProgress, 0}, {v1Stalled, bStalled, 8}, {v1URLs, bURLs, 0}}
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
				urls := tx.Bucket(v1URLs)
				var olds [][]byte
				c := old.Cursor()
				for k, v := c.First(); k != nil && len(olds) < migrateChunk; k, v = c.Next() {
					olds = append(olds, append([]byte(nil), k...))
					if len(k) != st.fpAt+8 {
						return fmt.Errorf("corrupt %s key %x", st.old, k)
					}
					fpKey := k[st.fpAt:]
					rec := v // the urls bucket's values are the records
					if string(st.old) != string(v1URLs) {
						rec = nil
						if urls != nil {
							rec = urls.Get(fpKey)
						}
					}
					if rec == nil {
						dropped++ // an entry without a record: Open would drop it too
						continue
					}
					fp := binary.BigEndian.Uint64(fpKey)
					s, err := decodeRecord(fp, rec)
					if err != nil {
						return fmt.Errorf("%s key %x: %w", st.old, k, err)
					}
					nk := recKey(append([]byte(nil), k[:st.fpAt]...), HostKey(s.Host), fp)
					if err := nb.Put(nk, append([]byte(nil), v...)); err != nil {
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
