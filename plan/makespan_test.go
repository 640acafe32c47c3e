package plan

import (
	"testing"
)

func TestBatchJobSteps(t *testing.T) {
	// Costs 10, 8, 5, 4, 2, 1 (total 30) on two clients, the first twice
	// as fast (r = 1 and 2): quotas 20 and 10. Client 0 takes 10 and 8
	// (18; 5 would exceed 20), client 1 takes 5 and 4 (9); the rest,
	// smallest first, to the clients in reverse order: 1 to client 1,
	// 2 to client 0.
	cost := []float64{5, 1, 10, 4, 8, 2}
	a := BatchJob(cost, []float64{1, 2})
	want := []int{1, 1, 0, 1, 0, 0}
	for z := range want {
		if a.Client[z] != want[z] {
			t.Fatalf("clients %v, want %v", a.Client, want)
		}
	}
}

func TestLPTAndRoundRobin(t *testing.T) {
	r := []float64{1, 1}
	w := []float64{3, 3, 2, 2, 2}
	if m := Makespan(LPT(w, r), w, r); m != 7 {
		t.Errorf("LPT makespan %v, want 7", m)
	}
	// Small first, large last: the two 3s end up last on different clients.
	if m := Makespan(RoundRobin(ByCost(w, false), w, r), w, r); m != 7 {
		t.Errorf("RR ascending makespan %v, want 7", m)
	}
	if lb := LowerBound(w, r); lb != 6 {
		t.Errorf("lower bound %v, want 6", lb)
	}
	// A faster client takes more: r = 1 and 3.
	r = []float64{1, 3}
	a := LPT([]float64{6, 1, 1}, r)
	if a.Client[0] != 0 {
		t.Errorf("the largest job should go to the fast client: %v", a.Client)
	}
}

// TestPechnikovWorkload runs the paper's four modes and LPT on 200
// simulated 99-site rounds with the paper's client speeds; -v prints the
// table of docs/design/planning.md.
func TestPechnikovWorkload(t *testing.T) {
	for _, tc := range []struct {
		name    string
		clients []float64
	}{{"3 clients", PaperClients3}, {"5 clients", PaperClients5}} {
		t.Run(tc.name, func(t *testing.T) {
			out := Compare(PaperWorkload, tc.clients, 200)
			by := map[string]Outcome{}
			t.Logf("| planner | mean makespan (s) | mean lower bound (s) | makespan / bound: median | mean | worst |")
			t.Logf("|---|---:|---:|---:|---:|---:|")
			for _, o := range out {
				by[o.Planner] = o
				t.Logf("| %s | %.0f | %.0f | %.3f | %.3f | %.3f |", o.Planner, o.MeanMakespan, o.MeanBound, o.Median, o.Mean, o.Worst)
				if o.Median < 1 || o.Worst < o.Median {
					t.Errorf("%s: ratios median %v worst %v: a plan cannot beat the bound", o.Planner, o.Median, o.Worst)
				}
			}
			// Planned ahead, LPT beats the paper's batch modes and the
			// reversed list; handed out dynamically, the same order beats
			// every mode.
			lpt, list := by["LPT"], by["LPT-list"]
			for _, name := range []string{"RR2", "BJ1", "BJ2"} {
				if lpt.Mean >= by[name].Mean {
					t.Errorf("LPT mean ratio %.3f not below %s's %.3f", lpt.Mean, name, by[name].Mean)
				}
			}
			for _, name := range []string{"RR1", "RR2", "BJ1", "BJ2", "LPT"} {
				if list.Mean >= by[name].Mean {
					t.Errorf("LPT-list mean ratio %.3f not below %s's %.3f", list.Mean, name, by[name].Mean)
				}
			}
			// The paper's findings: large sites last (RR2) is the worst,
			// measured times (BJ2) beat page counts (BJ1).
			if by["RR2"].Mean <= by["RR1"].Mean {
				t.Errorf("RR2 %.3f not worse than RR1 %.3f", by["RR2"].Mean, by["RR1"].Mean)
			}
			if by["BJ2"].Mean >= by["BJ1"].Mean {
				t.Errorf("BJ2 %.3f not better than BJ1 %.3f", by["BJ2"].Mean, by["BJ1"].Mean)
			}
			if list.Median > 1.02 || list.Worst > 1.05 {
				t.Errorf("LPT-list ratio median %.3f worst %.3f, want within 2%% and 5%% of the bound", list.Median, list.Worst)
			}
			// Without drift between rounds the plan made ahead is as good.
			steady := PaperWorkload
			steady.DriftSigma = 0
			for _, o := range Compare(steady, tc.clients, 200) {
				if o.Planner == "LPT" {
					t.Logf("no drift: LPT makespan / bound median %.3f mean %.3f worst %.3f", o.Median, o.Mean, o.Worst)
					if o.Median > 1.02 {
						t.Errorf("no drift: LPT median ratio %.3f, want within 2%% of the bound", o.Median)
					}
				}
			}
		})
	}
}
