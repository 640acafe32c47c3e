package plan

import (
	"fmt"
	"math"
	"testing"
)

// example is the thesis's example problem (§3.1, §4.3): 3 nodes, 10 sites;
// site 1 has priority (e = t, d = 6t), sites 2 and 3 take 3t (d = 12t),
// sites 4–10 take t (d = 12t). t = 1.
func example() []Site {
	s := []Site{{"1", 1, 6}, {"2", 3, 12}, {"3", 3, 12}}
	for i := 4; i <= 10; i++ {
		s = append(s, Site{fmt.Sprint(i), 1, 12})
	}
	return s
}

func byName(sites []Site, names ...string) []Site {
	var out []Site
	for _, n := range names {
		for _, s := range sites {
			if s.Name == n {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestMartinssonExample(t *testing.T) {
	sites := example()
	for _, tc := range []struct {
		name  string
		lanes [][]Site
		want  float64
	}{
		// §3.2, Figure 5: the hand plan, lanes of 3t, 5t and 6t.
		{"hand plan", [][]Site{byName(sites, "1", "4", "5"), byName(sites, "2", "6", "7"), byName(sites, "3", "8", "9", "10")}, 3},
		// §6, Figure 6: the optimum, lanes with 5t, 5t and 6t to spare.
		{"optimum", [][]Site{byName(sites, "1"), byName(sites, "2", "4", "5", "6", "7"), byName(sites, "3", "8", "9", "10")}, 5},
		{"everything on one node", [][]Site{sites}, 6 - 14},
		{"empty", nil, math.Inf(1)},
	} {
		if got := PlanSpare(tc.lanes); got != tc.want {
			t.Errorf("%s: T_L = %g, want %g", tc.name, got, tc.want)
		}
	}
	if b := Bound(sites); b != 5 {
		t.Errorf("bound = %g, want 5 (site 1: 6t − t)", b)
	}
	lanes, tl := Optimize(sites, 3)
	if tl != 5 || PlanSpare(lanes) != 5 {
		t.Fatalf("Optimize: T_L = %g (plan %g), want the optimum 5", tl, PlanSpare(lanes))
	}
	n := 0
	for _, l := range lanes {
		n += len(l)
	}
	if n != len(sites) {
		t.Fatalf("Optimize placed %d of %d sites", n, len(sites))
	}
	if g := PlanSpare(Greedy(sites, 3)); g > 5 || g < 3 {
		t.Errorf("Greedy: T_L = %g, want between the hand plan's 3 and the optimum 5", g)
	}
}

func TestOptimizeSmallCases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sites []Site
		n     int
		want  float64
	}{
		{"one site", []Site{{"a", 2, 10}}, 4, 8},
		{"two lanes needed", []Site{{"a", 5, 10}, {"b", 5, 10}, {"c", 5, 10}}, 2, 0},
		{"overloaded", []Site{{"a", 8, 10}, {"b", 8, 10}}, 1, -6},
		{"priority site alone", []Site{{"p", 1, 3}, {"a", 2, 20}, {"b", 2, 20}, {"c", 2, 20}}, 2, 2},
	} {
		if _, got := Optimize(tc.sites, tc.n); got != tc.want {
			t.Errorf("%s: T_L = %g, want %g", tc.name, got, tc.want)
		}
	}
}
