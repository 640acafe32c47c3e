package report

import (
	"sync/atomic"
	"time"
)

// Rate window: RateSlots intervals of RateInterval, the last 15 minutes.
const (
	RateInterval = 10 * time.Second
	RateSlots    = 90
)

// Rate counts pages per RateInterval over the last RateSlots intervals, in
// a ring of slots: lock-free, one compare-and-swap per page. A slot holds
// its interval's number (high 40 bits) and its count (low 24 bits, up to
// 16.7 million pages in 10 s), so a slot left from an older round of the
// ring reads as empty.
type Rate struct {
	slots [RateSlots]atomic.Uint64
}

const countBits = 24

// Samples is the answer of GET /v1/reports/rate: the pages fetched in
// each interval of IntervalS seconds, oldest first, the last one being
// the current interval (Start is when the oldest began); PagesPerS is the
// rate over the last full minute (or as much of it as the node has run).
type Samples struct {
	IntervalS float64   `json:"interval_s"`
	Start     time.Time `json:"start"`
	Pages     []int64   `json:"pages"`
	PagesPerS float64   `json:"pages_per_s"`
}

func interval(t time.Time) uint64 { return uint64(t.UnixNano() / int64(RateInterval)) }

// Add counts one page fetched at now.
func (r *Rate) Add(now time.Time) {
	iv := interval(now)
	s := &r.slots[iv%RateSlots]
	for {
		v := s.Load()
		nv := iv<<countBits | 1
		if v>>countBits == iv {
			if v&(1<<countBits-1) == 1<<countBits-1 {
				return // full
			}
			nv = v + 1
		}
		if s.CompareAndSwap(v, nv) {
			return
		}
	}
}

// Samples returns the last RateSlots intervals up to now; since is when
// counting began (the node's start): the rate is over the time since then
// when it is shorter than a minute.
func (r *Rate) Samples(now, since time.Time) Samples {
	cur := interval(now)
	out := Samples{IntervalS: RateInterval.Seconds(), Pages: make([]int64, RateSlots)}
	first := cur - RateSlots + 1
	out.Start = time.Unix(0, int64(first)*int64(RateInterval)).UTC()
	for i := range out.Pages {
		iv := first + uint64(i)
		if v := r.slots[iv%RateSlots].Load(); v>>countBits == iv {
			out.Pages[i] = int64(v & (1<<countBits - 1))
		}
	}
	// The last minute: the current interval (partial) and the 5 before
	// it, over the time they span (or since the start).
	from := time.Unix(0, int64(cur-5)*int64(RateInterval))
	if since.After(from) {
		from = since
	}
	var sum int64
	for _, p := range out.Pages[RateSlots-6:] {
		sum += p
	}
	if d := now.Sub(from).Seconds(); d > 0 {
		out.PagesPerS = float64(sum) / max(d, 1)
	}
	return out
}
