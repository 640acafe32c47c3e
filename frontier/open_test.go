package frontier

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestLockedFile(t *testing.T) {
	f := open(t, nil)
	start := time.Now()
	g, err := Open(f.opts)
	if err == nil {
		_ = g.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
	if !strings.Contains(err.Error(), "locked by another process") || !errors.Is(err, bolt.ErrTimeout) {
		t.Fatalf("error = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Open waited %s for the lock", d)
	}
	// The first handle still works.
	if _, err := f.Add(ctx, gen("l", 1, 3)); err != nil {
		t.Fatal(err)
	}
}

func TestForeignFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) func(string) error {
		return func(p string) error {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			return os.WriteFile(p, b, 0o600)
		}
	}
	boltWith := func(fn func(tx *bolt.Tx) error) func(string) error {
		return func(p string) error {
			db, err := bolt.Open(p, 0o600, nil)
			if err != nil {
				return err
			}
			return errors.Join(db.Update(fn), db.Close())
		}
	}
	frontierThen := func(fn func(tx *bolt.Tx) error) func(string) error {
		return func(p string) error {
			f, err := Open(Options{Path: p, NoSync: true})
			if err != nil {
				return err
			}
			if _, err := f.Add(ctx, gen("x", 3, 50)); err != nil {
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			return boltWith(fn)(p)
		}
	}
	tests := []struct {
		name  string
		setup func(path string) error
		want  string
	}{
		{"random 16 KiB", random(16 << 10), "not a bbolt file or corrupt"},
		{"random 100 bytes", random(100), "not a bbolt file or corrupt"},
		{"text", func(p string) error { return os.WriteFile(p, []byte("hello, world\n"), 0o600) }, "not a bbolt file or corrupt"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o700) }, "frontier: open"},
		{"other bbolt app", boltWith(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("users"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		}), `not a phasecrawl frontier: bbolt file without a "meta" bucket`},
		{"meta of another app", boltWith(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("meta"))
			if err != nil {
				return err
			}
			return b.Put([]byte("format"), []byte("something-else"))
		}), "not a phasecrawl frontier: format marker"},
		{"future version", frontierThen(func(tx *bolt.Tx) error {
			return tx.Bucket(bMeta).Put(mVersion, []byte{9})
		}), "unsupported frontier format version"},
		{"missing bucket", frontierThen(func(tx *bolt.Tx) error {
			return tx.DeleteBucket(bQueue)
		}), `bucket "queue" missing`},
		{"bad counts", frontierThen(func(tx *bolt.Tx) error {
			return tx.Bucket(bMeta).Put(mCounts, []byte{1, 2})
		}), "meta counts"},
		{"corrupt in-progress record", frontierThen(func(tx *bolt.Tx) error {
			u := gen("x", 3, 50)[0]
			k := recKey(nil, HostKey(u.Host), Fingerprint(u.URL))
			return errors.Join(tx.Bucket(bURLs).Put(k, []byte{1, 2, 3}), tx.Bucket(bInProgress).Put(k, []byte{0}))
		}), "corrupt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.db")
			if err := tc.setup(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			f, err := Open(Options{Path: path, NoSync: true})
			if err == nil {
				_ = f.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error = %v, want it to name the path and contain %q", err, tc.want)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Fatal("Open modified a foreign file")
			}
		})
	}
}

func TestTruncatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	f, err := Open(Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add(ctx, gen("tr", 50, 3000)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()/3); err != nil {
		t.Fatal(err)
	}
	g, err := Open(Options{Path: path, NoSync: true})
	if err == nil {
		// bbolt may not notice at open; reads must then fail, not crash.
		defer g.Close()
		_, err = g.Scan(0, nil, 0, func(Record) bool { return true })
	}
	if err == nil {
		t.Fatal("truncated file read without error")
	}
	t.Logf("truncated file: %v", err)
}

// TestEmptyFileIsNew: an empty file (a crash between its creation and the
// first write) opens as a new, empty frontier that takes URLs and keeps them.
func TestEmptyFileIsNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Counts(); c.Total() != 0 {
		t.Errorf("new frontier counts %+v, want none", c)
	}
	if n, err := f.Add(ctx, []NewURL{{URL: "http://a.test/x"}}); err != nil || n != 1 {
		t.Fatalf("Add to the new frontier: %d added, %v", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := Open(Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if c := g.Counts(); c.InList != 1 || c.Total() != 1 {
		t.Errorf("reopened frontier counts %+v, want the one URL in the list", c)
	}
}

func TestClose(t *testing.T) {
	f := open(t, func(o *Options) { o.BatchDelay = 50 * time.Millisecond })
	// Adds racing with Close either succeed (and are durable) or get ErrClosed.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok []NewURL
	for i := range 8 {
		wg.Go(func() {
			us := gen("cl"+string(rune('a'+i)), 2, 50)
			_, err := f.Add(ctx, us)
			switch {
			case err == nil:
				mu.Lock()
				ok = append(ok, us...)
				mu.Unlock()
			case !errors.Is(err, ErrClosed):
				t.Error(err)
			}
		})
	}
	// Close while the Adds are under way: some in the batch (BatchDelay
	// holds it 50 ms), some not yet begun. The moment is the point; no
	// state to wait for.
	time.Sleep(5 * time.Millisecond)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := f.Add(ctx, gen("z", 1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
	if err := f.MarkInProgress(ctx, []Ref{{FP: 1, Host: "h.test"}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("MarkInProgress after Close: %v", err)
	}
	if _, err := f.Scan(0, nil, 1, func(Record) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Scan after Close: %v", err)
	}
	if _, _, err := f.Get(Ref{FP: 1, Host: "h.test"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	g, err := Open(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, u := range ok {
		if _, found, err := g.Get(RefOf(u.URL)); err != nil || !found {
			t.Fatalf("acknowledged %s lost at Close", u.URL)
		}
	}
}

func TestContext(t *testing.T) {
	f := open(t, func(o *Options) { o.BatchDelay = 0 })
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.Add(cctx, gen("ctx", 1, 3)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Add with canceled ctx: %v", err)
	}
	if err := f.Finish(cctx, []Result{{FP: 1, Host: "h.test", State: Completed}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Finish with canceled ctx: %v", err)
	}
	wantCounts(t, f, Counts{})
	// Scan's callback may call writes (no read transaction is held).
	if _, err := f.Add(ctx, gen("ctx", 3, 3000)); err != nil {
		t.Fatal(err)
	}
	n := 0
	_, err := f.Scan(0, nil, 0, func(r Record) bool {
		n++
		return f.MarkInProgress(ctx, []Ref{r.Ref()}) == nil
	})
	if err != nil || n != 3000 {
		t.Fatalf("scan with writes in fn: %d, %v", n, err)
	}
	wantCounts(t, f, Counts{InProgress: 3000})
}
