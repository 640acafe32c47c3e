package frontier

import (
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAdd measures insert throughput: b.N new URLs in batches of 1000
// from 4 goroutines (fsync on commit unless /nosync).
func BenchmarkAdd(b *testing.B) {
	for _, bc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"sync", func(*Options) {}},
		{"nosync", func(o *Options) { o.NoSync = true }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			o := DefaultOptions(filepath.Join(b.TempDir(), "f.db"))
			bc.mod(&o)
			f, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const batch, workers = 1000, 4
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range workers {
				wg.Go(func() {
					buf := make([]NewURL, 0, batch)
					for {
						s := int(next.Add(batch)) - batch
						if s >= b.N {
							return
						}
						buf = buf[:0]
						for i := s; i < min(s+batch, b.N); i++ {
							buf = append(buf, synthURL(i))
						}
						if _, err := f.Add(ctx, buf); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "urls/s")
		})
	}
}

// BenchmarkCycle measures the scheduler's write path with deletes: per
// 1000 URLs one Add, one MarkInProgress and one Finish, on top of a
// pre-filled store, for the default freelist settings (hashmap,
// NoFreelistSync) and bbolt's defaults (array, synced freelist).
func BenchmarkCycle(b *testing.B) {
	for _, bc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"hashmap-nofreelistsync", func(*Options) {}},
		{"array-syncfreelist", func(o *Options) { o.arrayFreelist, o.syncFreelist = true, true }},
		{"hashmap-nofreelistsync/nosync", func(o *Options) { o.NoSync = true }},
		{"array-syncfreelist/nosync", func(o *Options) { o.arrayFreelist, o.syncFreelist, o.NoSync = true, true, true }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			o := DefaultOptions(filepath.Join(b.TempDir(), "f.db"))
			o.BatchDelay = 0
			bc.mod(&o)
			f, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			// Pre-fill 200k URLs and complete half of them, so the file has a fragmented freelist.
			f.opts.NoSync, f.db.NoSync = true, true
			insertSynth(b, f, 200_000, 5000, 2, nil)
			for p := 0; p < 100_000; p += 5000 {
				fps := make([]Ref, 0, 5000)
				for i := p * 2; i < p*2+10000; i += 2 {
					fps = append(fps, RefOf(synthURL(i).URL))
				}
				if err := f.MarkInProgress(ctx, fps); err != nil {
					b.Fatal(err)
				}
			}
			f.db.NoSync = o.NoSync
			const batch = 1000
			us := make([]NewURL, batch)
			fps := make([]Ref, batch)
			rs := make([]Result, batch)
			b.ResetTimer()
			start := time.Now()
			for it := 0; it < b.N; it++ {
				for i := range us {
					us[i] = NewURL{URL: "http://cyc" + strconv.Itoa(i%97) + ".test/" + strconv.Itoa(it*batch+i), Host: "cyc" + strconv.Itoa(i%97) + ".test"}
					fps[i] = RefOf(us[i].URL)
					rs[i] = Result{FP: fps[i].FP, Host: fps[i].Host, State: Completed, Status: 200, Bytes: 1000}
				}
				if _, err := f.Add(ctx, us); err != nil {
					b.Fatal(err)
				}
				if err := f.MarkInProgress(ctx, fps); err != nil {
					b.Fatal(err)
				}
				if err := f.Finish(ctx, rs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "urls/s")
		})
	}
}
