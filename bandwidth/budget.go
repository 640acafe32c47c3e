package bandwidth

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// SiteInfo is what the configuration says about a site (its sites: entry).
type SiteInfo struct {
	Deadline time.Duration // after the site's round starts; 0 = none
	Fixed    float64       // pinned rate in bytes/s; 0 = a share of the budget
}

// Config configures a Budget.
type Config struct {
	// Limit is the node's download budget U in bytes per second; 0 =
	// unlimited (only pinned sites are limited).
	Limit float64
	// Policy shares the budget while the deadlines can be met: MaxT or SumT.
	Policy Policy
	// Site returns a host's configured deadline and fixed rate.
	Site func(host string) SiteInfo
	// Remaining estimates what a host has left to download (its data
	// amount D); ok false when nothing is known yet (PriorBytes is used).
	Remaining func(host string) (a Amount, ok bool)
	// PriorBytes is the data amount assumed for a site nothing is known
	// about. Default 64 KiB.
	PriorBytes float64
	// Idle is how long after its last trip a site stops counting as active
	// (it finished, or its phase ended). Default 2s.
	Idle time.Duration
	// Interval is how often the shares are recomputed on the sites'
	// remaining data; a change of the active set recomputes at once.
	// Default 250ms.
	Interval time.Duration
	// Floor is the least rate a site gets, so that no share falls below
	// fetch.min_rate. Default 4 KiB/s.
	Floor float64

	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Amount is a site's data as its statistics know it.
type Amount struct {
	// Left is the bytes the site's recorded results say are left: its URLs
	// not fetched yet times its mean page size.
	Left float64
	// PerPage is its mean page size.
	PerPage float64
	// Recorded is the bytes of its recorded results so far. Pages read but
	// not recorded yet (results are recorded asynchronously) are taken off
	// Left: the Budget counts the bytes it paced.
	Recorded float64
}

// Budget shares a node's download rate among the sites it crawls. A worker
// calls Begin when a trip to a host starts and End when it ends; the
// limiter Begin returns paces the reading of the host's response bodies.
// Run recomputes the shares; its caller owns its goroutine.
type Budget struct {
	cfg  Config
	kick chan struct{}
	// global holds the node to Limit (nil: unlimited) whatever the floors
	// add; every site's reads take from it and from the site's own limiter.
	global *rate.Limiter

	mu       sync.Mutex
	sites    map[string]*siteState
	changed  bool      // the set of active sites changed since the last Reallocate
	changeAt time.Time // when it last did (Reallocate's goroutine only)

	used atomic.Int64 // bytes read since the last tick

	allocated, usedRate prometheus.Gauge
	missed              prometheus.Counter
	lateness            prometheus.Histogram
}

type siteState struct {
	host      string
	lim       *rate.Limiter
	trips     int       // trips in progress
	active    bool      // counted in the allocation
	start     time.Time // the round's start (first trip)
	lastEnd   time.Time
	missed    bool         // the deadline passed in this round (counted once)
	read      atomic.Int64 // bytes paced in this round
	announced atomic.Int64 // Content-Length of the bodies begun in this round
	mark      int64        // read at the last change of the active set
	rec0      float64      // Amount.Recorded when the round started
	share     float64      // last allocated rate
	method    Policy
	info      SiteInfo
}

// New builds a Budget and registers its metrics with reg (nil: none).
func New(cfg Config, reg prometheus.Registerer) (*Budget, error) {
	if cfg.Limit < 0 {
		return nil, fmt.Errorf("bandwidth: limit=%v: must be 0 (unlimited) or more bytes per second", cfg.Limit)
	}
	if cfg.Policy == "" {
		cfg.Policy = MaxT
	}
	if cfg.Policy != MaxT && cfg.Policy != SumT {
		return nil, fmt.Errorf("bandwidth.policy=%q: must be maxt or sumt", cfg.Policy)
	}
	if cfg.Site == nil {
		cfg.Site = func(string) SiteInfo { return SiteInfo{} }
	}
	if cfg.Remaining == nil {
		cfg.Remaining = func(string) (Amount, bool) { return Amount{}, false }
	}
	if cfg.PriorBytes <= 0 {
		cfg.PriorBytes = 64 << 10
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 2 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Floor <= 0 {
		cfg.Floor = 4 << 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}

	b := &Budget{cfg: cfg, kick: make(chan struct{}, 1), sites: map[string]*siteState{}}
	if cfg.Limit > 0 {
		b.global = rate.NewLimiter(rate.Limit(cfg.Limit), maxBurst)
		b.global.AllowN(time.Now(), maxBurst)
	}
	b.allocated = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "phasecrawl_bandwidth_allocated_bytes_per_second",
		Help: "Download rate shared out among the active sites (bandwidth and pinned sites' bandwidth); 0 when unlimited.",
	})
	b.usedRate = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "phasecrawl_bandwidth_used_bytes_per_second",
		Help: "Body bytes read per second over the last reallocation interval.",
	})
	b.missed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "phasecrawl_site_deadline_missed_total",
		Help: "Site rounds whose deadline (sites: deadline) passed before the site was done.",
	})
	b.lateness = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "phasecrawl_site_lateness_seconds",
		Help:    "For each site round with a deadline that finished: how long after its deadline (0 when met).",
		Buckets: []float64{0, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600},
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{b.allocated, b.usedRate, b.missed, b.lateness} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("bandwidth: metrics: %w", err)
			}
		}
	}
	return b, nil
}

