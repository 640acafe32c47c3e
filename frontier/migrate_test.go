package frontier

import (
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// downgradeV1 rewrites f's file (closed) in the version 1 layout: records,
// inprogress and stalled entries keyed by fingerprint alone.
func downgradeV1(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for _, m := range []struct {
			from, to []byte
			fpAt     int // offset of hk|fp in the v2 key
		}{{bURLs, v1URLs, 0}, {bInProgress, v1InProgress, 0}, {bStalled, v1Stalled, 8}} {
			old, err := tx.CreateBucket(m.to)
			if err != nil {
				return err
			}
			err = tx.Bucket(m.from).ForEach(func(k, v []byte) error {
				nk := append(append([]byte(nil), k[:m.fpAt]...), k[m.fpAt+4:]...) // drop the HostKey
				return old.Put(nk, append([]byte(nil), v...))
			})
			if err != nil {
				return err
			}
			if err := tx.DeleteBucket(m.from); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(mVersion, []byte{1})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrateV1: a version 1 file (records by fingerprint) opens as version
// 2 with every record, queue position, IN_PROGRESS URL (recovered to
// IN_LIST) and STALLED URL kept, in several chunks.
func TestMigrateV1(t *testing.T) {
	defer func(n int) { migrateChunk = n }(migrateChunk)
	migrateChunk = 7
	f := open(t, func(o *Options) { o.MaxTries = 5 })
	us := gen("m", 4, 40)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	refs := refsOf(us)
	if err := f.MarkInProgress(ctx, refs[:12]); err != nil {
		t.Fatal(err)
	}
	retry := time.Unix(2_000_000_000, 0)
	var rs []Result
	for i, r := range refs[:8] {
		st := Completed
		if i%2 == 1 {
			st = Stalled
		}
		rs = append(rs, Result{FP: r.FP, Host: r.Host, State: st, Status: 200, RetryAt: retry})
	}
	if err := f.Finish(ctx, rs); err != nil {
		t.Fatal(err)
	}
	before := scanAll(t, f, 0, 0)
	o := f.opts
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	downgradeV1(t, o.Path)

	g, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// The 4 IN_PROGRESS URLs are back in the queue, at their positions.
	wantCounts(t, g, Counts{InList: 32, Completed: 4, Stalled: 4})
	var want []string
	for _, u := range us[8:] {
		want = append(want, u.URL)
	}
	if got := urlsOf(scanAll(t, g, 0, 0)); !slices.Equal(got, want) || len(before) != 28 {
		t.Fatalf("queue after migration %v, want %v", got, want)
	}
	for i, u := range us {
		r := mustGet(t, g, u.URL)
		want := InList
		switch {
		case i < 8 && i%2 == 0:
			want = Completed
		case i < 8:
			want = Stalled
		}
		if r.State != want || r.Host != u.Host || r.Depth != u.Depth {
			t.Fatalf("%s after migration: %+v, want state %s", u.URL, r, want)
		}
	}
	if k, err := g.Add(ctx, us); err != nil || k != 0 {
		t.Fatalf("Add after migration added %d known URLs (%v)", k, err)
	}
	if n, err := g.ReleaseStalled(ctx, retry, 0); err != nil || n != 4 {
		t.Fatalf("ReleaseStalled after migration = %d, %v; want 4", n, err)
	}
	err = g.view(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{v1URLs, v1InProgress, v1Stalled} {
			if tx.Bucket(b) != nil {
				t.Errorf("version 1 bucket %q left", b)
			}
		}
		if v := tx.Bucket(bMeta).Get(mVersion); len(v) != 1 || v[0] != formatVersion {
			t.Errorf("version %v after migration", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrateV1Corrupt: a version 1 file without its urls bucket is an
// error that names the missing bucket, not a panic.
func TestMigrateV1Corrupt(t *testing.T) {
	f := open(t, nil)
	if _, err := f.Add(ctx, gen("c", 2, 5)); err != nil {
		t.Fatal(err)
	}
	o := f.opts
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	downgradeV1(t, o.Path)
	db, err := bolt.Open(o.Path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(v1URLs) }); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	g, err := Open(o)
	if err == nil {
		_ = g.Close()
		t.Fatal("Open of a version 1 file without urls succeeded")
	}
	if !strings.Contains(err.Error(), `without a "urls" bucket`) || !strings.Contains(err.Error(), o.Path) {
		t.Fatalf("error = %v", err)
	}
}
