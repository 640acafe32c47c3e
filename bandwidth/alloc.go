// Package bandwidth shares a node's download budget among the sites it
// crawls (Zhu et al., "bandwidth allocation with time constraints"):
//
//   - MaxT (M-MAXT) minimises the latest completion time: every site
//     without a tighter deadline finishes together at ΣD/U;
//   - SumT (M-SUMT) minimises the sum of completion times: rates ∝ √D, so
//     Σt = (Σ√D)²/U;
//   - SteT (M-STET) is used when the deadlines cannot all be met
//     (Û = Σ D_i/t*_i > U): it minimises the time past the deadlines;
//   - ProData (rate ∝ D) and ProBandwidth (rate ∝ D/t*) are the paper's
//     baselines.
//
// The allocation functions are pure: remaining data amounts and deadlines
// in, rates out. Simulate runs them over a fluid model of a crawl (with or
// without reallocation when a site finishes), and Budget applies them to a
// running node: one golang.org/x/time/rate limiter per site, reallocated
// when the set of active sites changes and at every tick.
package bandwidth

import (
	"fmt"
	"math"
	"sort"
)

// Policy names the allocation used while the deadlines can all be met.
type Policy string

// The policies of the configuration key bandwidth.policy, and the
// allocations a Budget reports (SteT when deadlines cannot all be met;
// Fixed for a site whose rate the sites: list pins).
const (
	MaxT  Policy = "maxt"
	SumT  Policy = "sumt"
	SteT  Policy = "stet"
	Fixed Policy = "fixed"
)

// ParsePolicy checks a bandwidth.policy value.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case MaxT, SumT:
		return p, nil
	case "":
		return MaxT, nil
	}
	return "", fmt.Errorf("bandwidth.policy=%q: must be maxt or sumt", s)
}

// Site is one site's state at the moment of an allocation.
type Site struct {
	// D is the data left to download, in bytes (or any unit of data; the
	// rates come out in that unit per second). Must be > 0.
	D float64
	// Deadline is the time left until the site's deadline, in seconds:
	// 0 = no deadline, negative = the deadline has passed.
	Deadline float64
	// Fixed pins the site's rate (the sites: list's bandwidth); 0 = a share
	// of the budget. Allocate only.
	Fixed float64
}

func (s Site) hasDeadline() bool { return s.Deadline != 0 }

// need is the rate the site needs to meet its deadline (+Inf when it has
// passed), 0 without one.
func (s Site) need() float64 {
	switch {
	case s.Deadline > 0:
		return s.D / s.Deadline
	case s.Deadline < 0:
		return math.Inf(1)
	}
	return 0
}

// Required is Û = Σ D_i/t*_i over the sites with a deadline (eq. 1): every
// deadline can be met when Û ≤ U. It is +Inf when a deadline has passed.
func Required(sites []Site) float64 {
	var u float64
	for _, s := range sites {
		u += s.need()
	}
	return u
}

// byDeadline returns the indexes of sites ordered by deadline, ascending;
// the sites without one last (they are never pinned).
func byDeadline(sites []Site) []int {
	idx := make([]int, len(sites))
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) float64 {
		if !sites[i].hasDeadline() {
			return math.Inf(1)
		}
		return sites[i].Deadline
	}
	sort.SliceStable(idx, func(a, b int) bool { return key(idx[a]) < key(idx[b]) })
	return idx
}

// MaxTRates is M-MAXT (Algorithm 1): with t̄ = ΣD/U over the sites not
// pinned yet, a site whose deadline comes before t̄ gets exactly D/t* (the
// least that meets it) and leaves the pool; the rest get D/t̄, so they all
// finish together at t̄. ok is false when the budget cannot cover the
// pinned sites (use SteTRates then).
func MaxTRates(sites []Site, u float64) (rates []float64, ok bool) {
	rates = make([]float64, len(sites))
	remain := byDeadline(sites)
	left := u
	for {
		var sumD float64
		for _, i := range remain {
			sumD += sites[i].D
		}
		if left <= 0 {
			return rates, len(remain) == 0
		}
		tbar := sumD / left
		pinned := -1
		for k, i := range remain {
			if sites[i].hasDeadline() && sites[i].Deadline < tbar {
				pinned = k
				break
			}
		}
		if pinned < 0 {
			for _, i := range remain {
				rates[i] = sites[i].D / tbar
			}
			return rates, true
		}
		i := remain[pinned]
		rates[i] = sites[i].need()
		left -= rates[i]
		remain = append(remain[:pinned:pinned], remain[pinned+1:]...)
	}
}

// sqrtShares gives the sites idx shares of u in proportion to √D (eq. 12).
func sqrtShares(sites []Site, idx []int, u float64, rates []float64) {
	var sum float64
	for _, i := range idx {
		sum += math.Sqrt(sites[i].D)
	}
	for _, i := range idx {
		rates[i] = u * math.Sqrt(sites[i].D) / sum
	}
}

