package crash

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestDataDirInUse: a second process on a data directory in use exits at once with an error
// that says so and names the file; the first keeps running and stops cleanly.
func TestDataDirInUse(t *testing.T) {
	bin := binary(t)
	data := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	a := start(t, bin, addr, nil, "run", "--data", data, "--http", addr)
	a.waitReady(t, 30*time.Second)
	b := start(t, bin, freeAddr(t), nil, "run", "--data", data, "--http", freeAddr(t))
	err, done := b.exited(30 * time.Second)
	if !done {
		t.Fatalf("a second node on the same data directory is still running\n%s", tail(b.logs.String()))
	}
	logs := b.logs.String()
	if err == nil || !strings.Contains(logs, "locked by another process") || !strings.Contains(logs, filepath.Join(data, "frontier.db")) {
		t.Fatalf("second node: exit %v, stderr:\n%s\nwant a clear error naming the locked file", err, logs)
	}
	if strings.Contains(logs, "panic") || strings.Contains(logs, "goroutine ") {
		t.Fatalf("second node panicked:\n%s", logs)
	}
	a.stop(t, 30*time.Second)
}

// TestCorruptFrontierFile: a frontier file that is garbage, or a bbolt file of another
// program, stops the node with a clear error naming the file, and no panic.
func TestCorruptFrontierFile(t *testing.T) {
	bin := binary(t)
	for name, write := range map[string]func(string) error{
		"random bytes": func(p string) error {
			b := make([]byte, 64<<10)
			rand.New(rand.NewSource(1)).Read(b)
			return os.WriteFile(p, b, 0o600)
		},
		"foreign bbolt file": func(p string) error {
			db, err := bolt.Open(p, 0o600, nil)
			if err != nil {
				return err
			}
			return errors.Join(db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("somebody-elses-data"))
				if err != nil {
					return err
				}
				return b.Put([]byte("k"), []byte("v"))
			}), db.Close())
		},
		"truncated header": func(p string) error { return os.WriteFile(p, []byte("\x00\x01\x02"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			if err := os.MkdirAll(data, 0o755); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(data, "frontier.db")
			if err := write(db); err != nil {
				t.Fatal(err)
			}
			c := start(t, bin, freeAddr(t), nil, "run", "--data", data, "--http", freeAddr(t))
			err, done := c.exited(30 * time.Second)
			if !done {
				t.Fatalf("the node runs on a corrupt frontier file\n%s", tail(c.logs.String()))
			}
			logs := c.logs.String()
			if err == nil || !strings.Contains(logs, db) {
				t.Fatalf("exit %v, stderr:\n%s\nwant an error naming %s", err, logs, db)
			}
			if strings.Contains(logs, "panic") || strings.Contains(logs, "goroutine ") {
				t.Fatalf("panicked:\n%s", logs)
			}
			t.Logf("%s: %s", name, strings.TrimSpace(logs[strings.LastIndex(strings.TrimSpace(logs), "\n")+1:]))
		})
	}
}
