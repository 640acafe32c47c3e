package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// kindRecorder is a Receiver that records the kinds it was called with.
// A New call waits until an Outcome call has started (or gives up after
// wait): kinds stored one after the other would never let it go on.
type kindRecorder struct {
	mu        sync.Mutex
	started   []Kind
	finished  []Kind
	outcome   chan struct{}
	once      sync.Once
	wait      time.Duration
	newWaited bool
}

func (r *kindRecorder) Receive(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	r.mu.Lock()
	r.started = append(r.started, kind)
	r.mu.Unlock()
	switch kind {
	case KindOutcome:
		r.once.Do(func() { close(r.outcome) })
	case KindNew:
		select {
		case <-r.outcome:
			r.mu.Lock()
			r.newWaited = true
			r.mu.Unlock()
		case <-time.After(r.wait):
		}
	}
	r.mu.Lock()
	r.finished = append(r.finished, kind)
	r.mu.Unlock()
	return len(urls), nil
}

// TestStoreEntriesKinds: a batch's moved records (KindDone, KindMoved) are
// stored before anything else, and its other kinds are stored at once
// rather than one after the other; every entry is counted, and an error
// of one kind is returned.
func TestStoreEntriesKinds(t *testing.T) {
	rec := &kindRecorder{outcome: make(chan struct{}), wait: 30 * time.Second}
	x := &Exchange{cfg: ExchangeConfig{Local: rec}}
	var es []Entry
	for i, k := range []Kind{KindOutcome, KindNew, KindReplica, KindMoved, KindLend, KindDone, KindNew} {
		es = append(es, Entry{Kind: k, NewURL: frontier.NewURL{URL: fmt.Sprintf("http://a.test/%d", i), Host: "a.test"}})
	}
	n, _, err := x.storeEntries(context.Background(), "b", es)
	if err != nil || n != len(es) {
		t.Fatalf("storeEntries = %d, %v; want %d, nil", n, err, len(es))
	}
	if !slices.Equal(rec.started[:2], []Kind{KindDone, KindMoved}) || !slices.Equal(rec.finished[:2], []Kind{KindDone, KindMoved}) {
		t.Errorf("started %v, finished %v: want KindDone then KindMoved stored first", rec.started, rec.finished)
	}
	if len(rec.started) != 6 {
		t.Errorf("%d Receive calls (%v), want 6: one per kind", len(rec.started), rec.started)
	}
	if !rec.newWaited {
		t.Error("the new URLs were stored before the outcome's store started: kinds stored one after the other")
	}

	failing := errReceiver{kind: KindReplica}
	x = &Exchange{cfg: ExchangeConfig{Local: failing}}
	if _, _, err := x.storeEntries(context.Background(), "b", es); err == nil {
		t.Error("storeEntries hid the error of one kind")
	}
}

type errReceiver struct{ kind Kind }

func (r errReceiver) Receive(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	if kind == r.kind {
		return 0, fmt.Errorf("kind %d: disk full (test)", kind)
	}
	return len(urls), nil
}

// TestReplicateLent: the replicas of settled lent pages are queued and
// filed by replicateLoop, every one queued before stop included; once
// stopped (or before start) the queue refuses, and replicateLent files
// them at once.
func TestReplicateLent(t *testing.T) {
	ob := openTestOutbox(t, filepath.Join(t.TempDir(), "o.db"))
	defer ob.Close()
	c := &Cluster{cfg: NodeConfig{Name: "a"}, outbox: ob, log: testLogger()}
	c.ring.Store(NewRing([]string{"a", "b"})) // b keeps every replica
	batch := func(i int) []frontier.NewURL {
		var us []frontier.NewURL
		for j := range 10 {
			us = append(us, frontier.NewURL{URL: fmt.Sprintf("http://h.test/%d/%d", i, j), Host: "h.test"})
		}
		return us
	}
	ctx := context.Background()
	c.replicateLent(ctx, batch(0)) // not started: filed at once
	if got := ob.pending("b"); got != 10 {
		t.Fatalf("before start: %d replicas filed for b, want 10", got)
	}
	c.repl.start()
	var wg sync.WaitGroup
	wg.Go(c.replicateLoop)
	for i := 1; i <= 20; i++ {
		c.replicateLent(ctx, batch(i))
	}
	c.repl.stop()
	wg.Wait()
	if got := ob.pending("b"); got != 210 {
		t.Fatalf("after stop: %d replicas filed for b, want 210", got)
	}
	if c.repl.put(batch(21)) {
		t.Error("the stopped queue took a batch")
	}
	c.replicateLent(ctx, batch(22))
	if got := ob.pending("b"); got != 220 {
		t.Fatalf("after stop, filed at once: %d replicas for b, want 220", got)
	}
}
