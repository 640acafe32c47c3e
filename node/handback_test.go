package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestHandBackAfterFailedWrite: the URLs the scheduler holds and hands
// back to the queue (at a phase swap, or joined for a refill the trip did
// not use) while the frontier's writes fail (a full disk) are not left
// IN_PROGRESS, where nothing would fetch them before the next start: the
// write is tried again, counted as a storage error each time, and once
// writes go through they are IN_LIST again, where the scheduler finds
// them.
func TestHandBackAfterFailedWrite(t *testing.T) {
	for _, path := range []string{"swap", "refill"} {
		t.Run(path, func(t *testing.T) {
			srv, _ := site(t)
			c := testConfig(t, srv)
			c.Seeds = nil
			n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer n.closeResources()
			var urls []frontier.NewURL
			for i := range 5 {
				urls = append(urls, frontier.NewURL{URL: fmt.Sprintf("%s/p%d", srv.URL, i)})
			}
			if _, err := n.front.Add(context.Background(), urls); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { n.handBackLoop(ctx) })
			defer func() { cancel(); wg.Wait() }()

			// The scheduler places them in the bucket: IN_PROGRESS.
			s := newScheduler(n)
			s.fill(time.Now(), 0)
			wait.For(t, 10*time.Second, "marks committed", func() bool { s.reapMarks(); return len(s.marks) == 0 })
			if got := n.front.Counts(); got.InProgress != 5 || got.InList != 0 {
				t.Fatalf("after the scheduler's pass: %+v, want 5 in progress", got)
			}

			var failing atomic.Bool
			failing.Store(true)
			n.front.SetFault(func() error {
				if failing.Load() {
					return &os.PathError{Op: "write", Path: "frontier.db", Err: syscall.ENOSPC}
				}
				return nil
			})
			switch path {
			case "swap":
				s.swap(0, 1)
			case "refill":
				// The scheduler's pass dispatched the host's element; its
				// URLs are handed back as a refill's would be.
				bs := append(n.bkt.Drain(), s.pending...)
				if len(bs) != 1 || len(bs[0].Items) != 5 {
					t.Fatalf("the scheduler held %+v, want one element of 5 URLs", bs)
				}
				s.handBack(bs[0].Host, bs[0].Items)
			}
			errs := func() float64 { return testutil.ToFloat64(n.m.StorageErrors.WithLabelValues(storeFrontier)) }
			wait.For(t, 10*time.Second, "the write tried again", func() bool { return errs() >= 3 })
			if got := n.front.Counts(); got.InProgress != 5 {
				t.Fatalf("while writes fail: %+v, want the 5 URLs in progress still", got)
			}
			failing.Store(false)
			wait.For(t, 10*time.Second, "URLs back in the queue", func() bool {
				got := n.front.Counts()
				return got.InProgress == 0 && got.InList == 5
			})
			queued := 0
			if _, err := n.front.Scan(0, nil, 0, func(frontier.Record) bool { queued++; return true }); err != nil {
				t.Fatal(err)
			}
			if queued != 5 {
				t.Fatalf("%d URLs in the scan queue, want 5", queued)
			}
		})
	}
}
