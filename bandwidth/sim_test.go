package bandwidth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// manySites is the task-scheduling setup of the paper's Figs. 8-10 (its
// data are not published): 50 sites of 500-5,000 kb, deadlines drawn
// between lo and lo+span times the time the whole crawl needs at u, from a
// fixed seed.
func manySites(u, lo, span float64) []Site {
	rng := rand.New(rand.NewPCG(17, 1))
	sites := make([]Site, 50)
	var total float64
	for i := range sites {
		sites[i].D = 500 + 4500*rng.Float64()
		total += sites[i].D
	}
	for i := range sites {
		sites[i].Deadline = (lo + span*rng.Float64()) * total / u
	}
	return sites
}

// approaches are the allocations compared: the paper's ReAlloc-MAXT,
// ReAlloc-SUMT and its baselines.
var approaches = []struct {
	name    string
	alloc   AllocFunc
	realloc bool
}{
	{"ReAlloc-MAXT", PolicyFunc(MaxT), true},
	{"ReAlloc-SUMT", PolicyFunc(SumT), true},
	{"ReAlloc-PROBandwidth", ProBandwidthRates, true},
	{"ReAlloc-PRODataAmount", ProDataRates, true},
	{"AllocOnce-MAXT", PolicyFunc(MaxT), false},
}

func TestSimulateInstant(t *testing.T) {
	sites := PaperSites(125000)
	// No reallocation, all at once: the closed forms.
	o := Simulate(sites, 1000, 0, PolicyFunc(SumT), false)
	if !near(o.Sum, 733.2031, 1e-3) {
		t.Errorf("sumt without reallocation: Σt = %.4f, want 733.2031", o.Sum)
	}
	o = Simulate(sites, 1000, 0, PolicyFunc(MaxT), true)
	if !near(o.Makespan, 125, 1e-6) || !near(o.Sum, 750, 1e-6) {
		t.Errorf("maxt: makespan %.4f Σt %.4f, want 125, 750", o.Makespan, o.Sum)
	}
	// ReAlloc-SUMT gives the bandwidth a finished site frees to the rest:
	// Σt falls below (Σ√D)²/U, the makespan stays ΣD/U (no bandwidth idles).
	o = Simulate(sites, 1000, 0, PolicyFunc(SumT), true)
	if o.Sum >= 733.2 || !near(o.Makespan, 125, 1e-6) {
		t.Errorf("ReAlloc-SUMT: Σt %.4f (want < 733.2), makespan %.4f (want 125)", o.Sum, o.Makespan)
	}
	for i := 1; i < len(o.Finish); i++ {
		if o.Finish[i] < o.Finish[i-1] {
			t.Errorf("ReAlloc-SUMT: a larger site finished first: %v", o.Finish)
		}
	}
}

func TestSimulateScheduling(t *testing.T) {
	const u = 530
	sites := manySites(u, 0.2, 1)
	var total float64
	for _, s := range sites {
		total += s.D
	}
	res := map[string]Outcome{}
	for _, a := range approaches {
		res[a.name] = Simulate(sites, u, 5, a.alloc, a.realloc)
		for i, f := range res[a.name].Finish {
			if math.IsInf(f, 0) || f <= 0 {
				t.Fatalf("%s: site %d never finished", a.name, i)
			}
		}
	}
	// Work-conserving with reallocation: the crawl ends at ΣD/U.
	for _, name := range []string{"ReAlloc-MAXT", "ReAlloc-SUMT", "ReAlloc-PRODataAmount"} {
		if got := res[name].Makespan; !near(got, total/u, 1e-6*total/u) {
			t.Errorf("%s: makespan %.3f, want ΣD/U = %.3f", name, got, total/u)
		}
	}
	mx, once := res["ReAlloc-MAXT"], res["AllocOnce-MAXT"]
	if once.Makespan <= mx.Makespan {
		t.Errorf("AllocOnce makespan %.2f not above ReAlloc-MAXT's %.2f", once.Makespan, mx.Makespan)
	}
	// These deadlines can all be met with reallocation, not without.
	if mx.Met != len(sites) || res["ReAlloc-SUMT"].Met != len(sites) {
		t.Errorf("ReAlloc-MAXT met %d, ReAlloc-SUMT %d of %d deadlines", mx.Met, res["ReAlloc-SUMT"].Met, len(sites))
	}
	if once.Lateness <= 0 || once.Met == len(sites) {
		t.Errorf("AllocOnce: lateness %.2f, met %d: the setup does not tell the approaches apart", once.Lateness, once.Met)
	}
}

// BenchmarkPolicies compares the allocations on the paper's two setups in
// the fluid model; the metrics are the outcomes (seconds, sites), not the
// time the simulation takes:
//
//	go test ./bandwidth -run '^$' -bench Policies -benchtime 1x
func BenchmarkPolicies(b *testing.B) {
	for _, u := range []float64{800, 1000, 1200} {
		sites := PaperSites(125000)
		for _, a := range approaches {
			b.Run(fmt.Sprintf("six/U=%v/%s", u, a.name), func(b *testing.B) {
				var o Outcome
				for b.Loop() {
					o = Simulate(sites, u, 0, a.alloc, a.realloc)
				}
				b.ReportMetric(o.Makespan, "makespan_s")
				b.ReportMetric(o.Sum, "sum_s")
			})
		}
		b.Run(fmt.Sprintf("six/U=%v/SUMT-instant", u), func(b *testing.B) {
			var o Outcome
			for b.Loop() {
				o = Simulate(sites, u, 0, PolicyFunc(SumT), false)
			}
			b.ReportMetric(o.Makespan, "makespan_s")
			b.ReportMetric(o.Sum, "sum_s")
		})
	}
	for _, set := range []struct {
		name     string
		lo, span float64
	}{{"fifty", 0.2, 1}, {"fifty-tight", 0.1, 0.9}} {
		for _, u := range []float64{520, 530, 540} {
			sites := manySites(u, set.lo, set.span)
			for _, a := range approaches {
				b.Run(fmt.Sprintf("%s/U=%v/%s", set.name, u, a.name), func(b *testing.B) {
					var o Outcome
					for b.Loop() {
						o = Simulate(sites, u, 5, a.alloc, a.realloc)
					}
					b.ReportMetric(o.Makespan, "makespan_s")
					b.ReportMetric(o.Sum, "sum_s")
					b.ReportMetric(o.Lateness, "lateness_s")
					b.ReportMetric(float64(o.Met), "met")
				})
			}
		}
	}
}
