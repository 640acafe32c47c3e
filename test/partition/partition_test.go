package partition_test

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// scenario is one partition: the nodes cut off from the others, whether
// only their packets to the others are dropped (they still hear them), and
// how long the cut lasts.
type scenario struct {
	nodes  int
	cutOff []int
	oneWay bool
	cutFor time.Duration
}

// TestPartitionOneNodeCutOff: one node of three is cut off from the two
// others for 60 s (both directions; the web stays reachable), then the
// cut heals.
func TestPartitionOneNodeCutOff(t *testing.T) {
	runScenario(t, scenario{nodes: 3, cutOff: []int{2}, cutFor: 60 * time.Second})
}

// TestPartitionTwoOfFive: a cluster of five splits into two and three for
// 30 s, then heals.
func TestPartitionTwoOfFive(t *testing.T) {
	runScenario(t, scenario{nodes: 5, cutOff: []int{3, 4}, cutFor: 30 * time.Second})
}

// TestPartitionOneWay: the packets one node of three sends to the two
// others are dropped for 30 s; it still hears them (they do not hear it).
func TestPartitionOneWay(t *testing.T) {
	runScenario(t, scenario{nodes: 3, cutOff: []int{2}, oneWay: true, cutFor: 30 * time.Second})
}

// runScenario crawls the web with sc.nodes nodes, cuts sc.cutOff off from
// the others once the crawl is under way, heals the cut sc.cutFor later and
// lets the crawl finish. It asserts that
//   - every node cut off is fenced (phasecrawl_cluster_fenced 1, the
//     status says why: it sees fewer than a majority of the agreed view),
//     and fetches nothing from shortly after its fence until the heal; the
//     others are never fenced;
//   - after the heal the nodes find each other by themselves (reconnect)
//     and all work on a phase again, unfenced;
//   - the web saw every page fetched, never two requests at once to a host
//     and no gap under the politeness delay, and the only pages fetched
//     twice are pages a cut-off node fetched between the cut and its fence
//     (their records could not reach the others, which took the share
//     over), at most as many as it fetched then; and, with more than one
//     node cut off, pages fetched before the cut whose owner and replica
//     (kept by the member ranked second for the URL) were both cut off,
//     whoever fetched them (the owner, or a member it lent the URL to,
//     until the end of that member's phase).
func runScenario(t *testing.T, sc scenario) {
	requireNetns(t)
	s := defaultSettings()
	c := newPCluster(t, sc.nodes, s)
	var cut, majority []*proc
	var majIdx []int
	for _, p := range c.procs {
		if slices.Contains(sc.cutOff, p.i) {
			cut = append(cut, p)
		} else {
			majority = append(majority, p)
			majIdx = append(majIdx, p.i)
		}
	}
	if err := c.procs[0].postSeeds(c.web.Seeds()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 60*time.Second, "15% of the crawl", func() bool { return pagesFetched(c.procs) >= int64(c.exp.Fetches)*15/100 })

	cutAt := time.Now()
	for _, p := range cut {
		c.net.cut(p.i, majIdx, sc.oneWay)
	}
	t.Logf("cut %v off at %s (one way: %v), %d pages fetched", names(cut), cutAt.UTC().Format("15:04:05.000"), sc.oneWay, pagesFetched(c.procs))

	// Every node cut off fences itself, saying why.
	wantWhy := fmt.Sprintf("sees %d of %d members of the agreed view; a majority is %d", len(cut), sc.nodes, sc.nodes/2+1)
	wait.For(t, 30*time.Second, "the nodes cut off are fenced", func() bool {
		for _, p := range cut {
			st, err := p.status()
			if err != nil || st.Phase.Fenced == "" || st.Phase.Current != -1 {
				return false
			}
			if v, err := p.metric(cluster.MetricClusterFenced); err != nil || v != 1 {
				return false
			}
		}
		return true
	})
	fencedAt := map[string]time.Time{}
	for _, p := range cut {
		st, _ := p.status()
		if st.Phase.Fenced != wantWhy {
			t.Errorf("%s: status says it is fenced because %q, want %q", p.name, st.Phase.Fenced, wantWhy)
		}
		for _, at := range p.logTimes("fenced: ") {
			if at.After(cutAt) {
				fencedAt[p.name] = at
				break
			}
		}
		if fencedAt[p.name].IsZero() {
			t.Fatalf("%s: no 'fenced' log record after the cut", p.name)
		}
		t.Logf("%s fenced %v after the cut", p.name, fencedAt[p.name].Sub(cutAt).Round(time.Millisecond))
	}
	// Requests started before the fence end by their phase's deadline: the
	// bound the fence promises, waited out.
	time.Sleep(s.phase)
	frozen := map[string]int64{}
	for _, p := range cut {
		st, err := p.status()
		if err != nil {
			t.Fatal(err)
		}
		frozen[p.name] = st.PagesFetched
	}
	for time.Since(cutAt) < sc.cutFor {
		for _, p := range majority {
			if v, err := p.metric(cluster.MetricClusterFenced); err == nil && v != 0 {
				t.Errorf("%s (majority side) fenced during the cut", p.name)
			}
		}
		time.Sleep(time.Second) // the majority is sampled each second while the cut lasts
	}
	for _, p := range cut {
		st, err := p.status()
		if err != nil {
			t.Fatal(err)
		}
		if st.PagesFetched != frozen[p.name] || st.Phase.Fenced == "" {
			t.Errorf("%s: fetched %d pages while fenced (fenced: %q)", p.name, st.PagesFetched-frozen[p.name], st.Phase.Fenced)
		}
	}
	majPages := pagesFetched(majority)
	for _, p := range cut {
		c.net.heal(p.i)
	}
	healAt := time.Now()
	t.Logf("healed at %s; the majority side fetched %d pages", healAt.UTC().Format("15:04:05.000"), majPages)

	// Without a restart or a join, the sides find each other again.
	wait.For(t, 60*time.Second, "every node sees all alive and works on a phase, unfenced", func() bool {
		if !c.formed(c.procs) {
			return false
		}
		for _, p := range c.procs {
			if st, err := p.status(); err != nil || st.Phase.Fenced != "" {
				return false
			}
		}
		return true
	})
	convergedAt := time.Now()
	t.Logf("converged %v after the heal", convergedAt.Sub(healAt).Round(100*time.Millisecond))
	wait.For(t, 3*time.Minute, "crawl done", func() bool { return crawlDone(c.procs) })
	doneAt := time.Now()

	// The web's record.
	rep, err := harness.WebReport(c.webAddr)
	if err != nil {
		t.Fatal(err)
	}
	visits, err := harness.WebVisits(c.webAddr)
	if err != nil {
		t.Fatal(err)
	}
	vs := harness.Violations(rep, c.exp, s.delay, sc.nodes)
	if len(vs) > 20 {
		vs = append(vs[:20], fmt.Sprintf("… %d more", len(vs)-20))
	}
	overlaps, gaps, shown := 0, 0, 0
	for _, in := range synthweb.Incidents(visits, harness.HostGap(c.exp, s.delay)) {
		switch in.Kind {
		case "overlap":
			overlaps++
		case "gap":
			gaps++
		}
		if in.Kind != "duplicate" && shown < 20 {
			// When, against the timeline below.
			shown++
			vs = append(vs, fmt.Sprintf("  at %s (%+.2fs after the cut): %s", in.At.UTC().Format("15:04:05.000000"), in.At.Sub(cutAt).Seconds(), in.String()))
		}
	}
	minGap := time.Duration(-1)
	for _, hv := range visits {
		hv = slices.Clone(hv)
		slices.SortFunc(hv, func(a, b synthweb.Visit) int { return a.Start.Compare(b.Start) })
		for i := 1; i < len(hv); i++ {
			if g := hv[i].Start.Sub(hv[i-1].Start); minGap < 0 || g < minGap {
				minGap = g
			}
		}
	}

	// Duplicates: pages fetched by a node cut off between the cut and its
	// fence (the records of their fetch stayed in its outbox), fetched
	// again by the others once they took its share over.
	dup := harness.Duplicated(rep, c.exp)
	isCut := map[string]bool{}
	for _, p := range cut {
		isCut[p.name] = true
	}
	inWindow := func(e harness.FetchEvent) bool {
		f, ok := fencedAt[e.Node]
		// A request started before the fence is answered by the phase's end.
		return ok && !e.At.Before(cutAt.Add(-s.phase)) && !e.At.After(f.Add(s.phase))
	}
	// With more than one node cut off, a page fetched before the cut may
	// have its record (at the URL's owner) and its only replica (the member
	// ranked second for the URL) both on the side cut off: the others
	// cannot know it was fetched, whether its owner fetched it or another
	// member did for it (cluster.lend: the holder's outcome reached the
	// owner, the replicas went to the member ranked second). A URL such an
	// owner lent before the cut may also be fetched on the other side
	// until the end of the holder's phase: its outcome and replica wait
	// for the members cut off until they are taken over, and then reach
	// the URL's new owner together with the URL itself, found again by the
	// others; the new owner may fetch it first.
	ring := ring.New(names(c.procs))
	replicaCut := func(u string, e harness.FetchEvent) bool {
		first, second := ring.Top2(frontier.Fingerprint(u))
		end := cutAt
		if !isCut[e.Node] {
			end = cutAt.Add(s.phase)
		}
		return isCut[first] && isCut[second] && e.At.Before(end)
	}
	var unexplained []string
	inFlight, sameSide := 0, 0
	evs := harness.FetchEvents(c.dirs(), dup)
	for u := range dup {
		switch {
		case slices.ContainsFunc(evs[u], inWindow):
			inFlight += len(evs[u]) - 1
		case slices.ContainsFunc(evs[u], func(e harness.FetchEvent) bool { return replicaCut(u, e) }):
			sameSide += len(evs[u]) - 1
		default:
			unexplained = append(unexplained, fmt.Sprintf("%s: %v", u, evs[u]))
		}
	}
	// The bounds: what the nodes cut off fetched between the cut and their
	// fence, and what they fetched before with the replica on their side.
	all := map[string]bool{}
	for u := range c.exp.Pages {
		all[u] = true
	}
	window, replicaSide := 0, 0
	for u, es := range harness.FetchEvents(c.dirs(), all) {
		for _, e := range es {
			if isCut[e.Node] && inWindow(e) {
				window++
			} else if replicaCut(u, e) {
				replicaSide++
			}
		}
	}
	if len(unexplained) > 0 {
		slices.Sort(unexplained)
		vs = append(vs, fmt.Sprintf("%d duplicate fetches not made by a node cut off between the cut and its fence (nor before, its replica on its side):", len(unexplained)))
		vs = append(vs, unexplained[:min(len(unexplained), 20)]...)
	}
	if inFlight > window {
		vs = append(vs, fmt.Sprintf("%d duplicate fetches of pages fetched around the cut, more than the %d pages the nodes cut off fetched between the cut and their fence", inFlight, window))
	}
	if len(cut) == 1 && sameSide > 0 {
		vs = append(vs, fmt.Sprintf("%d duplicates of pages whose replica was on the side cut off, with one node cut off", sameSide))
	}
	t.Logf("figures: %d pages of %d fetched, %d duplicates: %d of pages fetched between the cut and the fence (bound %d: pages the nodes cut off fetched then), %d of pages fetched before the cut whose replica was on the side cut off too (bound %d); %d overlapping requests, %d gaps under the delay, smallest gap %v (delay %v), converged %v after the heal, crawl done %v after the heal",
		len(rep.URLs), c.exp.Fetches, rep.Duplicates, inFlight, window, sameSide, replicaSide, overlaps, gaps, minGap.Round(time.Microsecond), s.delay,
		convergedAt.Sub(healAt).Round(100*time.Millisecond), doneAt.Sub(healAt).Round(100*time.Millisecond))
	var tl []string
	for _, p := range c.procs {
		tl = append(tl, p.timeline(cutAt.Add(-time.Second))...)
	}
	secs := func(l string) float64 {
		f, _ := strconv.ParseFloat(strings.TrimSuffix(strings.Fields(l)[0], "s"), 64)
		return f
	}
	slices.SortStableFunc(tl, func(a, b string) int { return cmp.Compare(secs(a), secs(b)) })
	t.Logf("timeline (seconds after the cut):\n%s", strings.Join(tl, "\n"))
	if overlaps > 0 || gaps > 0 {
		vs = append(vs, fmt.Sprintf("%d overlapping requests and %d gaps under the delay, want 0", overlaps, gaps))
	}
	if len(vs) > 0 {
		t.Errorf("%d violations:\n%s", len(vs), strings.Join(vs, "\n"))
	}
}

func names(ps []*proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.name)
	}
	return out
}
