package frontier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	bolt "go.etcd.io/bbolt"
)

// The digest index: the first durably archived capture of each payload,
// by the payload's SHA-1, so that a page with the payload of one archived
// before (under any URL, in this round or an earlier one) is archived as
// a revisit record that refers to it (docs/design/dedup.md).
//
// bDigests: payload SHA-1 (20 B) -> capture time (Unix ns, 8 B BE) | URL.
var bDigests = []byte("digests")

// DefaultDigestCache is how many digest index entries the frontier keeps
// in memory (Options.DigestCache's default): about 200 bytes each.
const DefaultDigestCache = 1 << 15

// Capture is a payload's archived capture: the response record a revisit
// record of the same payload refers to (WARC-Refers-To-Target-URI and
// WARC-Refers-To-Date).
type Capture struct {
	Digest [20]byte  // the payload's SHA-1 (its WARC-Payload-Digest)
	URL    string    // the record's WARC-Target-URI
	Date   time.Time // the record's WARC-Date
}

// digestCache is the bounded in-memory part of the digest index: the most
// recently recorded or looked-up entries, in front of the bbolt bucket.
type digestCache = lru.Cache[[20]byte, Capture]

func newDigestCache(size int) (*digestCache, error) {
	return lru.New[[20]byte, Capture](size)
}

// LookupDigest returns the archived capture of the payload whose SHA-1 is
// sum, if the digest index holds one. An entry is in the index only once
// the result that archived it committed with Durable true: its record
// reached the WARC file.
func (f *Frontier) LookupDigest(sum [20]byte) (Capture, bool, error) {
	if c, ok := f.digests.Get(sum); ok {
		return c, true, nil
	}
	var c Capture
	var found bool
	err := f.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bDigests)
		if b == nil {
			return nil
		}
		v := b.Get(sum[:])
		if v == nil {
			return nil
		}
		var err error
		c, err = decodeCapture(sum, v)
		found = err == nil
		return err
	})
	if err != nil {
		return Capture{}, false, fmt.Errorf("frontier: look up a payload digest: %w", err)
	}
	if found {
		f.digests.Add(sum, c)
	}
	return c, found, nil
}

// DigestCacheLen returns how many digest index entries are in memory (at
// most Options.DigestCache).
func (f *Frontier) DigestCacheLen() int { return f.digests.Len() }

func decodeCapture(sum [20]byte, v []byte) (Capture, error) {
	if len(v) < 8 {
		return Capture{}, errors.New("corrupt digest index entry")
	}
	return Capture{Digest: sum, Date: time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(), URL: string(v[8:])}, nil
}

// recordCapture adds c to the digest index unless its digest is there
// already (the first capture stays the one revisits refer to). It runs in
// the write transaction; the cache learns it when the transaction commits.
func (st *txState) recordCapture(c *Capture) error {
	if st.digestB == nil || c == nil || c.URL == "" {
		return nil
	}
	if st.digestB.Get(c.Digest[:]) != nil {
		return nil
	}
	v := binary.BigEndian.AppendUint64(st.slab.take(8+len(c.URL)), uint64(c.Date.UnixNano()))
	v = append(v, c.URL...)
	if err := st.digestB.Put(st.slab.copy(c.Digest[:]), v); err != nil {
		return fmt.Errorf("digest index: %w", err)
	}
	st.captures = append(st.captures, *c)
	return nil
}

// ensureDigests creates the digest index in a file written before it.
func (f *Frontier) ensureDigests() error {
	var have bool
	if err := f.view(func(tx *bolt.Tx) error { have = tx.Bucket(bDigests) != nil; return nil }); err != nil {
		return err
	}
	if have {
		return nil
	}
	err := f.update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket(bDigests)
		return err
	})
	if err != nil {
		return fmt.Errorf("create the digest index: %w", err)
	}
	return nil
}
