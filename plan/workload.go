package plan

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Workload is a simulated round of sites for the planners: what the last
// round measured and what the next round will really cost. Work is in
// pages of the reference site: a client whose reference time is R
// seconds for its 800 pages takes w·R/800 seconds for work w.
type Workload struct {
	// Pages is each site's size in the last round (BJ1's cost).
	Pages []float64
	// Prev is each site's work measured in the last round (BJ2's cost,
	// and LPT's).
	Prev []float64
	// Next is each site's true work in the round being planned.
	Next []float64
}

// WorkloadConfig shapes GenerateWorkload.
type WorkloadConfig struct {
	Sites int
	// Alpha and MinPages: sizes follow a discrete power law (Pareto tail
	// P(X > x) = (x/MinPages)^-Alpha), capped at MaxPages.
	Alpha              float64
	MinPages, MaxPages float64
	// PageSigma is the spread (log-normal σ) of a site's time per page
	// against the reference site: servers answer at different speeds, so
	// pages are a rough measure of cost.
	PageSigma float64
	// DriftSigma is the change of a site between two rounds (log-normal σ,
	// on its size and on its time).
	DriftSigma float64
}

// PaperWorkload is the 99-site set of Pechnikov et al. §6 as simulated
// here: the paper gives neither sizes nor times of its sites, only that
// thematic sites' sizes follow a power law (§5) and that a ~1,000-page
// site takes 200–300 s (§5).
var PaperWorkload = WorkloadConfig{Sites: 99, Alpha: 1.2, MinPages: 200, MaxPages: 20000, PageSigma: 0.5, DriftSigma: 0.15}

// GenerateWorkload draws a workload from seed.
func GenerateWorkload(c WorkloadConfig, seed uint64) Workload {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	w := Workload{Pages: make([]float64, c.Sites), Prev: make([]float64, c.Sites), Next: make([]float64, c.Sites)}
	for z := range c.Sites {
		u := 1 - rng.Float64() // (0, 1]
		pages := math.Min(math.Floor(c.MinPages*math.Pow(u, -1/c.Alpha)), c.MaxPages)
		perPage := math.Exp(c.PageSigma * rng.NormFloat64())
		work := pages * perPage
		w.Pages[z] = math.Max(1, math.Round(pages*math.Exp(c.DriftSigma*rng.NormFloat64())))
		w.Prev[z] = work * math.Exp(c.DriftSigma*rng.NormFloat64())
		w.Next[z] = work * math.Exp(c.DriftSigma*rng.NormFloat64())
	}
	return w
}

// The paper's client speeds: seconds to crawl the 800-page reference site.
var (
	PaperClients3 = []float64{105.7, 110.4, 85.8}
	PaperClients5 = []float64{95.0, 84.6, 105.7, 110.4, 85.8}
)

// Planner names a way to plan a round.
type Planner struct {
	Name string
	Plan func(w Workload, r []float64) Assignment
}

// Planners are the paper's four modes and two ways to plan largest first
// on the last round's times: LPT fixes each site's client before the round
// (for slots that must be known ahead, such as phases); LPT-list hands out
// the same order dynamically (the first free client takes the next site).
var Planners = []Planner{
	// Round robin is dynamic: a client takes the next site of the list
	// when it is free, which the sites' real times (Next) decide. RR1's
	// list has the last round's largest sites first, RR2's is reversed.
	{"RR1", func(w Workload, r []float64) Assignment { return RoundRobin(ByCost(w.Pages, true), w.Next, r) }},
	{"RR2", func(w Workload, r []float64) Assignment { return RoundRobin(ByCost(w.Pages, false), w.Next, r) }},
	{"BJ1", func(w Workload, r []float64) Assignment { return BatchJob(w.Pages, r) }},
	{"BJ2", func(w Workload, r []float64) Assignment { return BatchJob(w.Prev, r) }},
	{"LPT", func(w Workload, r []float64) Assignment { return LPT(w.Prev, r) }},
	{"LPT-list", func(w Workload, r []float64) Assignment { return RoundRobin(ByCost(w.Prev, true), w.Next, r) }},
}

// Outcome sums up a planner over many workloads.
type Outcome struct {
	Planner string
	// MeanMakespan and MeanBound are in seconds.
	MeanMakespan, MeanBound float64
	// Median, Mean and Worst of makespan / lower bound.
	Median, Mean, Worst float64
}

// Compare runs each planner on trials workloads drawn from seeds
// 1..trials; clients are reference times in seconds per 800 pages.
func Compare(c WorkloadConfig, clients []float64, trials int) []Outcome {
	r := make([]float64, len(clients))
	for j, x := range clients {
		r[j] = x / 800
	}
	out := make([]Outcome, len(Planners))
	ratios := make([][]float64, len(Planners))
	for t := 1; t <= trials; t++ {
		w := GenerateWorkload(c, uint64(t))
		lb := LowerBound(w.Next, r)
		for i, p := range Planners {
			m := Makespan(p.Plan(w, r), w.Next, r)
			out[i].MeanMakespan += m / float64(trials)
			out[i].MeanBound += lb / float64(trials)
			ratios[i] = append(ratios[i], m/lb)
		}
	}
	for i := range out {
		out[i].Planner = Planners[i].Name
		rs := ratios[i]
		sort.Float64s(rs)
		for _, x := range rs {
			out[i].Mean += x / float64(len(rs))
		}
		out[i].Median = rs[len(rs)/2]
		out[i].Worst = rs[len(rs)-1]
	}
	return out
}
