package frontier

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const mib = 1 << 20

// synthURL is the i-th URL of a synthetic crawl: 50,000 hosts, ~70-byte URLs.
func synthURL(i int) NewURL {
	h := "h" + strconv.Itoa(i%50000) + ".example.test"
	return NewURL{URL: "http://" + h + "/section/" + strconv.Itoa(i/50000) + "/page-" + strconv.Itoa(i) + ".html", Host: h, Depth: i % 8}
}

// insertSynth adds URLs [0, n) in batches of batch from workers goroutines
// and calls sample after every batch of worker 0.
func insertSynth(t testing.TB, f *Frontier, n, batch, workers int, sample func(done int)) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			buf := make([]NewURL, 0, batch)
			for {
				start := int(next.Add(int64(batch))) - batch
				if start >= n {
					return
				}
				buf = buf[:0]
				for i := start; i < min(start+batch, n); i++ {
					buf = append(buf, synthURL(i))
				}
				if _, err := f.Add(ctx, buf); err != nil {
					errs <- err
					return
				}
				if w == 0 && sample != nil {
					sample(start + batch)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func heapInuse(gc bool) uint64 {
	if gc {
		runtime.GC()
		runtime.GC() // the second cycle also drops sync.Pool victims (bbolt's page buffers)
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestHeapBounded inserts 200k URLs and checks the Go heap stays small: in
// use < 64 MiB (sampled during the inserts and after GC), and the live heap
// after GC grows by < 8 MiB from 100k to 200k URLs. Keeping the URLs in
// memory would grow it by ~13 MiB per 100k, a set of fingerprints by several
// MiB; today it grows by well under 1 MiB (bbolt's freelist).
func TestHeapBounded(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("heap figures are meaningless under -race or -short (CI runs this test without -race, in a step of its own)")
	}
	const n = 200_000
	f := open(t, nil)
	var peak uint64
	var mu sync.Mutex
	sample := func(done int) {
		if done%20000 == 0 {
			h := heapInuse(false)
			mu.Lock()
			peak = max(peak, h)
			mu.Unlock()
		}
	}
	insertSynth(t, f, n/2, 2000, 4, sample)
	half := heapInuse(true)
	insertSynth(t, f, n, 2000, 4, sample) // the first half are duplicates
	after := heapInuse(true)
	t.Logf("%d URLs: live heap %.1f MiB after GC (%.1f MiB at %d), sampled peak %.1f MiB",
		n, float64(after)/mib, float64(half)/mib, n/2, float64(peak)/mib)
	if c := f.Counts(); c.InList != n {
		t.Fatalf("counts %+v", c)
	}
	if after > 64*mib || peak > 64*mib {
		t.Fatalf("Go heap %.1f MiB (peak %.1f MiB) for %d URLs: must stay < 64 MiB", float64(after)/mib, float64(peak)/mib, n)
	}
	if after > half && after-half > 8*mib {
		t.Fatalf("live heap grew %.1f MiB from %d to %d URLs: something keeps URLs in memory", float64(after-half)/mib, n/2, n)
	}
}

// TestHeap10M is the frontier's memory claim: 10,000,000 URLs with a Go heap
// below 256 MiB. It takes minutes; run it with
//
//	PHASECRAWL_LONG=1 go test -run TestHeap10M -v -timeout 2h ./frontier/
//
// (PHASECRAWL_LONG_N overrides the count, PHASECRAWL_LONG_BATCH the
// BatchSize, PHASECRAWL_LONG_DIR the directory of the bbolt file, default a
// temporary directory.) The Go heap in use grows with BatchSize: a commit
// holds one bbolt node and one dirty page per touched leaf, and random
// fingerprints touch about one leaf per URL.
func TestHeap10M(t *testing.T) {
	if os.Getenv("PHASECRAWL_LONG") != "1" {
		t.Skip("set PHASECRAWL_LONG=1 to run")
	}
	n := 10_000_000
	if s := os.Getenv("PHASECRAWL_LONG_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	dir := os.Getenv("PHASECRAWL_LONG_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := dir + "/frontier-10m.db"
	_ = os.Remove(path)
	o := DefaultOptions(path)
	o.NoSync = true
	if s := os.Getenv("PHASECRAWL_LONG_BATCH"); s != "" { // default: DefaultBatchSize, as the node runs
		var err error
		if o.BatchSize, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Sample the heap every 250ms while inserting; log every 10%.
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				h := heapInuse(false)
				if h > peak.Load() {
					peak.Store(h)
				}
			}
		}
	}()
	var logged atomic.Int64
	insertSynth(t, f, n, 2500, 4, func(done int) {
		if tenth := int64(done) * 10 / int64(n); tenth > logged.Load() {
			logged.Store(tenth)
			t.Logf("%9d URLs  %6.1fs  heap in use %6.1f MiB (peak so far %6.1f MiB)", done, time.Since(start).Seconds(),
				float64(heapInuse(false))/mib, float64(peak.Load())/mib)
		}
	})
	close(stop)
	<-sampled
	insertTime := time.Since(start)
	after := heapInuse(true)
	if c := f.Counts(); c.InList != int64(n) {
		t.Fatalf("counts %+v", c)
	}
	// Scan the whole queue once in window-sized steps.
	scanStart := time.Now()
	var cur Cursor
	visited := 0
	for {
		cur, err = f.Scan(0, cur, 250_000, func(Record) bool { visited++; return true })
		if err != nil {
			t.Fatal(err)
		}
		if cur == nil {
			break
		}
	}
	scanTime := time.Since(scanStart)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	reopenStart := time.Now()
	g, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	reopenTime := time.Since(reopenStart)
	_ = g.Close()
	fmt.Printf("frontier 10M: %d URLs inserted in %s (%.0f URLs/s), Go heap in use: peak %.1f MiB, after GC %.1f MiB; "+
		"full scan %s (%d records); file %.2f GiB; reopen (freelist rebuild) %s\n",
		n, insertTime.Round(time.Second), float64(n)/insertTime.Seconds(), float64(peak.Load())/mib, float64(after)/mib,
		scanTime.Round(time.Millisecond), visited, float64(st.Size())/(1<<30), reopenTime.Round(time.Millisecond))
	if visited != n {
		t.Fatalf("scan visited %d, want %d", visited, n)
	}
	if peak.Load() > 256*mib || after > 256*mib {
		t.Fatalf("Go heap peak %.1f MiB: must stay < 256 MiB", float64(peak.Load())/mib)
	}
	_ = os.Remove(path)
}
