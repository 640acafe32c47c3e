package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkInflightBudget: every worker receives a maximum-size body at
// once. Each of 256 hosts (one per worker, the default fetch.workers) has
// one seed, /big: fetch.max_body_size bytes (10 MiB, the default) of HTML
// without links, with a Content-Length. The server holds every answer
// until all 256 requests have arrived (or 5 s have passed), then sends
// them together. The node archives every body (WARC on) and reads it for
// links. The arms: fetch.max_inflight_bytes at its default (256 MiB), at
// 64 MiB, and off (0). Reported: peak_heap_MiB (the largest live and
// unswept heap, /memory/classes/heap/objects:bytes sampled every 5 ms),
// peak_rss_MiB (VmHWM of /proc/self/status, reset before the arm; the
// loopback server runs in the same process, serving one shared body),
// peak_inflight_MiB (the budget's own count), budget_MiB, waits and
// spools, stalled (pages that failed, e.g. too_slow), and s, the crawl's
// duration. Run:
//
//	go test -run '^$' -bench InflightBudget -benchtime 1x -timeout 30m ./node/
func BenchmarkInflightBudget(b *testing.B) {
	const (
		workers = 256
		size    = 10 << 20
	)
	for _, budget := range []int64{256 << 20, 64 << 20, 0} {
		name := "budget=off"
		if budget > 0 {
			name = fmt.Sprintf("budget=%dMiB", budget>>20)
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				inflightBudgetRun(b, workers, size, budget)
			}
		})
	}
}

func inflightBudgetRun(b *testing.B, workers, size int, budget int64) {
	body := memBody(size)
	var arrived atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(all) }) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			http.NotFound(w, r)
			return
		}
		if arrived.Add(1) == int64(workers) {
			open()
		}
		select {
		case <-all:
		case <-time.After(5 * time.Second):
			open()
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	defer srv.Close()
	c := (&memWeb{srv: srv}).config(b, workers, budget, int64(size))
	c.Seeds = nil
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for h := range workers {
		c.Seeds = append(c.Seeds, fmt.Sprintf("http://h%d.mem.test:%s/big", h, port))
	}
	c.Fetch.HeaderTimeout = 30 * time.Second
	c.Fetch.BodyTimeout = 5 * time.Minute

	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peakHeap uint64
	quit, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(heap)
			peakHeap = max(peakHeap, heap[0].Value.Uint64())
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	t0 := time.Now()
	n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	// Polled every 10 ms, not through wait.For (every 100 ms at this
	// timeout): the poll's step is the resolution of elapsed.
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		c := n.Frontier().Counts()
		if c.InList == 0 && c.InProgress == 0 && c.Completed+c.Stalled == int64(workers) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("crawl not over after 10 minutes: %+v", c)
		}
	}
	elapsed := time.Since(t0)
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("run: %v", err)
	}
	close(quit)
	<-sampled
	counts := n.Frontier().Counts()
	if counts.Stalled > 0 {
		// Without a budget the bodies can starve each other into
		// fetch.min_rate's too_slow: reported, not a failure.
		b.Logf("%d of %d pages stalled (fetch errors: %d)", counts.Stalled, workers, n.Status().FetchErrors)
	} else if got := n.bytes.Load(); got != int64(workers*size) {
		b.Fatalf("fetched %d body bytes, want %d", got, workers*size)
	}
	const mib = 1 << 20
	b.ReportMetric(float64(counts.Stalled), "stalled")
	b.ReportMetric(float64(peakHeap)/mib, "peak_heap_MiB")
	b.ReportMetric(float64(peakRSS())/mib, "peak_rss_MiB")
	b.ReportMetric(float64(budget)/mib, "budget_MiB")
	if bb := n.client.Budget(); bb != nil {
		b.ReportMetric(float64(bb.Peak())/mib, "peak_inflight_MiB")
		b.ReportMetric(float64(bb.Waits()), "waits")
		b.ReportMetric(float64(bb.Spools()), "spools")
	}
	b.ReportMetric(elapsed.Seconds(), "s")
}

// resetPeakRSS resets the process's VmHWM to its current RSS (Linux:
// clear_refs 5); where it cannot, peakRSS reports the process's peak so far.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS returns VmHWM of /proc/self/status in bytes (0 where unknown).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
