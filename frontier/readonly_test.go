package frontier

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestReadOnlyRecords: a frontier left with records in every state is read
// back, each with its state, depth, tries and reason, without a write to
// the file (its IN_PROGRESS record stays IN_PROGRESS, its size and
// modification time do not change).
func TestReadOnlyRecords(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "frontier.db")
	f, err := Open(Options{Path: path, NoSync: true, MaxTries: 3})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		depth  int
		set    func(u NewURL, ref Ref) error
		state  State
		tries  int
		reason string
	}{
		{"in_list", 0, func(NewURL, Ref) error { return nil }, InList, 0, ""},
		{"in_progress", 3, func(_ NewURL, r Ref) error { return f.MarkInProgress(ctx, []Ref{r}) }, InProgress, 0, ""},
		{"completed", 2, func(_ NewURL, r Ref) error {
			if err := f.MarkInProgress(ctx, []Ref{r}); err != nil {
				return err
			}
			return f.Finish(ctx, []Result{{FP: r.FP, Host: r.Host, State: Completed, Status: 200, Reason: "ok"}})
		}, Completed, 1, "ok"},
		{"stalled", 5, func(_ NewURL, r Ref) error {
			if err := f.MarkInProgress(ctx, []Ref{r}); err != nil {
				return err
			}
			return f.Finish(ctx, []Result{{FP: r.FP, Host: r.Host, State: Stalled, Reason: "timeout", RetryAt: time.Now().Add(time.Hour)}})
		}, Stalled, 1, "timeout"},
		{"replica", 1, func(u NewURL, _ Ref) error { _, err := addCompleted(f, []NewURL{u}, ReasonReplica); return err }, Completed, 0, ReasonReplica},
		{"moved", 4, func(u NewURL, _ Ref) error { _, err := addCompleted(f, []NewURL{u}, ReasonMoved); return err }, Completed, 0, ReasonMoved},
	}
	want := map[string]int{}
	for i, tc := range cases {
		u := NewURL{URL: fmt.Sprintf("http://h%d.example/%s", i%2, tc.name), Depth: tc.depth}
		if tc.reason != ReasonReplica && tc.reason != ReasonMoved {
			if n, err := f.Add(ctx, []NewURL{u}); err != nil || n != 1 {
				t.Fatalf("%s: add: %d %v", tc.name, n, err)
			}
		}
		if err := tc.set(u, RefOf(u.URL)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want[u.URL] = i
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st0, _ := os.Stat(path)

	r, err := OpenReadOnly(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = r.Records(nil, func(rec Record) error {
		i, ok := want[rec.URL]
		if !ok {
			return fmt.Errorf("unexpected record %s", rec.URL)
		}
		tc := cases[i]
		if rec.State != tc.state || rec.Depth != tc.depth || rec.Tries != tc.tries || rec.Reason != tc.reason ||
			rec.FP != Fingerprint(rec.URL) || rec.Host == "" {
			t.Errorf("%s: read %+v, want state %s depth %d tries %d reason %q", tc.name, rec, tc.state, tc.depth, tc.tries, tc.reason)
		}
		seen[rec.URL] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(cases) {
		t.Errorf("read %d records, want %d", len(seen), len(cases))
	}
	// A state filter: only the unfinished ones.
	var unfinished []State
	err = r.Records(func(s State) bool { return s != Completed }, func(rec Record) error {
		unfinished = append(unfinished, rec.State)
		return nil
	})
	if err != nil || len(unfinished) != 3 {
		t.Errorf("unfinished records: %v %v, want 3 (in_list, in_progress, stalled)", unfinished, err)
	}
	c, err := r.Count()
	if err != nil || c != (Counts{InList: 1, InProgress: 1, Completed: 3, Stalled: 1}) {
		t.Errorf("Count = %+v %v", c, err)
	}
	// fn's error stops the walk.
	stop := errors.New("stop")
	n := 0
	if err := r.Records(nil, func(Record) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("Records with a failing fn: %v after %d calls", err, n)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(path)
	if st0.Size() != st1.Size() || !st0.ModTime().Equal(st1.ModTime()) {
		t.Errorf("the file changed: %d bytes at %v, then %d at %v", st0.Size(), st0.ModTime(), st1.Size(), st1.ModTime())
	}
	// Nothing was recovered: the IN_PROGRESS record is still there for Open.
	f, err = Open(Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if c := f.Counts(); c.InList != 2 || c.InProgress != 0 {
		t.Errorf("after a read-only open, Open recovered %+v (want the IN_PROGRESS record back in the list)", c)
	}
}

// TestReadOnlyRefuses: a file a node holds open is refused with ErrLocked;
// missing, foreign and garbage files are errors.
func TestReadOnlyRefuses(t *testing.T) {
	dir := t.TempDir()
	held := filepath.Join(dir, "held.db")
	f, err := Open(Options{Path: held, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	foreign := filepath.Join(dir, "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
		locked           bool
	}{
		{"held by a node", held, "locked by another process", true},
		{"missing", filepath.Join(dir, "none.db"), "no such file", false},
		{"foreign", foreign, "not a phasecrawl frontier", false},
		{"garbage", garbage, "not a bbolt file or corrupt", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := OpenReadOnly(tc.path, 100*time.Millisecond)
			if err == nil {
				r.Close()
				t.Fatal("opened")
			}
			if errors.Is(err, ErrLocked) != tc.locked || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want %q (locked=%v)", err, tc.want, tc.locked)
			}
		})
	}
}
