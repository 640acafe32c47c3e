package bucket

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// BenchmarkCycle runs the scheduler's loop on the default 1999×8 Bucket: one
// op is one Add of a URL of one of 50,000 hosts; every 64 Adds the clock moves
// 1ms and Dispatch, Finish (5ms wait) of every dispatched batch, Release and
// NextEvent run, as the scheduler calls them every few milliseconds.
func BenchmarkCycle(b *testing.B) {
	bk, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	const nhosts = 50000
	names := make([]string, nhosts)
	hashes := make([]uint64, nhosts)
	for i := range names {
		names[i] = fmt.Sprintf("host%d.test", i)
		hashes[i] = splitmix(uint64(i))
	}
	rng := rand.New(rand.NewSource(1))
	now := t0
	var accepted, dispatched int
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		h := rng.Intn(nhosts)
		if bk.Add(now, names[h], hashes[h], Item{FP: uint64(i)}) != Rejected {
			accepted++
		}
		if i%64 == 63 {
			now = now.Add(time.Millisecond)
			for _, bt := range bk.Dispatch(now) {
				dispatched += len(bt.Items)
				if err := bk.Finish(bt.ID, now, 5*time.Millisecond); err != nil {
					b.Fatal(err)
				}
			}
			bk.Release(now)
			bk.NextEvent()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(accepted)/float64(b.N), "accepted/op")
	b.ReportMetric(float64(dispatched)/float64(b.N), "dispatched/op")
}

// BenchmarkIdleTick measures one scheduler tick (Dispatch + Release +
// NextEvent + Counts) on a full default Bucket (15,992 elements QUEUING,
// FETCHING or TIMEWAIT) when nothing is due: it must not depend on the Bucket's size.
func BenchmarkIdleTick(b *testing.B) {
	bk, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	cfg := bk.Config()
	place := func(now time.Time, rows0, rows1 int) {
		for c := range cfg.Columns {
			for r := rows0; r < rows1; r++ {
				h := uint64(c) + uint64(r)*uint64(cfg.Columns)
				if bk.Add(now, fmt.Sprint(h), h, Item{FP: h}) != Placed {
					b.Fatal("not placed")
				}
			}
		}
	}
	// Rows 0..3: dispatched, half of them in TIMEWAIT for an hour, half
	// FETCHING; rows 4..7: QUEUING, due in MaxQueueWait.
	place(t0, 0, cfg.Rows/2)
	n := 0
	for _, bt := range bk.Dispatch(t0.Add(cfg.MaxQueueWait)) {
		if n++; n%2 == 0 {
			if err := bk.Finish(bt.ID, t0, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	}
	place(t0.Add(time.Minute), cfg.Rows/2, cfg.Rows)
	if c := bk.Counts(); c.Free != 0 {
		b.Fatalf("counts %+v", c)
	}
	now := t0.Add(time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if len(bk.Dispatch(now)) != 0 || bk.Release(now) != 0 {
			b.Fatal("something was due")
		}
		bk.NextEvent()
		bk.Counts()
	}
}
