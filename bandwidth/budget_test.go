package bandwidth

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
)

type fakeWorld struct {
	mu   sync.Mutex
	now  time.Time
	left map[string]float64
}

func (w *fakeWorld) Now() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }
func (w *fakeWorld) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}
func (w *fakeWorld) Remaining(h string) (Amount, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.left[h]
	return Amount{Left: v, PerPage: 1}, ok
}

func shareOf(b *Budget, host string) Share {
	for _, s := range b.Shares() {
		if s.Host == host {
			return s
		}
	}
	return Share{}
}

func TestBudgetReallocates(t *testing.T) {
	w := &fakeWorld{now: time.Unix(1e9, 0), left: map[string]float64{"a": 100e3, "b": 200e3, "c": 300e3}}
	reg := prometheus.NewRegistry()
	b, err := New(Config{
		Limit: 600e3, Policy: MaxT, Now: w.Now, Remaining: w.Remaining, Idle: time.Second,
		Site: func(h string) SiteInfo {
			switch h {
			case "p":
				return SiteInfo{Fixed: 50e3}
			case "c":
				return SiteInfo{Deadline: 10 * time.Second}
			}
			return SiteInfo{}
		},
	}, reg)
	if err != nil {
		t.Fatal(err)
	}
	la, lb := b.Begin("a"), b.Begin("b")
	if la == nil || lb == nil {
		t.Fatal("limited sites got no limiter")
	}
	b.Reallocate()
	if a, bb := shareOf(b, "a").Rate, shareOf(b, "b").Rate; !near(a, 200e3, 1) || !near(bb, 400e3, 1) {
		t.Fatalf("maxt shares a=%v b=%v, want 200k 400k", a, bb)
	}
	if got := la.lim.Limit(); !near(float64(got), 200e3, 1) {
		t.Errorf("a's limiter at %v, want 200k", got)
	}
	if got := b.global.Limit(); got != 600e3 {
		t.Errorf("node limiter at %v, want 600k", got)
	}
	// A pinned site takes its fixed rate off the top; c joins with a deadline.
	b.Begin("p")
	b.Begin("c")
	b.Reallocate()
	if s := shareOf(b, "p"); s.Rate != 50e3 || s.Method != Fixed {
		t.Errorf("pinned share %+v", s)
	}
	// 550k over 600k of data, c's deadline (10 s) is loose: all end at 600/550 s.
	if a := shareOf(b, "a").Rate; !near(a, 100e3*550/600, 1) {
		t.Errorf("a's share with four sites: %v", a)
	}
	if got := testutil.ToFloat64(b.allocated); !near(got, 600e3, 1) {
		t.Errorf("allocated %v, want 600k", got)
	}
	// a finishes: after Idle it leaves, its share goes to the others.
	b.End("a", false)
	w.mu.Lock()
	w.left["a"] = 0
	w.mu.Unlock()
	w.advance(2 * time.Second)
	b.Reallocate()
	if s := shareOf(b, "a"); s.Host != "" {
		t.Errorf("a still active: %+v", s)
	}
	if bb := shareOf(b, "b").Rate; !near(bb, 550e3*200/500, 1) {
		t.Errorf("b's share after a left: %v, want %v", bb, 550e3*200/500)
	}
	// c's deadline passes while it still has data: counted once, stet.
	w.advance(9 * time.Second)
	b.Reallocate()
	b.Reallocate()
	if got := testutil.ToFloat64(b.missed); got != 1 {
		t.Errorf("deadline_missed_total = %v, want 1", got)
	}
	if m := shareOf(b, "c").Method; m != SteT {
		t.Errorf("method after the deadline passed: %s, want stet", m)
	}
	// c ends 3 s late: lateness observed once.
	b.End("c", false)
	w.mu.Lock()
	w.left["c"] = 0
	w.mu.Unlock()
	w.advance(2 * time.Second)
	b.Reallocate()
	if n := testutil.CollectAndCount(reg, "phasecrawl_site_lateness_seconds"); n != 1 {
		t.Fatalf("lateness series: %d", n)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "phasecrawl_site_lateness_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || !near(h.GetSampleSum(), 1, 1e-6) {
				t.Errorf("lateness: %d samples, sum %v; want 1 sample of 1 s", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

func TestBudgetUnlimited(t *testing.T) {
	b, err := New(Config{Site: func(h string) SiteInfo {
		if h == "p" {
			return SiteInfo{Fixed: 1000}
		}
		return SiteInfo{}
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := b.Begin("x"); l != nil {
		t.Error("unlimited site got a limiter")
	}
	if l := b.Begin("p"); l == nil || l.lim.Limit() != 1000 {
		t.Error("pinned site not limited to its rate")
	}
	if _, err := New(Config{Policy: "fastest"}, nil); err == nil {
		t.Error("New accepted policy fastest")
	}
}

// Take paces reads at the limiter's rate and gives up when ctx ends.
func TestLimiterTake(t *testing.T) {
	b, _ := New(Config{Limit: 1}, nil)
	l := b.Begin("h")
	l.lim = rate.NewLimiter(1, 10) // full: the first 10 bytes pass at once
	b.global = rate.NewLimiter(1, 10)
	if err := l.Take(context.Background(), 10); err != nil { // the initial burst
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Take(ctx, 10); err != context.Canceled {
		t.Errorf("Take after cancel: %v", err)
	}
	if got := b.used.Load(); got != 20 {
		t.Errorf("used %d bytes, want 20", got)
	}
}

// The estimates: a site nothing is known of is taken to be like the known
// ones; a page in flight counts by its Content-Length; a site with nothing
// left and no trip leaves at once; a paused site keeps its round's start.
func TestBudgetEstimates(t *testing.T) {
	w := &fakeWorld{now: time.Unix(1e9, 0), left: map[string]float64{"k1": 100e3, "k2": 300e3}}
	b, err := New(Config{Limit: 1e6, Policy: MaxT, Now: w.Now, Remaining: w.Remaining, Idle: 5 * time.Second,
		Site: func(h string) SiteInfo {
			if h == "d" {
				return SiteInfo{Deadline: time.Minute}
			}
			return SiteInfo{}
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Begin("k1")
	b.Begin("k2")
	lu := b.Begin("u") // unknown: taken as (100k + 300k)/2
	b.Reallocate()
	if u, k1 := shareOf(b, "u").Rate, shareOf(b, "k1").Rate; !near(u, 1e6*200/600, 1) || !near(k1, 1e6*100/600, 1) {
		t.Errorf("unknown site's share %v, k1's %v; want 333k, 167k", u, k1)
	}
	// u announces a 1 MB body: that is left at least.
	lu.Expect(1e6)
	b.Reallocate()
	if u := shareOf(b, "u").Rate; !near(u, 1e6*1e6/1.4e6, 1) {
		t.Errorf("unknown site with a 1 MB body in flight: share %v, want %v", u, 1e6*1e6/1.4e6)
	}
	// k1 is done: it leaves without waiting for Idle, its share goes to the rest.
	b.End("k1", false)
	w.mu.Lock()
	w.left["k1"] = 0
	w.mu.Unlock()
	b.Reallocate()
	if s := shareOf(b, "k1"); s.Host != "" {
		t.Errorf("k1 still active: %+v", s)
	}
	// d (with a deadline, data left) pauses after Idle and comes back in
	// the same round: its deadline still counts from its first trip.
	w.mu.Lock()
	w.left["d"] = 50e3
	w.mu.Unlock()
	b.Begin("d")
	first := w.Now()
	b.End("d", false)
	w.advance(6 * time.Second)
	b.Reallocate()
	if s := shareOf(b, "d"); s.Host != "" {
		t.Errorf("d still active after Idle: %+v", s)
	}
	b.Begin("d")
	b.Reallocate()
	if s := shareOf(b, "d"); !s.Deadline.Equal(first.Add(time.Minute)) {
		t.Errorf("d's deadline %v, want %v (its round's start kept)", s.Deadline, first.Add(time.Minute))
	}
	// Its phase ends (a swap): it leaves at once, without waiting for Idle.
	b.End("d", true)
	b.Reallocate()
	if s := shareOf(b, "d"); s.Host != "" {
		t.Errorf("d still active after its phase ended: %+v", s)
	}
}
