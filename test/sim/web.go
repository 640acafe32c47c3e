// Package sim is a deterministic, single-threaded simulator of a phasecrawl
// cluster. It drives the real ownership ring (ring.Ring), phase schedule
// (phase.Schedule, Of, Count), host scheduler (bucket.Bucket) and
// the exchange's batching rule (exchange.BatchDue with the default
// ExchangeConfig) on a virtual clock: one event loop, a seeded RNG, no
// sleeping and no goroutines in the loop, so one seed gives one output.
// The web, the network, response times and the workers are modelled.
package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// WebConfig describes the synthetic web.
type WebConfig struct {
	Hosts    int     // number of hosts; default 1,000,000
	MeanPage float64 // mean pages per host; default 20
	Zipf     float64 // exponent of the page counts per host rank; default 0.8
	// Known is the fraction of each host's pages (the first ones) in the
	// frontier at the start; the rest is found by following links.
	// Default 0.5, valid 0..1; 0 means the default, a negative value only
	// page 0 of every host.
	Known float64
	// Tree is how many pages of its own host a page links to that only it
	// links to (page i links to Tree*i+1..Tree*i+Tree), so that every page
	// can be reached. Default 3.
	Tree int
	// Cross is how many links a page has to random pages of the web
	// (mostly other hosts). Default 3.
	Cross int
	// LatencyMedian is the median response time of a normal host; hosts'
	// medians are log-normal around it (sigma 0.5). Default 150ms.
	LatencyMedian time.Duration
	// SlowFraction of hosts answer in about SlowMedian. Default 0.02, 2s.
	SlowFraction float64
	SlowMedian   time.Duration
	// BigHost, when not 0, gives host 0 that many pages (the others keep
	// their Zipf counts): a web dominated by one large site, such as a
	// documentation tree served from one host. It answers in about
	// BigLatency (default 1ms, a site next door).
	BigHost    int
	BigLatency time.Duration
}

func (c *WebConfig) fill() error {
	if c.Hosts == 0 {
		c.Hosts = 1_000_000
	}
	if c.MeanPage == 0 {
		c.MeanPage = 20
	}
	if c.Zipf == 0 {
		c.Zipf = 0.8
	}
	if c.Known == 0 {
		c.Known = 0.5
	}
	if c.Tree == 0 {
		c.Tree = 3
	}
	if c.LatencyMedian == 0 {
		c.LatencyMedian = 150 * time.Millisecond
	}
	if c.SlowMedian == 0 {
		c.SlowMedian = 2 * time.Second
	}
	if c.BigHost > 0 && c.BigLatency == 0 {
		c.BigLatency = time.Millisecond
	}
	switch {
	case c.Hosts < 1 || c.Hosts > 1<<26:
		return fmt.Errorf("sim: hosts=%d: must be in 1..%d", c.Hosts, 1<<26)
	case c.MeanPage < 1 || c.MeanPage > 1000:
		return fmt.Errorf("sim: mean_pages=%g: must be in 1..1000", c.MeanPage)
	case c.Zipf < 0 || c.Zipf > 3:
		return fmt.Errorf("sim: zipf=%g: must be in 0..3", c.Zipf)
	case c.Known > 1:
		return fmt.Errorf("sim: known=%g: must be at most 1", c.Known)
	case c.Tree < 1 || c.Tree > 100:
		return fmt.Errorf("sim: tree=%d: must be in 1..100", c.Tree)
	case c.Cross < 0 || c.Cross > 100:
		return fmt.Errorf("sim: cross=%d: must be in 0..100", c.Cross)
	case c.SlowFraction < 0 || c.SlowFraction > 1:
		return fmt.Errorf("sim: slow_fraction=%g: must be in 0..1", c.SlowFraction)
	case c.BigHost < 0 || c.BigHost > 10_000_000:
		return fmt.Errorf("sim: big_host=%d: must be in 0..10000000", c.BigHost)
	case c.BigLatency < 0 || c.BigLatency > time.Minute:
		return fmt.Errorf("sim: big_latency=%s: must be in 0..1m", c.BigLatency)
	}
	return nil
}

