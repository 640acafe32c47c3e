package plan

import (
	"math"
	"sort"
)

// The planners of a round of jobs (sites) over clients of different speeds
// (Pechnikov et al. §4–6). Job z costs w_z units of work (its last round's
// cost, measured on a reference client); client j needs r_j seconds per
// unit, so its batch takes r_j · Σ w_z. Each returns the client of every
// job and, where the order matters, the order each client runs its batch.

// Assignment is a round's plan: Client[z] runs job z.
type Assignment struct {
	Client []int
}

// Makespan is when the last client finishes: max over clients j of
// r_j · Σ_{z on j} w_z, for the jobs' true work w (which may differ from
// the costs the plan was made from).
func Makespan(a Assignment, w, r []float64) float64 {
	load := make([]float64, len(r))
	for z, j := range a.Client {
		load[j] += w[z] * r[j]
	}
	m := 0.0
	for _, l := range load {
		m = max(m, l)
	}
	return m
}

// LowerBound is a bound no plan beats: the work spread over all clients in
// proportion to their speed, and the largest job on the fastest client.
func LowerBound(w, r []float64) float64 {
	var total, speed, wmax float64
	rmin := math.Inf(1)
	for _, x := range w {
		total += x
		wmax = max(wmax, x)
	}
	for _, x := range r {
		speed += 1 / x
		rmin = min(rmin, x)
	}
	return max(total/speed, wmax*rmin)
}

// RoundRobin is the list mode: the jobs in the given order, each taken by
// the first client to be free (of clients free at once, the fastest), as
// a server hands out the next job of its list. cost estimates
// each job's work; the plan is evaluated on the true work with Makespan.
func RoundRobin(order []int, cost, r []float64) Assignment {
	a := Assignment{Client: make([]int, len(cost))}
	free := make([]float64, len(r))
	for _, z := range order {
		j := 0
		for k := range free {
			if free[k] < free[j] || (free[k] == free[j] && r[k] < r[j]) {
				j = k
			}
		}
		a.Client[z] = j
		free[j] += cost[z] * r[j]
	}
	return a
}

// LPT plans largest first: the jobs by cost, largest first, each onto the
// client on which it would finish earliest (the least-loaded one, its
// speed counted). Without speeds (all r equal) it is Graham's LPT.
func LPT(cost, r []float64) Assignment {
	order := byCost(cost, true)
	a := Assignment{Client: make([]int, len(cost))}
	load := make([]float64, len(r))
	for _, z := range order {
		j := 0
		for k := range load {
			if load[k]+cost[z]*r[k] < load[j]+cost[z]*r[j] {
				j = k
			}
		}
		a.Client[z] = j
		load[j] += cost[z] * r[j]
	}
	return a
}

// BatchJob is the paper's heuristic (§5, steps 1–5): jobs by cost,
// largest first, clients by speed, fastest first; each client's quota is
// the total cost times its share of the speed; each client in turn takes
// the next jobs of the list while its batch stays within its quota (the
// first job that would exceed it goes back to the list and the next
// client starts); the jobs left are dealt, smallest first, to the clients
// in reverse order (slowest first), round and round. BJ1 uses site sizes
// as cost, BJ2 the last round's times.
func BatchJob(cost, r []float64) Assignment {
	order := byCost(cost, true)
	clients := make([]int, len(r))
	for j := range clients {
		clients[j] = j
	}
	sort.SliceStable(clients, func(a, b int) bool { return r[clients[a]] < r[clients[b]] })
	var total, speed float64
	for _, c := range cost {
		total += c
	}
	for _, x := range r {
		speed += 1 / x
	}
	a := Assignment{Client: make([]int, len(cost))}
	next := 0
	for _, j := range clients {
		quota := total * (1 / r[j]) / speed
		sum := 0.0
		for next < len(order) && sum+cost[order[next]] <= quota {
			sum += cost[order[next]]
			a.Client[order[next]] = j
			next++
		}
	}
	// Step 5: the rest, smallest to largest, to the clients in reverse order.
	k := 0
	for i := len(order) - 1; i >= next; i-- {
		a.Client[order[i]] = clients[len(clients)-1-k%len(clients)]
		k++
	}
	return a
}

// byCost returns the job indexes sorted by cost (stable).
func byCost(cost []float64, desc bool) []int {
	order := make([]int, len(cost))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		if desc {
			return cost[order[a]] > cost[order[b]]
		}
		return cost[order[a]] < cost[order[b]]
	})
	return order
}

// ByCost returns the job indexes by cost, largest first (desc) or
// smallest first.
func ByCost(cost []float64, desc bool) []int { return byCost(cost, desc) }
