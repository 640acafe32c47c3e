package bandwidth

import (
	"math"
)

// AllocFunc shares u among sites (remaining data, deadlines relative to
// now); it returns one rate per site.
type AllocFunc func(sites []Site, u float64) []float64

// PolicyFunc is the AllocFunc of Allocate with policy (M-STET when the
// deadlines cannot all be met).
func PolicyFunc(policy Policy) AllocFunc {
	return func(sites []Site, u float64) []float64 { return Allocate(policy, sites, u).Rates }
}

// Outcome is what a simulated crawl gives.
type Outcome struct {
	Finish   []float64 // completion time of each site, in input order
	Makespan float64   // the latest completion
	Sum      float64   // Σ completion times
	Lateness float64   // Σ max(0, finish − deadline) over the sites with a deadline
	Met      int       // sites with a deadline that finished by it
	Late     int       // sites with a deadline that finished after it
}

// Simulate crawls sites (data amounts D, absolute deadlines Deadline from
// time 0; Fixed is ignored) in a fluid model under budget u, with at most m
// sites at once (m ≤ 0: all). Sites wait in order of deadline, the tightest
// first (those without one last), and start when a slot frees.
//
// With realloc (ReAlloc) the rates of the running sites are recomputed by
// alloc, on their remaining data and deadlines, whenever a site finishes or
// starts. Without it (AllocOnce) the first m sites are allocated once and a
// site that starts takes over the rate of the one that finished.
func Simulate(sites []Site, u float64, m int, alloc AllocFunc, realloc bool) Outcome {
	return simulate(sites, u, m, alloc, realloc, 0)
}

// SimulateTicks is Simulate with reallocation, all sites at once, that
// also reallocates every tick seconds on the data left, as a running
// node's Budget does.
func SimulateTicks(sites []Site, u float64, alloc AllocFunc, tick float64) Outcome {
	return simulate(sites, u, 0, alloc, true, tick)
}

func simulate(sites []Site, u float64, m int, alloc AllocFunc, realloc bool, tick float64) Outcome {
	n := len(sites)
	if m <= 0 || m > n {
		m = n
	}
	order := byDeadline(sites)
	left := make([]float64, n)
	rate := make([]float64, n)
	for i, s := range sites {
		left[i] = s.D
	}
	out := Outcome{Finish: make([]float64, n)}
	var running []int
	next := 0
	now := 0.0
	reallocate := func() {
		cur := make([]Site, len(running))
		for k, i := range running {
			cur[k] = Site{D: left[i]}
			if d := sites[i].Deadline; d > 0 {
				cur[k].Deadline = d - now
				if cur[k].Deadline <= 0 {
					cur[k].Deadline = -1
				}
			}
		}
		r := alloc(cur, u)
		for k, i := range running {
			rate[i] = r[k]
		}
	}
	for next < n && len(running) < m {
		running = append(running, order[next])
		next++
	}
	reallocate()
	for len(running) > 0 {
		// The next completion among the running sites.
		dt := math.Inf(1)
		for _, i := range running {
			if rate[i] > 0 {
				dt = min(dt, left[i]/rate[i])
			}
		}
		ticked := false
		if tick > 0 {
			if next := (math.Floor(now/tick+1e-9) + 1) * tick; next-now < dt {
				dt, ticked = next-now, true
			}
		}
		if math.IsInf(dt, 1) {
			// No running site has a rate (a policy that starves them):
			// they never finish.
			for _, i := range running {
				out.Finish[i] = math.Inf(1)
			}
			break
		}
		now += dt
		var still []int
		var freed []float64
		for _, i := range running {
			left[i] -= rate[i] * dt
			if left[i] <= 1e-9*sites[i].D {
				out.Finish[i] = now
				freed = append(freed, rate[i])
				continue
			}
			still = append(still, i)
		}
		running = still
		for k := 0; next < n && len(running) < m; k++ {
			j := order[next]
			next++
			running = append(running, j)
			if !realloc && k < len(freed) {
				rate[j] = freed[k]
			}
		}
		if (realloc || ticked) && len(running) > 0 {
			reallocate()
		}
	}
	for i, s := range sites {
		t := out.Finish[i]
		out.Makespan = max(out.Makespan, t)
		out.Sum += t
		if s.Deadline > 0 {
			if t <= s.Deadline*(1+1e-9) {
				out.Met++
			} else {
				out.Late++
				out.Lateness += t - s.Deadline
			}
		}
	}
	return out
}

// ratioSites returns sites whose data amounts are in the given ratio and sum
// to total.
func ratioSites(ratio []float64, total float64) []Site {
	var sum float64
	for _, r := range ratio {
		sum += r
	}
	s := make([]Site, len(ratio))
	for i, r := range ratio {
		s[i] = Site{D: total * r / sum}
	}
	return s
}

// PaperRatio is the data-amount ratio of the paper's six-site experiment
// (Fig. 2).
var PaperRatio = []float64{1, 1.3, 1.6, 1.9, 2.2, 2.5}

// PaperSites returns the paper's six sites scaled to total data.
func PaperSites(total float64) []Site { return ratioSites(PaperRatio, total) }