// Web is the synthetic web: hosts with Zipf-distributed page counts. Page i
// of host h has the global id Off[h]+i and a fingerprint derived from the
// host's hash and i (a modelled URL fingerprint).
type Web struct {
	cfg      WebConfig
	Off      []int64  // Off[h] is host h's first page id; Off[Hosts] is the page count
	HostHash []uint64 // frontier.HostHash of the host's name
	Names    []string // host names (HostName)
	median   []float32
	order    []int32 // hosts by decreasing page count
}

// NewWeb builds the web for cfg, deterministically from seed.
func NewWeb(cfg WebConfig, seed uint64) (*Web, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	h := cfg.Hosts
	rng := rand.New(rand.NewPCG(seed, 0x5eb))
	// Page counts ∝ rank^-s, scaled to the mean, at least 1. Ranks are
	// shuffled over host ids so that host size and hash are unrelated.
	var norm float64
	for r := 1; r <= h; r++ {
		norm += math.Pow(float64(r), -cfg.Zipf)
	}
	perm := rng.Perm(h)
	w := &Web{cfg: cfg, Off: make([]int64, h+1), HostHash: make([]uint64, h), Names: make([]string, h), median: make([]float32, h)}
	count := make([]int64, h)
	for r := 1; r <= h; r++ {
		n := int64(math.Round(cfg.MeanPage * float64(h) * math.Pow(float64(r), -cfg.Zipf) / norm))
		count[perm[r-1]] = max(n, 1)
	}
	if cfg.BigHost > 0 {
		count[0] = int64(cfg.BigHost)
	}
	for i := range h {
		w.Off[i+1] = w.Off[i] + count[i]
		w.Names[i] = HostName(i)
		w.HostHash[i] = frontier.HostHash(w.Names[i])
		m := float64(cfg.LatencyMedian)
		if rng.Float64() < cfg.SlowFraction {
			m = float64(cfg.SlowMedian)
		}
		w.median[i] = float32(m * math.Exp(0.5*rng.NormFloat64()))
	}
	if cfg.BigHost > 0 {
		w.median[0] = float32(cfg.BigLatency)
	}
	w.order = make([]int32, h)
	for i := range w.order {
		w.order[i] = int32(i)
	}
	sort.SliceStable(w.order, func(a, b int) bool { return count[w.order[a]] > count[w.order[b]] })
	return w, nil
}

// HostName is the name of host h.
func HostName(h int) string { return fmt.Sprintf("h%07d.sim.test", h) }

// Hosts returns the number of hosts.
func (w *Web) Hosts() int { return len(w.HostHash) }

// Pages returns the number of pages.
func (w *Web) Pages() int64 { return w.Off[len(w.HostHash)] }

// PagesOf returns host h's page count.
func (w *Web) PagesOf(h int) int { return int(w.Off[h+1] - w.Off[h]) }

// Biggest returns the k hosts with the most pages, biggest first.
func (w *Web) Biggest(k int) []int32 { return w.order[:min(k, len(w.order))] }

// HostOf returns the host of page id g.
func (w *Web) HostOf(g int64) int {
	return sort.Search(len(w.HostHash), func(h int) bool { return w.Off[h+1] > g })
}

// FP is the fingerprint of page i of host h.
func (w *Web) FP(h int, i int) uint64 {
	return mix64(w.HostHash[h] ^ (uint64(i)+1)*0x9e3779b97f4a7c15)
}

// Response draws one response time of host h.
func (w *Web) Response(h int, rng *rand.Rand) time.Duration {
	d := float64(w.median[h]) * math.Exp(0.3*rng.NormFloat64())
	return time.Duration(max(d, float64(time.Millisecond)))
}

// Median is host h's median response time (its expected response time).
func (w *Web) Median(h int) time.Duration { return time.Duration(w.median[h]) }

// mix64 is the splitmix64 finalizer.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}
