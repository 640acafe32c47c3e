package node

import (
	"fmt"
	"testing"

	"github.com/phasecrawl/phasecrawl/bucket"
)

// items returns n items whose FPs count from first.
func items(first, n int) []bucket.Item {
	out := make([]bucket.Item, n)
	for i := range out {
		out[i] = bucket.Item{FP: uint64(first + i), URL: fmt.Sprintf("http://h/%d", first+i)}
	}
	return out
}

// fps is the FPs of its.
func fps(its []bucket.Item) []uint64 {
	out := make([]uint64, len(its))
	for i, it := range its {
		out[i] = it.FP
	}
	return out
}

// TestTripListScript runs scripted steps on a trip's list: each step does
// one thing and the list's answers after it are checked.
func TestTripListScript(t *testing.T) {
	type step struct {
		do string // pop N, ask, refill N (0: none), refuse, reserve N, took N, gone N (refill after the host went down), write N, commit N (page writes)
		n  int
		// after the step:
		unstarted, refillRoom, takingRoom int
		waiting, awaits                   bool
	}
	for _, tc := range []struct {
		name    string
		list    int // dispatched URLs
		listCap int
		refills bool
		steps   []step
	}{
		{"a full list asks at once, for up to four lists", 10, 10, true, []step{
			{do: "ask", unstarted: 10},
			{do: "refill", n: 30, unstarted: 40},
			{do: "pop", n: 19, unstarted: 21},
			{do: "pop", n: 1, unstarted: 20, refillRoom: 20},
			{do: "ask", unstarted: 20},
			{do: "pop", n: 20, unstarted: 0, waiting: true},
			{do: "refill", n: 5, unstarted: 5, refillRoom: 35},
		}},
		{"an empty answer, the list done and its writes committed, ends the asking", 3, 3, true, []step{
			{do: "ask", unstarted: 3},
			{do: "pop", n: 3, unstarted: 0, waiting: true},
			{do: "write", n: 3, unstarted: 0, waiting: true},
			{do: "commit", n: 3, unstarted: 0, waiting: true},
			{do: "refill", n: 0, unstarted: 0},
		}},
		{"an empty answer asks again once the list's pages are recorded", 2, 2, true, []step{
			{do: "write", n: 1, unstarted: 2, refillRoom: 6},
			{do: "ask", unstarted: 2},
			{do: "refill", n: 0, unstarted: 2},
			{do: "pop", n: 2, unstarted: 0, awaits: true},
			{do: "commit", n: 1, unstarted: 0},
			{do: "write", n: 2, unstarted: 0, awaits: true},
			{do: "commit", n: 1, unstarted: 0, awaits: true},
			{do: "commit", n: 1, unstarted: 0, refillRoom: 8},
			{do: "ask", unstarted: 0, waiting: true},
			{do: "refill", n: 0, unstarted: 0},
		}},
		{"a list under list_cap asks for nothing, takes new links", 3, 10, true, []step{
			{do: "pop", n: 1, unstarted: 2, takingRoom: 7},
			{do: "reserve", n: 7, unstarted: 2},
		}},
		{"a refusal ends the asking", 20, 20, true, []step{
			{do: "refuse", unstarted: 20},
		}},
		{"dead-link lane: no refills, taking as before", 1, 20, false, []step{
			{do: "pop", n: 1, unstarted: 0, takingRoom: 19},
			{do: "reserve", n: 19, unstarted: 0},
			{do: "write", n: 1, unstarted: 0, awaits: true},
			{do: "commit", n: 1, unstarted: 0},
		}},
		{"a list that took up to list_cap asks, refills do not add to taking", 10, 20, true, []step{
			{do: "reserve", n: 4, unstarted: 10, takingRoom: 6},
			{do: "took", n: 10, unstarted: 20, refillRoom: 60},
			{do: "ask", unstarted: 20},
			{do: "refill", n: 60, unstarted: 80},
		}},
		{"a refill answered once the host is down goes back untried", 5, 5, true, []step{
			{do: "ask", unstarted: 5},
			{do: "gone", n: 7, unstarted: 5},
			{do: "pop", n: 5, unstarted: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tripList{items: items(0, tc.list), listCap: tc.listCap, refills: tc.refills}
			next := tc.list
			var popped, back []uint64
			for i, st := range tc.steps {
				switch st.do {
				case "pop":
					for range st.n {
						it, ok := l.pop()
						if !ok {
							t.Fatalf("step %d: pop on an empty list", i)
						}
						popped = append(popped, it.FP)
					}
				case "ask":
					room := l.refillRoom()
					if room == 0 {
						t.Fatalf("step %d: no refill to ask for", i)
					}
					l.askedFor(room)
				case "refill", "gone":
					if st.n > l.asked {
						t.Fatalf("step %d: refill of %d over the room asked, %d", i, st.n, l.asked)
					}
					r := items(next, st.n)
					next += st.n
					if st.do == "gone" {
						back = append(back, fps(r)...)
					}
					l.refilled(r, st.do == "refill")
				case "refuse":
					l.refused()
				case "reserve":
					l.reserved += st.n
				case "took": // page writes took URLs for the trip
					l.items = append(l.items, items(next, st.n)...)
					next += st.n
				case "write":
					for range st.n {
						l.wrote()
					}
				case "commit":
					for range st.n {
						l.committedWrite()
					}
				}
				if got := l.unstarted(); got != st.unstarted {
					t.Errorf("step %d (%s %d): unstarted %d, want %d", i, st.do, st.n, got, st.unstarted)
				}
				if got := l.refillRoom(); got != st.refillRoom {
					t.Errorf("step %d (%s %d): refillRoom %d, want %d", i, st.do, st.n, got, st.refillRoom)
				}
				if got := l.takingRoom(true); got != st.takingRoom {
					t.Errorf("step %d (%s %d): takingRoom %d, want %d", i, st.do, st.n, got, st.takingRoom)
				}
				if got := l.waiting(); got != st.waiting {
					t.Errorf("step %d (%s %d): waiting %v, want %v", i, st.do, st.n, got, st.waiting)
				}
				if got := l.awaitsWrites(); got != st.awaits {
					t.Errorf("step %d (%s %d): awaitsWrites %v, want %v", i, st.do, st.n, got, st.awaits)
				}
				if l.takingRoom(false) != 0 {
					t.Errorf("step %d: takingRoom for a host down %d, want 0", i, l.takingRoom(false))
				}
			}
			// Every URL the trip got is either popped once or handed back
			// by rest, in order, and the URLs refilled after the host went
			// down are among those handed back, never popped.
			rest := fps(l.rest())
			all := append(append([]uint64(nil), popped...), rest...)
			if len(all) != next {
				t.Fatalf("popped %v and handed back %v: %d URLs, the trip got %d", popped, rest, len(all), next)
			}
			seen := map[uint64]bool{}
			for _, fp := range all {
				if seen[fp] {
					t.Fatalf("URL %d both popped and handed back, or twice: popped %v, rest %v", fp, popped, rest)
				}
				seen[fp] = true
			}
			for _, fp := range back {
				for _, p := range popped {
					if p == fp {
						t.Errorf("URL %d refilled after the host went down was popped", fp)
					}
				}
			}
			if l.unstarted() != 0 || len(l.rest()) != 0 {
				t.Errorf("rest twice gave URLs again")
			}
		})
	}
}