// Limiter paces the body reads of one host (fetch.BodyLimiter).
type Limiter struct {
	b   *Budget
	s   *siteState
	lim *rate.Limiter
}

// Expect is told the Content-Length of a body about to be read.
func (l *Limiter) Expect(n int64) {
	if n > 0 {
		l.s.announced.Add(n)
	}
}

// Chunk is the most bytes read at once: the limiter's burst.
func (l *Limiter) Chunk() int { return l.lim.Burst() }

// Take waits until n more bytes (just read) fit the host's share; it
// returns ctx's error when ctx ends first.
func (l *Limiter) Take(ctx context.Context, n int) error {
	l.b.used.Add(int64(n))
	l.s.read.Add(int64(n))
	for n > 0 {
		k := min(n, l.lim.Burst())
		now := time.Now()
		r := l.lim.ReserveN(now, k)
		if !r.OK() {
			return fmt.Errorf("bandwidth: %d bytes exceed the limiter's burst %d", k, l.lim.Burst())
		}
		d := r.Delay()
		var g *rate.Reservation
		if l.b.global != nil {
			g = l.b.global.ReserveN(now, k)
			if !g.OK() {
				r.Cancel()
				return fmt.Errorf("bandwidth: %d bytes exceed the node limiter's burst %d", k, l.b.global.Burst())
			}
			d = max(d, g.Delay())
		}
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				r.Cancel()
				if g != nil {
					g.Cancel()
				}
				return ctx.Err()
			case <-t.C:
			}
		}
		n -= k
	}
	return nil
}

// burstFor is the limiter burst for rate r: a tenth of a second of data,
// 16..256 KiB.
func burstFor(r float64) int {
	return int(min(max(r/10, 16<<10), maxBurst))
}

const maxBurst = 256 << 10

// newLimiter returns a limiter of rate r that starts empty: a site's first
// bytes are paced like the rest (a full bucket would let every new site
// burst over the budget).
func newLimiter(r float64) *rate.Limiter {
	l := rate.NewLimiter(rate.Limit(r), burstFor(r))
	l.AllowN(time.Now(), l.Burst())
	return l
}

