package frontier

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCommitNoSpace: on a full file system (a small tmpfs) a commit fails
// with ENOSPC, and nothing of it counts: the counters, the records and the
// writes after it are as if it never ran; once space is back the same
// writes commit. Needs root (mount); CI runs as root.
func TestCommitNoSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	o := DefaultOptions(filepath.Join(dir, "frontier.db"))
	o.BatchDelay = time.Millisecond
	f, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close() }() // the last one opened
	first := gen("s", 4, 100)
	if _, err := f.Add(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkInProgress(ctx, refsOf(first[:10])); err != nil {
		t.Fatal(err)
	}
	before := f.Counts()

	// Fill the file system.
	fill, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 64<<10)
	for {
		if _, err := fill.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	more := gen("m", 50, 2000)
	var results []Result
	for i, u := range first[:10] {
		results = append(results, Result{FP: RefOf(u.URL).FP, Host: u.Host, State: Completed, Status: 200,
			Captured: &Capture{Digest: [20]byte{byte(i + 1)}, URL: u.URL, Date: time.Unix(1700000000, 0)}})
	}
	_, err = f.Settle(ctx, SettleRequest{Found: more, Results: results}).Wait()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("settle on a full disk: %v, want ENOSPC", err)
	}
	if got := f.Counts(); got != before {
		t.Fatalf("a failed commit was counted: %+v, want %+v", got, before)
	}
	if r, ok, err := f.Get(RefOf(first[0].URL)); err != nil || !ok || r.State != InProgress {
		t.Fatalf("a failed commit's result was recorded: %+v %v %v", r, ok, err)
	}
	if _, ok, err := f.Get(RefOf(more[0].URL)); err != nil || ok {
		t.Fatalf("a failed commit's URL was added: %v %v", ok, err)
	}
	if _, ok, err := f.LookupDigest([20]byte{1}); ok || err != nil || f.DigestCacheLen() != 0 {
		t.Fatalf("a failed commit's capture is in the digest index: %v %v, %d in memory", ok, err, f.DigestCacheLen())
	}

	// Space back: the same write commits, counted once.
	fill.Close()
	if err := os.Remove(fill.Name()); err != nil {
		t.Fatal(err)
	}
	added, err := f.Settle(ctx, SettleRequest{Found: more, Results: results}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{InList: before.InList + int64(len(more)), Completed: 10}
	if got := f.Counts(); added != len(more) || got != want {
		t.Fatalf("after space came back: added %d, counts %+v; want %d, %+v", added, got, len(more), want)
	}
	if r, _, err := f.Get(RefOf(first[0].URL)); err != nil || r.State != Completed || r.Tries != 1 {
		t.Fatalf("%+v %v: want COMPLETED after one try", r, err)
	}
	if c, ok, err := f.LookupDigest([20]byte{1}); !ok || err != nil || c.URL != first[0].URL {
		t.Fatalf("the capture of the commit that succeeded: %+v %v %v", c, ok, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened, the file holds what was committed.
	if f, err = Open(o); err != nil {
		t.Fatal(err)
	}
	if got := f.Counts(); got != want {
		t.Fatalf("reopened: %+v, want %+v", got, want)
	}
}

// TestFaultFailsCommit: a write transaction the fault fails (SetFault)
// is answered with the fault's error and leaves nothing, as a full disk
// does (TestCommitNoSpace); without the fault the same write commits.
func TestFaultFailsCommit(t *testing.T) {
	f := open(t, nil)
	urls := gen("f", 3, 30)
	if _, err := f.Add(ctx, urls); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkInProgress(ctx, refsOf(urls[:10])); err != nil {
		t.Fatal(err)
	}
	before := f.Counts()
	nospace := &os.PathError{Op: "write", Path: "frontier.db", Err: syscall.ENOSPC}
	f.SetFault(func() error { return nospace })
	if err := f.Requeue(ctx, refsOf(urls[:10])); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("requeue with the fault: %v, want ENOSPC", err)
	}
	if got := f.Counts(); got != before {
		t.Fatalf("a failed commit was counted: %+v, want %+v", got, before)
	}
	if r, _, err := f.Get(RefOf(urls[0].URL)); err != nil || r.State != InProgress {
		t.Fatalf("%+v %v: want IN_PROGRESS still", r, err)
	}
	f.SetFault(nil)
	if err := f.Requeue(ctx, refsOf(urls[:10])); err != nil {
		t.Fatal(err)
	}
	if got := f.Counts(); got.InProgress != 0 || got.InList != int64(len(urls)) {
		t.Fatalf("after the fault: %+v, want every URL IN_LIST", got)
	}
}
