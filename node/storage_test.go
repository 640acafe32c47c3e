package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestStorageErrorRefetches: while the WARC writer or the crawl log fails
// its writes with ENOSPC, no fetched page is recorded COMPLETED (each goes
// back to the queue and is fetched again) and the errors are counted;
// once writes succeed again, the crawl completes as it would have.
func TestStorageErrorRefetches(t *testing.T) {
	for _, what := range []string{storeWARC, storeCrawlLog} {
		t.Run(what, func(t *testing.T) {
			srv, hits := site(t)
			c := testConfig(t, srv)
			n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			var failing atomic.Bool
			failing.Store(true)
			fault := func() error {
				if failing.Load() {
					return &os.PathError{Op: "write", Path: what, Err: syscall.ENOSPC}
				}
				return nil
			}
			if what == storeWARC {
				n.out.warc.SetFault(fault)
			} else {
				n.out.clog.SetFault(fault)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- n.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run: %v", err)
				}
			}()
			errs := func() float64 { return testutil.ToFloat64(n.m.StorageErrors.WithLabelValues(what)) }
			// Every page fetched more than once: the first fetches were lost.
			wait.For(t, 30*time.Second, "pages fetched again", func() bool { return hits.Load() >= 10 && errs() >= 3 })
			// Nothing fetched is recorded: only /private/x, which robots.txt
			// denies, and /slow, once its request timed out (no response,
			// so no WARC record), need no WARC record: their crawl-log
			// line is enough.
			for _, p := range []string{"/", "/a", "/b", "/c", "/private/x", "/slow"} {
				r, ok, err := n.Frontier().Get(frontier.RefOf(srv.URL + p))
				if err != nil {
					t.Fatal(err)
				}
				noRecord := p == "/private/x" || (p == "/slow" && r.State == frontier.Stalled && r.Reason == "timeout")
				if ok && (r.State == frontier.Completed || r.State == frontier.Stalled) && (!noRecord || what != storeWARC) {
					t.Errorf("while %s writes fail: %s is %s, want it back in the queue", what, p, r.State)
				}
			}
			if n.Frontier().Undurable() == 0 {
				t.Fatal("no result was put back to the queue")
			}
			failing.Store(false)
			wait.For(t, 30*time.Second, "crawl", func() bool {
				c := n.Frontier().Counts()
				return c.InList == 0 && c.InProgress == 0 && c.Completed == 5 && c.Stalled == 1
			})
			// The pages recorded fetched have their line in the crawl log.
			logged := map[string]bool{}
			if _, err := archive.ReadCrawlLog(n.out.logPath, func(e archive.LogEntry) error { logged[e.URL] = true; return nil }); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"/", "/a", "/b", "/c", "/private/x"} {
				if !logged[srv.URL+p] {
					t.Errorf("%s recorded fetched without its crawl-log line", p)
				}
			}
		})
	}
}

// TestDiskGuard: below storage.min_free the node is paused for the disk,
// apart from the operator's pause; it resumes only above min_free plus a
// quarter; a share of the file system works as bytes do.
func TestDiskGuard(t *testing.T) {
	srv, _ := site(t)
	c := testConfig(t, srv)
	c.Storage.MinFree = "100MiB"
	n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.closeResources()
	hold := &fakeHold{}
	n.storageHold = hold // a cluster's phase clock: the member is held off its phase too
	const mib = 1 << 20
	var free, total uint64 = 500 * mib, 1000 * mib
	n.disk.statf = func(string) (uint64, uint64, error) { return free, total, nil }
	steps := []struct {
		free   uint64
		paused bool
	}{
		{500 * mib, false},
		{99 * mib, true},  // below min_free
		{110 * mib, true}, // above it, not above the margin
		{125 * mib, false},
		{101 * mib, false}, // above min_free: still running
		{10 * mib, true},
	}
	for i, s := range steps {
		free = s.free
		n.disk.check()
		if got := n.DiskPaused(); got != s.paused || hold.on != s.paused {
			t.Fatalf("step %d (free %d MiB): disk paused %v (cluster hold %v), want %v", i, s.free/mib, got, hold.on, s.paused)
		}
		if got := testutil.ToFloat64(n.disk.free); got != float64(s.free) {
			t.Fatalf("step %d: phasecrawl_storage_free_bytes %v, want %d", i, got, s.free)
		}
	}
	// Paused for the disk: the gate is closed, and an operator's resume
	// does not open it; nor does the disk's resume end an operator's pause.
	if n.ctl.open(n.started) {
		t.Fatal("gate open while paused for the disk")
	}
	n.Resume()
	if !n.DiskPaused() || n.ctl.open(n.started) || n.Status().PausedReason != PausedDisk || !n.Status().Paused {
		t.Fatalf("operator resume ended the disk pause: %+v", n.Status())
	}
	n.Pause()
	if r := n.Status().PausedReason; r != "operator,disk" {
		t.Fatalf("paused_reason %q, want operator,disk", r)
	}
	free = 900 * mib
	n.disk.check()
	if n.DiskPaused() || !n.Paused() || n.ctl.open(n.started) || n.Status().PausedReason != PausedOperator {
		t.Fatalf("disk resume ended the operator's pause: %+v", n.Status())
	}
	n.Resume()
	if !n.ctl.open(n.started) || n.Status().Paused || n.Status().PausedReason != "" {
		t.Fatalf("not running after both resumed: %+v", n.Status())
	}
	metrics := testutil.CollectAndCount(n.m.Registry, "phasecrawl_storage_paused", "phasecrawl_storage_free_bytes", "phasecrawl_storage_errors_total")
	if metrics != 7 { // paused, free, errors by what (5)
		t.Fatalf("%d storage series, want 7", metrics)
	}
	// A share: 5% of 1000 MiB is 50 MiB.
	n.cfg.Storage.MinFree = "5%"
	free = 49 * mib
	n.disk.check()
	if !n.DiskPaused() {
		t.Fatal("5% of 1000 MiB: not paused at 49 MiB free")
	}
	// "0" turns the guard off.
	n.cfg.Storage.MinFree = "0"
	free = 0
	n.disk.check()
	if n.DiskPaused() {
		t.Fatal("paused with storage.min_free 0")
	}
}

// fakeHold records SetStorageHold.
type fakeHold struct{ on bool }

func (h *fakeHold) SetStorageHold(on bool) { h.on = on }