// SumTRates is M-SUMT (Algorithm 2): rates ∝ √D (eq. 12), the minimum of
// Σ D_i/v_i under Σ v_i = U; a site that would then miss its deadline is
// pinned to D/t* (eq. 11), taken out of the pool, and the rest shared
// again. ok is false when the budget cannot cover the pinned sites.
func SumTRates(sites []Site, u float64) (rates []float64, ok bool) {
	return pinLoop(sites, u, func(s Site, v float64) bool {
		return s.hasDeadline() && (s.Deadline < 0 || s.D/v > s.Deadline)
	})
}

// SteTRates is M-STET (Algorithm 3), for when the deadlines cannot all be
// met: rates ∝ √D, but a site that would finish before its deadline is
// throttled to D/t* (finishing on time is as good as finishing early), and
// what it gives up is shared among the others again. It minimises the
// total time past the deadlines together with the sum of completion times.
func SteTRates(sites []Site, u float64) []float64 {
	rates, _ := pinLoop(sites, u, func(s Site, v float64) bool {
		return s.Deadline > 0 && s.D/v < s.Deadline
	})
	return rates
}

// pinLoop shares u ∝ √D over the sites not pinned, pins the first one (by
// deadline) that pin selects to D/t*, and repeats until none is selected.
func pinLoop(sites []Site, u float64, pin func(s Site, v float64) bool) ([]float64, bool) {
	rates := make([]float64, len(sites))
	remain := byDeadline(sites)
	left := u
	for len(remain) > 0 {
		if left <= 0 {
			return rates, false
		}
		sqrtShares(sites, remain, left, rates)
		pinned := -1
		for k, i := range remain {
			if pin(sites[i], rates[i]) {
				pinned = k
				break
			}
		}
		if pinned < 0 {
			return rates, true
		}
		i := remain[pinned]
		if sites[i].Deadline < 0 {
			return rates, false // a passed deadline cannot be met at any rate
		}
		rates[i] = sites[i].need()
		left -= rates[i]
		remain = append(remain[:pinned:pinned], remain[pinned+1:]...)
	}
	return rates, true
}

// ProDataRates is the PRODataAmount baseline (eq. 16): rates ∝ D.
func ProDataRates(sites []Site, u float64) []float64 {
	var sum float64
	for _, s := range sites {
		sum += s.D
	}
	rates := make([]float64, len(sites))
	for i, s := range sites {
		rates[i] = u * s.D / sum
	}
	return rates
}

// ProBandwidthRates is the PROBandwidth baseline (eqs. 13-14): rates ∝
// D/t*. A site without a deadline (or past it) counts as due at ΣD/U, where
// a work-conserving allocation ends; with no deadline at all it is
// ProDataRates.
func ProBandwidthRates(sites []Site, u float64) []float64 {
	var sumD float64
	for _, s := range sites {
		sumD += s.D
	}
	horizon := sumD / u
	rates := make([]float64, len(sites))
	var sum float64
	for i, s := range sites {
		t := s.Deadline
		if t <= 0 {
			t = horizon
		}
		rates[i] = s.D / t
		sum += rates[i]
	}
	for i := range rates {
		rates[i] *= u / sum
	}
	return rates
}

// Allocation is the result of Allocate.
type Allocation struct {
	Rates []float64 // per site, same order as the input
	// Method is the allocation used for the sites not pinned: the policy,
	// or SteT when the deadlines cannot all be met.
	Method Policy
	// Required is Û of the sites not pinned; Budget the part of U left to
	// them after the pinned sites' fixed rates.
	Required, Budget float64
}

// Allocate gives the pinned sites (Fixed > 0) their fixed rates and shares
// what is left of u among the others: by policy (MaxT or SumT) when their
// deadlines can all be met (Û ≤ U), else by SteT. u ≤ 0 means unlimited:
// the sites not pinned get +Inf.
func Allocate(policy Policy, sites []Site, u float64) Allocation {
	a := Allocation{Rates: make([]float64, len(sites)), Method: policy}
	var free []Site
	var at []int
	left := u
	for i, s := range sites {
		if s.Fixed > 0 {
			a.Rates[i] = s.Fixed
			left -= s.Fixed
			continue
		}
		free = append(free, s)
		at = append(at, i)
	}
	a.Required, a.Budget = Required(free), left
	if len(free) == 0 {
		return a
	}
	if u <= 0 {
		for _, i := range at {
			a.Rates[i] = math.Inf(1)
		}
		return a
	}
	var rates []float64
	ok := a.Required <= left && left > 0
	if ok {
		if policy == SumT {
			rates, ok = SumTRates(free, left)
		} else {
			rates, ok = MaxTRates(free, left)
		}
	}
	if !ok {
		a.Method = SteT
		rates = SteTRates(free, max(left, 0))
	}
	for k, i := range at {
		a.Rates[i] = rates[k]
	}
	return a
}

// Finish returns each site's completion time D/v at constant rates.
func Finish(sites []Site, rates []float64) []float64 {
	t := make([]float64, len(sites))
	for i, s := range sites {
		t[i] = s.D / rates[i]
	}
	return t
}
