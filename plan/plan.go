// Package plan measures and improves how well a set of sites with revisit
// deadlines fits on a set of crawl lanes (Martinsson, "Optimization of a
// Scheduler for a Web Scraping System", chapters 3–5): each lane crawls
// its sites one after the other, in a cycle, so a lane's cycle takes the
// sum of its sites' round times and must not exceed the shortest revisit
// deadline among them. The spare time of a lane is that deadline minus
// the sum; the spare time of a plan, T_L, is the least over its lanes. A
// negative T_L means some site cannot be revisited in time.
package plan

import (
	"math"
	"slices"
)

// Site is one site to revisit: Exec is how long one round of it takes
// (e), Deadline how soon it must be revisited (d), in any one unit.
type Site struct {
	Name     string
	Exec     float64
	Deadline float64
}

// Spare returns a lane's spare time: its shortest deadline minus the sum
// of its sites' round times (+Inf for an empty lane).
func Spare(lane []Site) float64 {
	if len(lane) == 0 {
		return math.Inf(1)
	}
	d, e := math.Inf(1), 0.0
	for _, s := range lane {
		d = min(d, s.Deadline)
		e += s.Exec
	}
	return d - e
}

// PlanSpare returns T_L, the least spare time over the lanes (+Inf when
// every lane is empty).
func PlanSpare(lanes [][]Site) float64 {
	t := math.Inf(1)
	for _, l := range lanes {
		t = min(t, Spare(l))
	}
	return t
}

// Bound is an upper bound of T_L for any plan of sites: a site's lane has
// at most its deadline minus its own round time to spare.
func Bound(sites []Site) float64 {
	b := math.Inf(1)
	for _, s := range sites {
		b = min(b, s.Deadline-s.Exec)
	}
	return b
}

// exactLimit is the most sites Optimize searches exhaustively; above it,
// it returns Greedy's plan.
const exactLimit = 24

// Optimize returns a plan of sites on n lanes (n >= 1) with the largest
// T_L it finds, and that T_L: an exhaustive branch and bound for up to 24
// sites (optimal), Greedy's plan above.
func Optimize(sites []Site, n int) ([][]Site, float64) {
	n = max(n, 1)
	if len(sites) > exactLimit {
		lanes := Greedy(sites, n)
		return lanes, PlanSpare(lanes)
	}
	order := sortedSites(sites)
	best := Greedy(sites, n)
	bestT := PlanSpare(best)
	bound := Bound(sites)
	cur := make([][]Site, n)
	dl := make([]float64, n) // each lane's shortest deadline
	ex := make([]float64, n) // and its sum of round times
	var search func(i int, tl float64)
	search = func(i int, tl float64) {
		if tl <= bestT || bestT >= bound {
			return // cannot beat the best (spare only shrinks as sites are added)
		}
		if i == len(order) {
			best = make([][]Site, n)
			for k := range cur {
				best[k] = slices.Clone(cur[k])
			}
			bestT = tl
			return
		}
		s := order[i]
		triedEmpty := false
		for k := range n {
			if len(cur[k]) == 0 {
				if triedEmpty {
					continue // empty lanes are interchangeable
				}
				triedEmpty = true
			}
			od, oe := dl[k], ex[k]
			dl[k], ex[k] = min(od, s.Deadline), oe+s.Exec
			cur[k] = append(cur[k], s)
			search(i+1, min(tl, planSpareOf(dl, ex, cur)))
			cur[k] = cur[k][:len(cur[k])-1]
			dl[k], ex[k] = od, oe
		}
	}
	for k := range dl {
		dl[k] = math.Inf(1)
	}
	search(0, math.Inf(1))
	return best, bestT
}

func planSpareOf(dl, ex []float64, cur [][]Site) float64 {
	t := math.Inf(1)
	for k := range dl {
		if len(cur[k]) > 0 {
			t = min(t, dl[k]-ex[k])
		}
	}
	return t
}

// sortedSites orders sites by deadline, then by longest round first.
func sortedSites(sites []Site) []Site {
	order := slices.Clone(sites)
	slices.SortStableFunc(order, func(a, b Site) int {
		switch {
		case a.Deadline != b.Deadline:
			if a.Deadline < b.Deadline {
				return -1
			}
			return 1
		case a.Exec != b.Exec:
			if a.Exec > b.Exec {
				return -1
			}
			return 1
		}
		return 0
	})
	return order
}

// Greedy is the thesis's general scheduler made deterministic: sites in
// order of deadline (longest round first among equal deadlines), each put
// on the lane that keeps the most spare time once it is added.
func Greedy(sites []Site, n int) [][]Site {
	n = max(n, 1)
	lanes := make([][]Site, n)
	dl := make([]float64, n) // each lane's shortest deadline
	ex := make([]float64, n) // and its sum of round times
	for k := range dl {
		dl[k] = math.Inf(1)
	}
	for _, s := range sortedSites(sites) {
		bestK, bestS := 0, math.Inf(-1)
		for k := range lanes {
			if sp := min(dl[k], s.Deadline) - (ex[k] + s.Exec); sp > bestS {
				bestK, bestS = k, sp
			}
		}
		lanes[bestK] = append(lanes[bestK], s)
		dl[bestK], ex[bestK] = min(dl[bestK], s.Deadline), ex[bestK]+s.Exec
	}
	return lanes
}
