package cluster

import (
	"context"
	"fmt"
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
	n, err := x.storeEntries(context.Background(), es)
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
	if _, err := x.storeEntries(context.Background(), es); err == nil {
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

// TestReplicasOwed: the owner of a lent page sends its replica only when
// the holder's does not stand for it: the owner does not rank first for
// the URL, or the replica carries a revisit's due time.
func TestReplicasOwed(t *testing.T) {
	c := &Cluster{cfg: NodeConfig{Name: "a"}}
	c.ring.Store(NewRing([]string{"a", "b", "c"}))
	var first, notFirst frontier.NewURL
	for i := 0; first.URL == "" || notFirst.URL == ""; i++ {
		u := frontier.NewURL{URL: fmt.Sprintf("http://h.test/%d", i), Host: "h.test"}
		if f, _ := c.ring.Load().Top2(frontier.Fingerprint(u.URL)); f == "a" {
			first = u
		} else {
			notFirst = u
		}
	}
	due := first
	due.URL += "?due"
	for f, _ := c.ring.Load().Top2(frontier.Fingerprint(due.URL)); f != "a"; f, _ = c.ring.Load().Top2(frontier.Fingerprint(due.URL)) {
		due.URL += "x"
	}
	due.Due = time.Now().Add(time.Hour)
	got := c.replicasOwed([]frontier.NewURL{first, notFirst, due})
	if len(got) != 2 || got[0].URL != notFirst.URL || got[1].URL != due.URL {
		t.Fatalf("replicasOwed = %v, want the URL this node does not rank first for and the one with a due time", got)
	}
}