// Begin marks a trip to host started and returns the limiter of its body
// reads, or nil when the host is not limited (no budget and no pinned
// rate).
func (b *Budget) Begin(host string) *Limiter {
	now := b.cfg.Now()
	b.mu.Lock()
	s := b.sites[host]
	if s == nil {
		// A new round: what the site's statistics hold already is not
		// part of it (read outside the lock: a frontier lookup).
		b.mu.Unlock()
		var rec0 float64
		if a, ok := b.cfg.Remaining(host); ok {
			rec0 = a.Recorded
		}
		b.mu.Lock()
		if s = b.sites[host]; s == nil {
			s = &siteState{host: host, info: b.cfg.Site(host), start: now, rec0: rec0}
			b.sites[host] = s
		}
	}
	s.trips++
	newcomer := !s.active
	s.active = true
	b.changed = b.changed || newcomer
	if s.lim == nil {
		r := b.cfg.Limit / float64(b.activeLocked())
		if s.info.Fixed > 0 {
			r = s.info.Fixed
		}
		if r > 0 {
			s.lim = newLimiter(r)
		}
	}
	lim := s.lim
	b.mu.Unlock()
	if newcomer {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	if lim == nil {
		return nil
	}
	return &Limiter{b: b, s: s, lim: lim}
}

// End marks a trip to host ended. paused says the site stops with URLs
// left (its phase ended at a swap): it leaves the allocation at once,
// keeping its round, and its share goes to the others.
func (b *Budget) End(host string, paused bool) {
	now := b.cfg.Now()
	kick := false
	b.mu.Lock()
	if s := b.sites[host]; s != nil {
		s.trips = max(s.trips-1, 0)
		s.lastEnd = now
		if paused && s.trips == 0 && s.active {
			s.active = false
			b.changed, kick = true, true
		}
	}
	b.mu.Unlock()
	if kick {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

func (b *Budget) activeLocked() int {
	k := 0
	for _, s := range b.sites {
		if s.active {
			k++
		}
	}
	return k
}

// Run recomputes the shares every Interval and whenever a site joins, until
// ctx ends.
func (b *Budget) Run(ctx context.Context) {
	t := time.NewTicker(b.cfg.Interval)
	defer t.Stop()
	last := b.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := b.cfg.Now()
			if dt := now.Sub(last).Seconds(); dt > 0 {
				b.usedRate.Set(float64(b.used.Swap(0)) / dt)
			}
			last = now
		case <-b.kick:
		}
		b.Reallocate()
	}
}

// Share is one active site's allocation, for status and tests.
type Share struct {
	Host     string
	Rate     float64 // bytes per second
	Method   Policy  // maxt, sumt, stet, or fixed
	Deadline time.Time
}

// Shares returns the active sites' current rates.
func (b *Budget) Shares() []Share {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Share
	for _, s := range b.sites {
		if !s.active {
			continue
		}
		sh := Share{Host: s.host, Rate: s.share, Method: s.method}
		if s.info.Deadline > 0 {
			sh.Deadline = s.start.Add(s.info.Deadline)
		}
		out = append(out, sh)
	}
	return out
}

// Reallocate shares the budget among the active sites on their remaining
// data and deadlines (ReAlloc). A site without a trip running leaves the
// set when nothing is left of it (it finished: its round ends, its
// lateness is recorded) or when it has had no trip for Idle (its phase
// ended, or its host waits: it is paused and keeps its round's start when
// it has a deadline). Reallocate is called by Run; not concurrently.
func (b *Budget) Reallocate() {
	now := b.cfg.Now()
	type view struct {
		s        *siteState
		trips    int
		active   bool
		lastEnd  time.Time
		d, page  float64
		known    bool
		inflight float64
	}
	b.mu.Lock()
	views := make([]view, 0, len(b.sites))
	for _, s := range b.sites {
		views = append(views, view{s: s, trips: s.trips, active: s.active, lastEnd: s.lastEnd})
	}
	b.mu.Unlock()
	for i := range views {
		v := &views[i]
		s := v.s
		v.d, v.page = b.cfg.PriorBytes, b.cfg.PriorBytes
		read := s.read.Load()
		if a, ok := b.cfg.Remaining(s.host); ok {
			// Read but not recorded yet: the pages in flight.
			unrecorded := float64(read) - (a.Recorded - s.rec0)
			v.d, v.page, v.known = a.Left-max(unrecorded, 0), a.PerPage, true
		}
		// What the pages in flight announced (Content-Length) and is not
		// read yet is left at least.
		v.inflight = float64(max(s.announced.Load()-read, 0))
	}
	// A site nothing is known of yet (its first page is not recorded) is
	// taken to be like the known ones, on average.
	var sumKnown float64
	var nKnown int
	for _, v := range views {
		if v.known && v.active {
			sumKnown += max(v.d, 0)
			nKnown++
		}
	}
	for i := range views {
		if v := &views[i]; !v.known && nKnown > 0 {
			v.d = max(sumKnown/float64(nKnown), v.d)
		}
	}

	b.mu.Lock()
	var act []view
	for _, v := range views {
		s := v.s
		if b.sites[s.host] != s || s.trips > 0 {
			if b.sites[s.host] == s && s.active {
				act = append(act, v)
			}
			continue
		}
		finished := v.known && v.d <= v.page/2
		idle := now.Sub(s.lastEnd) > b.cfg.Idle
		switch {
		case finished:
			b.changed = b.changed || s.active
			b.finishLocked(s)
			delete(b.sites, s.host)
		case idle:
			b.changed = b.changed || s.active
			s.active = false
			if s.info.Deadline <= 0 {
				delete(b.sites, s.host) // nothing to keep
			}
		case s.active:
			act = append(act, v)
		}
	}
	changed := b.changed
	b.changed = false
	b.mu.Unlock()
	if changed || b.changeAt.IsZero() {
		b.changeAt = now
		for _, v := range act {
			v.s.mark = v.s.read.Load()
		}
	}
	// MaxT shares on the data left now: the sites still finish together,
	// and one that fell behind (a gap between its trips) catches up. SumT
	// shares, like the paper's ReAlloc, on the data each site had when the
	// set of sites last changed (refined by what is known since), so the
	// rates hold until a site finishes or joins.
	at := now
	if b.cfg.Policy == SumT {
		at = b.changeAt
	}
	sites := make([]Site, len(act))
	for i, v := range act {
		s := v.s
		d := v.d
		if v.trips > 0 {
			// A trip runs: part of a page at least is left.
			d = max(d, v.inflight, v.page/8)
		}
		if b.cfg.Policy == SumT {
			d += float64(s.read.Load() - s.mark)
		}
		sites[i] = Site{D: max(d, 1), Fixed: s.info.Fixed}
		if s.info.Deadline > 0 {
			left := s.start.Add(s.info.Deadline).Sub(at).Seconds()
			if left <= 0 {
				left = -1
			}
			sites[i].Deadline = left
		}
	}
	a := Allocate(b.cfg.Policy, sites, b.cfg.Limit)

	b.mu.Lock()
	defer b.mu.Unlock()
	var total float64
	for i, v := range act {
		s := v.s
		r := a.Rates[i]
		method := a.Method
		if s.info.Fixed > 0 {
			method = Fixed
		}
		s.share, s.method = r, method
		if s.info.Deadline > 0 && !s.missed && now.After(s.start.Add(s.info.Deadline)) {
			s.missed = true
			b.missed.Inc()
		}
		if math.IsInf(r, 1) {
			s.lim = nil
			continue
		}
		r = max(r, b.cfg.Floor)
		total += r
		if s.lim == nil {
			s.lim = newLimiter(r)
		} else {
			s.lim.SetLimit(rate.Limit(r))
			s.lim.SetBurst(burstFor(r))
		}
	}
	b.allocated.Set(total)
}

// finishLocked records the end of a site's round: its lateness when it has
// a deadline (0 when met).
func (b *Budget) finishLocked(s *siteState) {
	if s.info.Deadline <= 0 {
		return
	}
	late := s.lastEnd.Sub(s.start.Add(s.info.Deadline)).Seconds()
	if late > 0 && !s.missed {
		s.missed = true
		b.missed.Inc()
	}
	b.lateness.Observe(max(late, 0))
}
