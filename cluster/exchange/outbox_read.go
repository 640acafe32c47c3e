package exchange

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// OutboxReader is an outbox file opened for reading only (the data
// directory of a node that is gone for good): it lists the entries that
// wait for their peers, batches in flight included, and writes nothing.
type OutboxReader struct {
	db   *bolt.DB
	path string
}

// OpenOutboxReadOnly opens the outbox at path for reading. It waits at most
// timeout (0: frontier.DefaultLockTimeout) for a shared lock; a file a
// running node holds gives an error wrapping frontier.ErrLocked.
func OpenOutboxReadOnly(path string, timeout time.Duration) (*OutboxReader, error) {
	if timeout <= 0 {
		timeout = frontier.DefaultLockTimeout
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("cluster: open outbox %s read-only: %w", path, err)
	}
	db, err := openReadOnly(path, timeout)
	if err != nil {
		return nil, err
	}
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bkMeta)
		if meta == nil {
			return errors.New("not a phasecrawl outbox (no meta bucket)")
		}
		if f := meta.Get(keyFormat); !bytes.Equal(f, outboxFmt) {
			return fmt.Errorf("not a phasecrawl outbox (format %q)", f)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cluster: open outbox %s read-only: %w", path, err)
	}
	return &OutboxReader{db: db, path: path}, nil
}

func openReadOnly(path string, timeout time.Duration) (db *bolt.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("cluster: open outbox %s read-only: not a bbolt file or corrupt (%v)", path, p)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout, FreelistType: bolt.FreelistMapType})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, bolt.ErrTimeout):
		return nil, fmt.Errorf("cluster: open outbox %s read-only: %w: no shared lock within %s", path, frontier.ErrLocked, timeout)
	default:
		return nil, fmt.Errorf("cluster: open outbox %s read-only: %w", path, err)
	}
}

// Entries calls fn with every entry waiting in the outbox, peer by peer
// (the member it was filed for) in queue order, in one read transaction.
// An entry that does not decode is an error. fn's error stops the walk and
// is returned as it is.
func (r *OutboxReader) Entries(fn func(peer string, e Entry) error) error {
	var fnErr error
	err := r.db.View(func(tx *bolt.Tx) error {
		q := tx.Bucket(bkQueue)
		if q == nil {
			return nil
		}
		return q.ForEachBucket(func(peer []byte) error {
			name := string(peer)
			return q.Bucket(peer).ForEach(func(k, v []byte) error {
				e, err := decodeEntry(v)
				if err != nil {
					return fmt.Errorf("peer %s entry %x: %w", name, k, err)
				}
				fnErr = fn(name, e)
				return fnErr
			})
		})
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("cluster: read outbox %s: %w", r.path, err)
	}
	return nil
}

// Close releases the file.
func (r *OutboxReader) Close() error {
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("cluster: close outbox %s: %w", r.path, err)
	}
	return nil
}
