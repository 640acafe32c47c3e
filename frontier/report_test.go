package frontier

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestQueuedByHost: the queued URLs (in list, in progress, stalled) per
// host, read in chunks, from the running frontier and from the file
// opened read-only once it is closed.
func TestQueuedByHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	f, err := Open(Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]int64{}
	var urls []NewURL
	for h := range 7 {
		host := fmt.Sprintf("h%d.test", h)
		for p := range 3 + 50*h {
			urls = append(urls, NewURL{URL: fmt.Sprintf("http://%s/%d", host, p), Host: host})
		}
		want[host] = int64(3 + 50*h)
	}
	if _, err := f.Add(ctx, urls); err != nil {
		t.Fatal(err)
	}
	// h0: one completed, one stalled (still queued), one in progress.
	ref := func(p int) Ref { return RefOf(fmt.Sprintf("http://h0.test/%d", p)) }
	if err := f.MarkInProgress(ctx, []Ref{ref(0), ref(1), ref(2)}); err != nil {
		t.Fatal(err)
	}
	res := []Result{
		{FP: ref(0).FP, Host: "h0.test", State: Completed, Status: 200, Reason: "ok"},
		{FP: ref(1).FP, Host: "h0.test", State: Stalled, Reason: "timeout", RetryAt: time.Now().Add(time.Hour)},
	}
	if _, err := f.Settle(ctx, SettleRequest{Results: res}).Wait(); err != nil {
		t.Fatal(err)
	}
	want["h0.test"] = 2
	got, err := f.QueuedByHost()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("QueuedByHost = %v, %v; want %v", got, err, want)
	}
	m := map[string]int64{}
	var from []byte
	chunks := 0
	for {
		if err := f.view(func(tx *bolt.Tx) error {
			var err error
			from, err = queuedByHost(tx, from, 100, m)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		chunks++
		if from == nil {
			break
		}
	}
	if !reflect.DeepEqual(m, want) || chunks != 11 {
		t.Fatalf("in chunks of 100: %v in %d chunks; want %v in 11 (1,071 records)", m, chunks, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReadOnly(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := r.QueuedByHost(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read-only QueuedByHost = %v, %v; want %v", got, err, want)
	}
}

// TestOnSkipped: each URL refused over MaxPerHost is told with its host.
func TestOnSkipped(t *testing.T) {
	skipped := map[string]int{}
	f, err := Open(Options{Path: filepath.Join(t.TempDir(), "f.db"), NoSync: true, MaxPerHost: 2,
		OnSkipped: func(host string) { skipped[host]++ }}) // the writer's goroutine only
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var urls []NewURL
	for p := range 5 {
		urls = append(urls, NewURL{URL: fmt.Sprintf("http://a.test/%d", p), Host: "a.test"})
	}
	urls = append(urls, NewURL{URL: "http://b.test/", Host: "b.test"})
	if _, err := f.Add(context.Background(), urls); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(skipped, map[string]int{"a.test": 3}) || f.Skipped() != 3 {
		t.Fatalf("skipped %v (Skipped %d), want a.test 3", skipped, f.Skipped())
	}
}
