package bandwidth

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func sum(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}

// The paper's Fig. 2 setup: six sites in the ratio 1:1.3:1.6:1.9:2.2:2.5,
// ΣD = 125,000 kb, no deadlines. M-MAXT: every site ends at ΣD/U, Σt =
// 6ΣD/U; M-SUMT: Σt = (Σ√D)²/U, the largest site last at √D_max·Σ√D/U.
func TestPaperSixSites(t *testing.T) {
	tests := []struct {
		u                              float64
		maxtMakespan, maxtSum, sumtSum float64
		sumtMakespan                   float64
	}{
		{800, 156.25, 937.5, 916.50, 184.65},
		{900, 138.89, 833.33, 814.67, 164.13},
		{1000, 125.00, 750.0, 733.20, 147.72},
		{1100, 113.64, 681.82, 666.55, 134.29},
		{1200, 104.17, 625.0, 611.00, 123.10},
	}
	for _, tc := range tests {
		sites := PaperSites(125000)
		mx, ok := MaxTRates(sites, tc.u)
		if !ok {
			t.Fatalf("U=%v: MaxTRates failed", tc.u)
		}
		fm := Finish(sites, mx)
		for i, f := range fm {
			if !near(f, tc.maxtMakespan, 0.01) {
				t.Errorf("U=%v maxt: site %d ends at %.3f s, want %.2f", tc.u, i, f, tc.maxtMakespan)
			}
		}
		if !near(sum(fm), tc.maxtSum, 0.01) || !near(sum(mx), tc.u, 1e-6) {
			t.Errorf("U=%v maxt: Σt=%.3f (want %.2f), Σv=%.3f", tc.u, sum(fm), tc.maxtSum, sum(mx))
		}
		sm, ok := SumTRates(sites, tc.u)
		if !ok {
			t.Fatalf("U=%v: SumTRates failed", tc.u)
		}
		fs := Finish(sites, sm)
		var sq float64
		for _, s := range sites {
			sq += math.Sqrt(s.D)
		}
		if !near(sum(fs), tc.sumtSum, 0.005) || !near(sum(fs), sq*sq/tc.u, 1e-6) {
			t.Errorf("U=%v sumt: Σt=%.4f, want %.2f = (Σ√D)²/U = %.4f", tc.u, sum(fs), tc.sumtSum, sq*sq/tc.u)
		}
		if !near(fs[5], tc.sumtMakespan, 0.005) || !near(sum(sm), tc.u, 1e-6) {
			t.Errorf("U=%v sumt: makespan %.4f (want %.2f), Σv=%.3f", tc.u, fs[5], tc.sumtMakespan, sum(sm))
		}
		if sum(fs) >= sum(fm) {
			t.Errorf("U=%v: sumt Σt %.2f not below maxt's %.2f", tc.u, sum(fs), sum(fm))
		}
		// The baselines: ∝ D is M-MAXT without deadlines, so is ∝ D/t* with
		// equal deadlines.
		pd := ProDataRates(sites, tc.u)
		for i := range sites {
			sites[i].Deadline = 200
		}
		pb := ProBandwidthRates(sites, tc.u)
		for i := range pd {
			if !near(pd[i], mx[i], 1e-9) || !near(pb[i], mx[i], 1e-9) {
				t.Errorf("U=%v site %d: ∝D %.4f, ∝D/t* %.4f, maxt %.4f", tc.u, i, pd[i], pb[i], mx[i])
			}
		}
	}
}

func TestMaxTDeadlines(t *testing.T) {
	tests := []struct {
		name  string
		sites []Site
		u     float64
		want  []float64 // rates
		ok    bool
	}{
		// t̄ = 300/100 = 3 s; site 0 is due at 1 s: pinned to 100/1 = 100?
		// That is the whole budget: the others get nothing left.
		{"pinned takes all", []Site{{D: 100, Deadline: 1}, {D: 100}, {D: 100}}, 100, []float64{100, 0, 0}, false},
		// t̄ = 300/300 = 1 s... 2 s deadline is loose: all ∝ D.
		{"loose", []Site{{D: 100, Deadline: 2}, {D: 100}, {D: 100}}, 300, []float64{100, 100, 100}, true},
		// U=200: t̄ = 1.5 s; site 0 due at 1 s → 100; the rest share 100 → 0.5 each... 50, 50: end at 2 s.
		{"tight", []Site{{D: 100, Deadline: 1}, {D: 100}, {D: 100}}, 200, []float64{100, 50, 50}, true},
		// Two pins in deadline order: t̄ = 400/250 = 1.6, site 1 (t*=1) pinned 100, then
		// t̄ = 300/150 = 2 > site 0's 1.5 → pinned 66.67; rest 83.33 to one site.
		{"two pins", []Site{{D: 100, Deadline: 1.5}, {D: 100, Deadline: 1}, {D: 200}}, 250, []float64{100 / 1.5, 100, 250 - 100 - 100/1.5}, true},
	}
	for _, tc := range tests {
		got, ok := MaxTRates(tc.sites, tc.u)
		if ok != tc.ok {
			t.Errorf("%s: ok=%v, want %v (rates %v)", tc.name, ok, tc.ok, got)
			continue
		}
		if !ok {
			continue
		}
		for i := range got {
			if !near(got[i], tc.want[i], 1e-9) {
				t.Errorf("%s: rates %v, want %v", tc.name, got, tc.want)
				break
			}
		}
		for i, s := range tc.sites {
			if s.Deadline > 0 && s.D/got[i] > s.Deadline*(1+1e-12) {
				t.Errorf("%s: site %d misses its deadline", tc.name, i)
			}
		}
	}
}

