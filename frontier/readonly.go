package frontier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrLocked is wrapped by the errors of OpenReadOnly (and of the cluster's
// read-only outbox) when another process, a running node, holds the file.
var ErrLocked = errors.New("locked by another process (a running node?)")

// DefaultLockTimeout is how long OpenReadOnly waits for the file's shared
// lock when its timeout is 0.
const DefaultLockTimeout = time.Second

// ReadOnly is a frontier file opened for reading only, e.g. the data
// directory of a node that is gone for good: nothing is written (no
// migration, no re-keying, no recovery of IN_PROGRESS records), and while
// it is open no node can open the file (bbolt's shared lock).
type ReadOnly struct {
	db   *bolt.DB
	path string
	v1   bool // records still (or partly) in the format 1 bucket
}

// OpenReadOnly opens the frontier at path for reading. It waits at most
// timeout (0: DefaultLockTimeout) for a shared lock; a file a running node
// holds gives an error wrapping ErrLocked. A missing file, a file that is
// not a phasecrawl frontier or one of an unknown format version is an error.
func OpenReadOnly(path string, timeout time.Duration) (*ReadOnly, error) {
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("frontier: open %s read-only: %w", path, err)
	}
	if err := precheck(path); err != nil {
		return nil, fmt.Errorf("frontier: open %s read-only: not a bbolt file or corrupt: %w", path, err)
	}
	db, err := openReadOnlyBolt(path, timeout)
	if err != nil {
		return nil, err
	}
	r := &ReadOnly{db: db, path: path}
	if err := r.check(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("frontier: open %s read-only: %w", path, err)
	}
	return r, nil
}

func openReadOnlyBolt(path string, timeout time.Duration) (db *bolt.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("frontier: open %s read-only: not a bbolt file or corrupt (%v)", path, p)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout, FreelistType: bolt.FreelistMapType})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, bolt.ErrTimeout):
		return nil, fmt.Errorf("frontier: open %s read-only: %w: no shared lock within %s", path, ErrLocked, timeout)
	case errors.Is(err, bolt.ErrInvalid), errors.Is(err, bolt.ErrChecksum), errors.Is(err, bolt.ErrVersionMismatch):
		return nil, fmt.Errorf("frontier: open %s read-only: not a bbolt file or corrupt: %w", path, err)
	default:
		return nil, fmt.Errorf("frontier: open %s read-only: %w", path, err)
	}
}

// check validates the layout: the format marker, a known version and the
// records bucket(s).
func (r *ReadOnly) check() error {
	return guard(func() error {
		return r.db.View(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bMeta)
			if meta == nil {
				return fmt.Errorf("not a phasecrawl frontier: no %q bucket", bMeta)
			}
			if m := meta.Get(mFormat); string(m) != formatMarker {
				return fmt.Errorf("not a phasecrawl frontier: format marker %q, want %q", m, formatMarker)
			}
			v := meta.Get(mVersion)
			if len(v) != 1 || v[0] != formatVersion && v[0] != 1 {
				return fmt.Errorf("unsupported frontier format version %v (this build reads 1 and %d)", v, formatVersion)
			}
			// A format 1 file may be half migrated: records in both buckets
			// (each record in exactly one).
			r.v1 = tx.Bucket(v1URLs) != nil
			if tx.Bucket(bURLs) == nil && !r.v1 {
				return fmt.Errorf("corrupt frontier: bucket %q missing", bURLs)
			}
			return nil
		})
	})
}

// Path returns the file's path.
func (r *ReadOnly) Path() string { return r.path }

// Records calls fn with every record whose state want accepts (every one
// when want is nil), in key order, in one read transaction. fn's error stops
// the walk and is returned as it is.
func (r *ReadOnly) Records(want func(State) bool, fn func(Record) error) error {
	var fnErr error
	err := guard(func() error {
		return r.db.View(func(tx *bolt.Tx) error {
			for _, b := range []struct {
				name   []byte
				keyLen int
			}{{bURLs, recKeyLen}, {v1URLs, 8}} {
				bk := tx.Bucket(b.name)
				if bk == nil {
					continue
				}
				c := bk.Cursor()
				for k, v := c.First(); k != nil; k, v = c.Next() {
					if len(k) != b.keyLen {
						return fmt.Errorf("corrupt %s key %x", b.name, k)
					}
					s, err := decodeRecord(binary.BigEndian.Uint64(k[len(k)-8:]), v)
					if err != nil {
						return err
					}
					if want != nil && !want(s.State) {
						continue
					}
					if fnErr = fn(s.Record); fnErr != nil {
						return fnErr
					}
				}
			}
			return nil
		})
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("frontier: read %s: %w", r.path, err)
	}
	return nil
}

// Count counts the records by state by reading them all (the persisted
// counters are not trusted: the file may come from a node that was killed).
func (r *ReadOnly) Count() (Counts, error) {
	var c Counts
	err := r.Records(nil, func(rec Record) error {
		switch rec.State {
		case InList:
			c.InList++
		case InProgress:
			c.InProgress++
		case Completed:
			c.Completed++
		case Stalled:
			c.Stalled++
		}
		return nil
	})
	return c, err
}

// Close releases the file.
func (r *ReadOnly) Close() error {
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("frontier: close %s: %w", r.path, err)
	}
	return nil
}
