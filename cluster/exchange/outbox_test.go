package exchange

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/phasecrawl/phasecrawl/frontier"
)

func TestOutboxPutTakeAckReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	ob, err := OpenOutbox(OutboxConfig{Path: path, MaxURLs: 100, NoSync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Put(ctx, "b", testURLs("x", 60)); err != nil {
		t.Fatal(err)
	}
	if err := ob.PutDone(ctx, "c", testURLs("d", 30)); err != nil {
		t.Fatal(err)
	}
	err = ob.Put(ctx, "b", testURLs("y", 11))
	if !errors.Is(err, ErrOutboxFull) || !strings.Contains(err.Error(), "max_urls=100") {
		t.Fatalf("over max: %v", err)
	}
	if got := ob.Pending(); got["b"] != 60 || got["c"] != 30 || len(got) != 2 || ob.Len() != 90 {
		t.Fatalf("pending %v", got)
	}

	// Owners at send time: even-numbered URLs of b moved to "d".
	owner := func(u frontier.NewURL) string {
		if strings.HasSuffix(u.URL, "0") || strings.HasSuffix(u.URL, "2") || strings.HasSuffix(u.URL, "4") ||
			strings.HasSuffix(u.URL, "6") || strings.HasSuffix(u.URL, "8") {
			return "d"
		}
		return "b"
	}
	tk, err := ob.take(ctx, "b", 20, 1<<20, byURL(owner))
	if err != nil {
		t.Fatal(err)
	}
	if len(tk.entries) != 20 || tk.moved != 20 || tk.id == 0 {
		t.Fatalf("take: %d entries, moved %d, resend %v, id %d", len(tk.entries), tk.moved, tk.resend, tk.id)
	}
	for _, e := range tk.entries {
		if owner(e.NewURL) != "b" || e.Kind != KindNew {
			t.Fatalf("took %+v", e)
		}
	}
	if got := ob.Pending(); got["b"] != 40 || got["d"] != 20 || ob.Len() != 90 {
		t.Fatalf("after re-filing: %v", got)
	}
	ob.Close()

	// Reopen: counts survive, and the batch taken but not acked is still
	// queued: taking again gives the same URLs first.
	ob, err = OpenOutbox(OutboxConfig{Path: path, MaxURLs: 100, NoSync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	if got := ob.Pending(); got["b"] != 40 || got["c"] != 30 || got["d"] != 20 {
		t.Fatalf("reopened: %v", got)
	}
	commits := ob.commits.Load()
	tk2, err := ob.take(ctx, "b", 20, 1<<20, byURL(owner))
	if err != nil {
		t.Fatal(err)
	}
	if len(tk2.entries) != 20 || tk2.entries[0].URL != tk.entries[0].URL || tk2.lastSeq != tk.lastSeq || tk2.moved != 0 {
		t.Fatalf("retake: %d entries from %s to seq %d, moved %d; want 20 from %s to %d",
			len(tk2.entries), tk2.entries[0].URL, tk2.lastSeq, tk2.moved, tk.entries[0].URL, tk.lastSeq)
	}
	if c := ob.commits.Load(); c != commits {
		t.Fatalf("a take with nothing to re-file wrote %d transactions, want 0", c-commits)
	}
	if n, err := ob.ack(ctx, "b", tk.lastSeq); err != nil || n != 20 {
		t.Fatalf("ack deleted %d, %v", n, err)
	}
	if n, err := ob.ack(ctx, "b", tk.lastSeq); err != nil || n != 0 {
		t.Fatalf("second ack of the same batch deleted %d, %v", n, err)
	}
	tk3, err := ob.take(ctx, "b", 100, 1<<20, byURL(owner))
	if err != nil || tk3.id == tk2.id || len(tk3.entries) != 10 || tk3.moved != 10 {
		t.Fatalf("next take: id %d, %d entries, %v", tk3.id, len(tk3.entries), err)
	}
	if _, err := ob.ack(ctx, "b", tk3.lastSeq); err != nil {
		t.Fatal(err)
	}
	dn, _ := ob.take(ctx, "c", 100, 1<<20, func(Entry) string { return "" })
	if len(dn.entries) != 30 || dn.entries[0].Kind != KindDone {
		t.Fatalf("done entries: %d", len(dn.entries))
	}
	if got := ob.Pending(); got["b"] != 0 || got["d"] != 30 || ob.Len() != 60 {
		t.Fatalf("at the end: %v", got)
	}
	// Byte bound: a batch stops before maxBytes.
	small, _ := ob.take(ctx, "d", 100, 200, func(Entry) string { return "d" })
	if len(small.entries) == 0 || len(small.entries) > 6 {
		t.Fatalf("byte-bounded take: %d entries", len(small.entries))
	}
}

func TestOutboxErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := OpenOutbox(OutboxConfig{Path: filepath.Join(dir, "o.db"), MaxURLs: -1}); err == nil || !strings.Contains(err.Error(), "max_urls") {
		t.Errorf("max_urls: %v", err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("urls")); return err })
	db.Close()
	if _, err := OpenOutbox(OutboxConfig{Path: foreign}); err == nil || !strings.Contains(err.Error(), "not a phasecrawl outbox") {
		t.Errorf("foreign file: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("garbage!", 1000)), 0o600)
	if _, err := OpenOutbox(OutboxConfig{Path: garbage}); err == nil {
		t.Error("garbage file opened")
	}
	ob := openTestOutbox(t, filepath.Join(dir, "ok.db"))
	for _, tc := range []struct {
		peer string
		u    frontier.NewURL
		want string
	}{
		{"", frontier.NewURL{URL: "http://x/"}, "empty peer"},
		{"b", frontier.NewURL{URL: ""}, "url of 0 bytes"},
		{"b", frontier.NewURL{URL: "http://x/", Depth: -1}, "depth"},
		{"b", frontier.NewURL{URL: strings.Repeat("x", MaxEntryURL+1)}, "url of"},
	} {
		if err := ob.Put(ctx, tc.peer, []frontier.NewURL{tc.u}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("put %q: %v, want %q", tc.peer, err, tc.want)
		}
	}
	ob.Close()
	if err := ob.Put(ctx, "b", testURLs("z", 1)); !errors.Is(err, ErrOutboxClosed) {
		t.Errorf("put after close: %v", err)
	}
	// A second open of a locked file fails instead of hanging.
	ob = openTestOutbox(t, filepath.Join(dir, "ok.db"))
	defer ob.Close()
	if _, err := OpenOutbox(OutboxConfig{Path: filepath.Join(dir, "ok.db")}); err == nil {
		t.Error("opened a locked outbox twice")
	}
}

func TestOutboxGroupCommit(t *testing.T) {
	ob := openTestOutbox(t, filepath.Join(t.TempDir(), "o.db"))
	defer ob.Close()
	errs := make(chan error, 50)
	for i := range 50 {
		go func() {
			errs <- ob.Put(context.Background(), "p", testURLs(string(rune('a'+i%26))+string(rune('a'+i/26)), 100))
		}()
	}
	for range 50 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if ob.Len() != 5000 {
		t.Fatalf("len %d", ob.Len())
	}
}

// byURL routes every entry by its URL alone.
func byURL(f func(frontier.NewURL) string) func(Entry) string {
	return func(e Entry) string { return f(e.NewURL) }
}

// TestOutboxQueueSync: a write queued without waiting (QueueEntries) is
// durable, its onCommit called, once a Sync called after it returns; a
// write refused by the outbox (over max_urls) reports failed and calls
// onFail; Sync with nothing queued returns at once (no commit), and after
// Close a queued write is refused and Sync returns.
func TestOutboxQueueSync(t *testing.T) {
	ctx := context.Background()
	ob, err := OpenOutbox(OutboxConfig{Path: filepath.Join(t.TempDir(), "outbox.db"), MaxURLs: 50, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	files := func(prefix string, n int) map[string][]Entry {
		m := map[string][]Entry{}
		for i, u := range testURLs(prefix, n) {
			peer := []string{"b", "c"}[i%2]
			m[peer] = append(m[peer], Entry{Kind: KindNew, NewURL: u})
		}
		return m
	}
	var committed, failed atomic.Int32
	f1, err := ob.QueueEntries(ctx, files("x", 30), func() { committed.Add(1) }, func(error) { failed.Add(1) })
	if err != nil || f1 == nil {
		t.Fatalf("queue: %v, %v", f1, err)
	}
	f2, err := ob.QueueEntries(ctx, files("y", 30), func() { committed.Add(1) }, func(error) { failed.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	ob.Sync()
	if !f1.Durable() || f2.Durable() || committed.Load() != 1 || failed.Load() != 1 {
		t.Fatalf("after Sync: first durable %v, second (over max_urls) %v; %d committed, %d failed", f1.Durable(), f2.Durable(), committed.Load(), failed.Load())
	}
	if got := ob.Pending(); got["b"] != 15 || got["c"] != 15 {
		t.Fatalf("pending %v, want 15 and 15", got)
	}
	if f, err := ob.QueueEntries(ctx, nil, nil, nil); f != nil || err != nil {
		t.Fatalf("nothing to queue: %v, %v", f, err)
	}
	commits := ob.commits.Load()
	ob.Sync() // nothing queued since the last Sync
	if ob.commits.Load() != commits {
		t.Fatalf("Sync with nothing queued committed")
	}
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.QueueEntries(ctx, files("z", 2), nil, nil); !errors.Is(err, ErrOutboxClosed) {
		t.Fatalf("queue after Close: %v, want ErrOutboxClosed", err)
	}
	ob.Sync() // returns
}

// TestOutboxGather: writes that arrive within Gather of each other share
// one commit (one fsync).
func TestOutboxGather(t *testing.T) {
	ob, err := OpenOutbox(OutboxConfig{Path: filepath.Join(t.TempDir(), "o.db"), Gather: time.Second, NoSync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	before := ob.commits.Load()
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- ob.Put(context.Background(), "p", testURLs(fmt.Sprintf("g%d", i), 10)) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := ob.commits.Load() - before; got > 2 {
		t.Errorf("%d puts made %d commits, want them gathered in at most 2", n, got)
	}
	if ob.Len() != n*10 {
		t.Errorf("len %d, want %d", ob.Len(), n*10)
	}
	if _, err := OpenOutbox(OutboxConfig{Path: filepath.Join(t.TempDir(), "bad.db"), Gather: 2 * time.Second}); err == nil {
		t.Error("gather=2s accepted, want an error naming gather")
	}
}