func TestSumTDeadlines(t *testing.T) {
	// √D shares of 300 over D = 100, 400: 100, 200 → t = 1, 2. A 1.5 s
	// deadline on the large site pins it to 400/1.5; the small one gets the
	// rest.
	sites := []Site{{D: 100}, {D: 400, Deadline: 1.5}}
	got, ok := SumTRates(sites, 300)
	if !ok || !near(got[1], 400/1.5, 1e-9) || !near(got[0], 300-400/1.5, 1e-9) {
		t.Fatalf("rates %v ok=%v", got, ok)
	}
	// A loose deadline changes nothing.
	sites[1].Deadline = 5
	got, _ = SumTRates(sites, 300)
	if !near(got[0], 100, 1e-9) || !near(got[1], 200, 1e-9) {
		t.Fatalf("loose: rates %v, want [100 200]", got)
	}
}

// M-STET: when Û > U, lateness is the least possible. Checked against an
// exhaustive grid of splits of U among three sites with deadlines.
func TestSteTMinimalLateness(t *testing.T) {
	instances := [][]Site{
		{{D: 100, Deadline: 1}, {D: 100, Deadline: 10}},
		{{D: 100, Deadline: 1}, {D: 300, Deadline: 2}, {D: 50, Deadline: 8}},
		{{D: 400, Deadline: 3}, {D: 100, Deadline: 1}, {D: 200, Deadline: 1}},
	}
	lateness := func(sites []Site, rates []float64) float64 {
		var l float64
		for i, s := range sites {
			if rates[i] <= 0 {
				return math.Inf(1)
			}
			l += max(0, s.D/rates[i]-s.Deadline)
		}
		return l
	}
	const u = 100.0
	for k, sites := range instances {
		if Required(sites) <= u {
			t.Fatalf("instance %d: Û=%v ≤ U, not an insufficient case", k, Required(sites))
		}
		a := Allocate(MaxT, sites, u)
		if a.Method != SteT {
			t.Fatalf("instance %d: method %s, want stet", k, a.Method)
		}
		if !near(sum(a.Rates), u, 1e-6) {
			t.Errorf("instance %d: Σv = %v, want %v", k, sum(a.Rates), u)
		}
		got := lateness(sites, a.Rates)
		best := math.Inf(1)
		const steps = 400
		for i := 1; i < steps; i++ {
			for j := 1; i+j < steps; j++ {
				r := []float64{u * float64(i) / steps, u * float64(j) / steps, u * float64(steps-i-j) / steps}
				if len(sites) == 2 {
					if j > 1 {
						break
					}
					r = []float64{u * float64(i) / steps, u * float64(steps-i) / steps}
				}
				best = min(best, lateness(sites, r))
			}
		}
		if got > best*(1+1e-9)+1e-9 {
			t.Errorf("instance %d: stet lateness %.4f, a grid split reaches %.4f", k, got, best)
		}
		if got < best-0.05*best-0.01 {
			t.Errorf("instance %d: stet lateness %.4f far below the grid's %.4f: the check is wrong", k, got, best)
		}
	}
	// The first instance by hand: √D shares 50/50 would end site 1 at 2 s,
	// before its 10 s: it is throttled to 10, site 0 gets 90 → 1.11 s.
	a := Allocate(MaxT, instances[0], u)
	if !near(a.Rates[1], 10, 1e-9) || !near(a.Rates[0], 90, 1e-9) {
		t.Errorf("hand instance: rates %v, want [90 10]", a.Rates)
	}
}

func TestAllocateFixedAndUnlimited(t *testing.T) {
	sites := []Site{{D: 100, Fixed: 30}, {D: 100}, {D: 300}}
	a := Allocate(MaxT, sites, 130)
	// 30 pinned, 100 left ∝ D: 25, 75.
	if !near(a.Rates[0], 30, 1e-9) || !near(a.Rates[1], 25, 1e-9) || !near(a.Rates[2], 75, 1e-9) || a.Budget != 100 {
		t.Errorf("fixed: %+v", a)
	}
	a = Allocate(SumT, sites, 0)
	if a.Rates[0] != 30 || !math.IsInf(a.Rates[1], 1) || !math.IsInf(a.Rates[2], 1) {
		t.Errorf("unlimited: %+v", a)
	}
	// Fixed rates over the budget: the others still get rates (stet over nothing is 0).
	a = Allocate(MaxT, []Site{{D: 1, Fixed: 200}, {D: 1}}, 100)
	if a.Method != SteT || a.Rates[1] != 0 {
		t.Errorf("over-pinned: %+v", a)
	}
	// A passed deadline: stet.
	a = Allocate(SumT, []Site{{D: 1, Deadline: -1}, {D: 1}}, 100)
	if a.Method != SteT || !near(sum(a.Rates), 100, 1e-9) {
		t.Errorf("passed deadline: %+v", a)
	}
	if _, err := ParsePolicy("fastest"); err == nil {
		t.Error("ParsePolicy accepted fastest")
	}
	if p, err := ParsePolicy(""); err != nil || p != MaxT {
		t.Errorf("ParsePolicy(\"\") = %v, %v", p, err)
	}
}
