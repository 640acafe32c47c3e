package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
)

// TestDispatchQueueScript runs scripted steps on a dispatch queue: elements
// pushed (host, lane, rank), elements taken by workers, and checks the
// order the workers would take them in after each step.
func TestDispatchQueueScript(t *testing.T) {
	type push struct {
		host string
		prio bool
		site int
		cost time.Duration
		dead bool
	}
	tests := []struct {
		name   string
		ranked bool // rankOf set: elements ordered by rank within a lane
		steps  []struct {
			push []push
			take int // then this many taken from pending
			dead int // and this many from dead
			want string
		}
	}{
		{name: "arrival order, priority lane ahead", steps: []struct {
			push []push
			take int
			dead int
			want string
		}{
			{push: []push{{host: "a"}, {host: "b"}}, want: "a b (0 prio) | "},
			{push: []push{{host: "c"}, {host: "s1", prio: true}, {host: "d"}}, want: "s1 a b c d (1 prio) | "},
			{push: []push{{host: "s2", prio: true}}, want: "s1 s2 a b c d (2 prio) | "},
			{take: 1, want: "s2 a b c d (1 prio) | "},
			{take: 2, want: "b c d (0 prio) | "},
			{push: []push{{host: "x", dead: true}, {host: "e"}, {host: "y", dead: true}}, take: 1, want: "c d e (0 prio) | x y"},
			{dead: 1, want: "c d e (0 prio) | y"},
			{push: []push{{host: "big", cost: time.Hour}}, want: "c d e big (0 prio) | y"}, // no rankOf: cost ignored
		}},
		{name: "by rank within each lane", ranked: true, steps: []struct {
			push []push
			take int
			dead int
			want string
		}{
			{push: []push{{host: "small", cost: time.Second}, {host: "large", cost: time.Minute}}, want: "large small (0 prio) | "},
			{push: []push{{host: "mid", cost: 10 * time.Second}}, want: "large mid small (0 prio) | "},
			{push: []push{{host: "same", cost: 10 * time.Second}}, want: "large mid same small (0 prio) | "}, // equal rank: after
			{push: []push{{host: "site5", site: 5, prio: true}, {host: "new", prio: true, cost: time.Hour}}, want: "site5 new large mid same small (2 prio) | "},
			{push: []push{{host: "site9", site: 9, prio: true}}, want: "site9 site5 new large mid same small (3 prio) | "},
			{take: 3, push: nil, want: "large mid same small (0 prio) | "},
			{push: []push{{host: "tiny"}}, want: "large mid same small tiny (0 prio) | "},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q dispatchQueue
			ranks := map[string]rank{}
			var rankOf func(string) rank
			if tc.ranked {
				rankOf = func(h string) rank { return ranks[h] }
			}
			id := 0
			for i, st := range tc.steps {
				for _, p := range st.push {
					id++
					b := bucket.Batch{ID: bucket.ElementID{Gen: uint64(id)}, Host: p.host}
					if p.dead {
						q.pushDead(b)
						continue
					}
					ranks[p.host] = rank{site: p.site, cost: p.cost}
					q.push(b, p.prio, ranks[p.host], rankOf)
				}
				for range st.take {
					q.took()
				}
				for range st.dead {
					q.deadTook()
				}
				if got := queueOrder(&q); got != st.want {
					t.Fatalf("step %d: %s, want %s", i, got, st.want)
				}
				if q.waiting() != len(q.pending)+len(q.dead) || q.nprio > len(q.pending) {
					t.Fatalf("step %d: waiting %d, nprio %d of %d", i, q.waiting(), q.nprio, len(q.pending))
				}
			}
		})
	}
}

// TestDispatchQueueRanksNow: a waiting element is compared at the rank its
// host has when a new element arrives (a round cost refreshed meanwhile).
func TestDispatchQueueRanksNow(t *testing.T) {
	var q dispatchQueue
	ranks := map[string]rank{"a": {cost: 3}, "b": {cost: 1}}
	rankOf := func(h string) rank { return ranks[h] }
	q.push(bucket.Batch{ID: bucket.ElementID{Gen: 1}, Host: "a"}, false, ranks["a"], rankOf)
	q.push(bucket.Batch{ID: bucket.ElementID{Gen: 2}, Host: "b"}, false, ranks["b"], rankOf)
	ranks["a"] = rank{cost: 1} // a's round turned out short
	ranks["c"] = rank{cost: 2}
	q.push(bucket.Batch{ID: bucket.ElementID{Gen: 3}, Host: "c"}, false, ranks["c"], rankOf)
	if got := queueOrder(&q); got != "c a b (0 prio) | " { // at a's old rank: a c b
		t.Fatalf("%s", got)
	}
}

func queueOrder(q *dispatchQueue) string {
	var p, d []string
	for _, b := range q.pending {
		p = append(p, b.Host)
	}
	for _, b := range q.dead {
		d = append(d, b.Host)
	}
	return fmt.Sprintf("%s (%d prio) | %s", strings.Join(p, " "), q.nprio, strings.Join(d, " "))
}

// TestHostSpeedsScript feeds trip reports to hostSpeeds and checks, after
// each, which hosts take the priority lane and the mean time per request.
func TestHostSpeedsScript(t *testing.T) {
	ms := time.Millisecond
	h := newHostSpeeds()
	steps := []struct {
		host    string
		perPage time.Duration
		avg     time.Duration // the mean after it
		prio    []string      // of a, b, c, d: the hosts in the priority lane after it
	}{
		{"", 0, 0, []string{"a", "b", "c", "d"}},                                                         // nothing reported: all new
		{"a", 10 * ms, 10 * ms, []string{"b", "c", "d"}},                                                 // the first report sets the mean
		{"b", 30 * ms, 10*ms + 20*ms/pageAvgWeight, []string{"b", "c", "d"}},                             // 3× the mean: slow
		{"c", 0, 10*ms + 20*ms/pageAvgWeight, []string{"b", "d"}},                                        // no request: known, mean unchanged
		{"b", 10 * ms, 10*ms + 20*ms/pageAvgWeight - (20*ms/pageAvgWeight)/pageAvgWeight, []string{"d"}}, // fast again
	}
	for i, st := range steps {
		if st.host != "" {
			h.report(st.host, st.perPage)
		}
		var prio []string
		for _, host := range []string{"a", "b", "c", "d"} {
			if h.priority(host) {
				prio = append(prio, host)
			}
		}
		if !slices.Equal(prio, st.prio) || h.pageAvg != st.avg {
			t.Fatalf("step %d (%s at %v): priority %v, mean %v; want %v, %v", i, st.host, st.perPage, prio, h.pageAvg, st.prio, st.avg)
		}
	}
	// A slow host stays slow while its trips are slow, the slow set is bounded.
	h.report("b", 100*ms)
	if !h.priority("b") {
		t.Fatal("b not slow after a trip 10× the mean")
	}
	for i := range maxSlow + 10 {
		h.slow[fmt.Sprint("filler", i)] = struct{}{}
		if len(h.slow) >= maxSlow {
			break
		}
	}
	h.report("e", time.Hour)
	if _, ok := h.slow["e"]; ok || len(h.slow) > maxSlow {
		t.Fatalf("slow set over its bound: %d hosts", len(h.slow))
	}
}
