package cluster_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// fault is one injected fault and its time window: from the signal (or the
// start of a joiner) until every running member sees the expected members
// alive again.
type fault struct {
	kind, node string
	from, to   time.Time
	pagesAt    int64 // pages fetched by the running nodes when it began
}

func (f fault) String() string {
	return fmt.Sprintf("%s %s [%s, %s] (%s)", f.kind, f.node, f.from.Format("15:04:05.000"), f.to.Format("15:04:05.000"),
		f.to.Sub(f.from).Round(time.Millisecond))
}

// TestProcChurn: during one crawl, on a seeded schedule
// (PHASECRAWL_CHURN_SEED, logged), a node joins, a node leaves gracefully
// (SIGTERM) and later a new one joins, a node is killed with SIGKILL and
// restarted with the same --name and --data, and a node is paused (SIGSTOP)
// until the others see it gone and then resumed (SIGCONT). The cycle runs
// once by default; PHASECRAWL_CHURN=<duration> repeats it until at least
// that long has passed (the web is slowed so the crawl outlasts it). Then
// the crawl finishes and the oracle must find every reachable page fetched
// and nothing else; duplicates stay under a bound (see dupBound), and every
// duplicate fetch, overlapping request and politeness gap under the delay,
// placed in time by the web's per-request record (synthweb.Visits), must
// fall inside a fault window; what happens inside each window is logged.
func TestProcChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster churn in -short mode")
	}
	var churn time.Duration
	if s := os.Getenv("PHASECRAWL_CHURN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("PHASECRAWL_CHURN=%q: %v", s, err)
		}
		churn = d
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("PHASECRAWL_CHURN_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("PHASECRAWL_CHURN_SEED=%q: %v", s, err)
		}
		seed = v
	}
	rng := rand.New(rand.NewSource(seed))
	t.Logf("churn schedule: seed %d (PHASECRAWL_CHURN_SEED), duration %v (PHASECRAWL_CHURN; 0: one cycle)", seed, churn)

	web, webAddr, exp := clusterWeb(t)
	c := newProcCluster(t, web, webAddr)
	// The largest host has ~410 pages: the politeness delay sets the
	// crawl's length (measured: ~150 s at 170ms, ~880 × delay). The guard
	// must outlast a host's pacing plus a slow response, and the phase a
	// few guards.
	c.delay = 70 * time.Millisecond
	if d := churn / 700; d > c.delay {
		c.delay = d.Round(time.Millisecond)
	}
	if g := c.delay + 150*time.Millisecond; g > c.guard {
		c.guard = g
	}
	if p := 5 * c.guard; p > c.phase {
		c.phase = p
	}
	t.Logf("delay %v, phase %v, guard %v", c.delay, c.phase, c.guard)
	start := time.Now()
	running := startCluster(t, c, 3)
	all := slices.Clone(running)
	next := 3
	if err := running[0].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}

	var faults []fault
	settle := func(what string, ps []*proc, within time.Duration) {
		t.Helper()
		wait.For(t, within, what, func() bool { return c.formed(ps) })
	}
	// The cluster crawls on for a random 1-3 s between two faults: the
	// random moment is the point, there is no state to wait for.
	gap := func() { time.Sleep(time.Duration(1000+rng.Intn(2000)) * time.Millisecond) }
	pick := func() *proc { return running[rng.Intn(len(running))] }
	without := func(ps []*proc, x *proc) []*proc {
		return slices.DeleteFunc(slices.Clone(ps), func(p *proc) bool { return p == x })
	}
	begin := func(kind string, p *proc) *fault {
		faults = append(faults, fault{kind: kind, node: p.name, from: time.Now(), pagesAt: pagesFetched(running)})
		f := &faults[len(faults)-1]
		t.Logf("%6.1fs %s %s at %d pages", time.Since(start).Seconds(), kind, p.name, f.pagesAt)
		return f
	}
	end := func(f *fault) {
		f.to = time.Now()
		t.Logf("%6.1fs settled: %s", time.Since(start).Seconds(), f)
	}
	join := func() {
		p := c.add(next)
		next++
		f := begin("join", p)
		p.start(running[0].gossip)
		p.waitUp()
		all, running = append(all, p), append(running, p)
		settle(p.name+" joined", running, 90*time.Second)
		end(f)
	}
	starts := 3
	for cycle := 1; ; cycle++ {
		t.Logf("---- churn cycle %d", cycle)
		settle("cluster settled", running, 90*time.Second)
		gap()
		if len(running) < 4 {
			join()
			starts++
			gap()
		}
		// Graceful leave.
		p := pick()
		f := begin("leave (SIGTERM)", p)
		if err := p.stop(syscall.SIGTERM, 2*time.Minute); err != nil {
			t.Fatalf("%s graceful leave: %v\n%s", p.name, err, p.tail(20))
		}
		running = without(running, p)
		settle(p.name+" left", running, 90*time.Second)
		end(f)
		gap()
		join()
		starts++
		gap()
		// kill -9 and restart with the same name and data.
		p = pick()
		f = begin("kill -9 + restart", p)
		if err := p.stop(syscall.SIGKILL, 10*time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("kill -9 of %s: %v", p.name, err)
		}
		others := without(running, p)
		settle("the others see "+p.name+" gone", others, 90*time.Second)
		t.Logf("%6.1fs %s seen gone; restarting it", time.Since(start).Seconds(), p.name)
		gap()
		p.start(others[0].gossip)
		starts++
		p.waitUp()
		settle(p.name+" back after its restart", running, 90*time.Second)
		end(f)
		gap()
		// SIGSTOP until the others see it gone, then SIGCONT.
		p = pick()
		f = begin("pause (SIGSTOP/SIGCONT)", p)
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		others = without(running, p)
		settle("the others see "+p.name+" gone", others, 90*time.Second)
		t.Logf("%6.1fs %s seen gone; resuming it", time.Since(start).Seconds(), p.name)
		gap()
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		settle(p.name+" back after SIGCONT", running, 90*time.Second)
		end(f)
		pausedFor := f.to.Sub(f.from)
		if n := len(p.logRecords("this process was frozen")); n < 1 {
			t.Errorf("%s was stopped for %s but never fenced itself (no \"this process was frozen\" log record)", p.name, pausedFor.Round(time.Millisecond))
		}
		if time.Since(start) >= churn {
			break
		}
	}
	churnEnd := time.Now()
	t.Logf("%6.1fs churn over (%d faults); waiting for the crawl to finish", time.Since(start).Seconds(), len(faults))
	waitDone(t, running, 10*time.Minute+2*churn)
	t.Logf("%6.1fs crawl done", time.Since(start).Seconds())

	rep, err := harness.WebReport(webAddr)
	if err != nil {
		t.Fatal(err)
	}
	// Every reachable page fetched, nothing else; robots.txt at most once
	// per node process. Duplicates, overlaps and politeness gaps are judged
	// below.
	var vs, overlaps, gaps []string
	for _, v := range rep.Check(exp, c.delay) {
		switch {
		case strings.Contains(v, "robots.txt fetched"), strings.HasSuffix(v, ": robots.txt fetches"),
			strings.HasPrefix(v, "duplicate: "), strings.HasSuffix(v, ": duplicate fetches"):
		case strings.Contains(v, "requests in flight at once"), strings.HasSuffix(v, ": concurrency"):
		case strings.Contains(v, "apart, want >="), strings.HasSuffix(v, ": politeness gaps"):
			gaps = append(gaps, v)
		default:
			vs = append(vs, v)
		}
	}
	for h := range exp.Contacted {
		if r := rep.Hosts[h].RobotsFetches; r < 1 || r > starts {
			vs = append(vs, fmt.Sprintf("host %s: robots.txt fetched %d times, want 1..%d", h, r, starts))
		}
	}
	for h, hr := range rep.Hosts {
		if hr.MaxInFlight > 1 {
			overlaps = append(overlaps, fmt.Sprintf("%s (%d)", h, hr.MaxInFlight))
		}
	}
	slices.Sort(overlaps)
	if len(vs) > 0 {
		if len(vs) > 40 {
			vs = append(vs[:40], fmt.Sprintf("... %d more", len(vs)-40))
		}
		t.Errorf("%d violations:\n%s", len(vs), strings.Join(vs, "\n"))
	}

	// Duplicates, overlaps and short gaps, each placed in time by the web's
	// per-request record: outside the fault windows there must be none. A
	// window runs from the signal (or a joiner's start) until the members
	// agree again, plus slack: a resumed or restarted node finishes the trips
	// it had, and the phase assignment follows membership at the next epoch.
	visits, err := harness.WebVisits(webAddr)
	if err != nil {
		t.Fatal(err)
	}
	slack := 3 * c.phase         // a membership change learned in a guard takes effect an epoch later, and a resumed node is fenced for two
	const lead = 2 * time.Second // a page's record is committed well within this after its fetch
	type tally struct{ duplicate, overlap, gap int }
	perFault := make([]tally, len(faults))
	examples := make([][]string, len(faults)) // a few overlaps and gaps per window, with their times
	var outside []synthweb.Incident
	dups := 0
	for _, in := range synthweb.Incidents(visits, harness.HostGap(exp, c.delay)) {
		if in.Kind == "duplicate" {
			dups++
		}
		w := -1
		inWindow := func(at time.Time, f fault) bool { return !at.Before(f.from) && !at.After(f.to.Add(slack)) }
		for i, f := range faults {
			// A duplicate belongs to a fault when it happened in the window
			// (pages the killed or frozen node had completed, fetched by
			// others while it was away) or when the fetch it repeats did:
			// requests in flight at a kill or a freeze, and pages fetched
			// just before it whose record was not committed (lead), are
			// fetched again whenever the crawl comes back to them, maybe
			// long after the window.
			if inWindow(in.At, f) || in.Kind == "duplicate" && !in.Prev.Before(f.from.Add(-lead)) && !in.Prev.After(f.to.Add(slack)) {
				w = i
			}
		}
		if w < 0 {
			outside = append(outside, in)
			continue
		}
		switch in.Kind {
		case "duplicate":
			perFault[w].duplicate++
		case "overlap":
			perFault[w].overlap++
		case "gap":
			perFault[w].gap++
		}
		if in.Kind != "duplicate" && len(examples[w]) < 5 {
			examples[w] = append(examples[w], in.At.UTC().Format("15:04:05.000")+" "+in.String())
		}
	}
	// The bound: a kill or a pause cuts at most one trip per worker (its
	// requests in flight), and the pages of those trips not yet recorded
	// are fetched again: at most workers × (1 + the bucket's list length)
	// per kill or pause. A graceful leave and a join fetch nothing twice.
	hard := 0
	for _, f := range faults {
		if strings.HasPrefix(f.kind, "kill") || strings.HasPrefix(f.kind, "pause") {
			hard++
		}
	}
	bound := hard * c.workers * (1 + config.Default().Bucket.ListCap)
	t.Logf("oracle: %d URLs fetched of %d expected pages, %d duplicates (bound %d for %d kills/pauses), %d hosts with overlapping requests: %v, %d politeness-gap findings",
		len(rep.URLs), exp.Fetches, dups, bound, hard, len(overlaps), overlaps, len(gaps))
	if dups > bound {
		t.Errorf("%d duplicate fetches, want at most %d", dups, bound)
	}
	if len(outside) > 0 {
		lines := []string{}
		for i, in := range outside {
			if i == 20 {
				lines = append(lines, fmt.Sprintf("... %d more", len(outside)-20))
				break
			}
			line := in.String()
			if in.Kind == "duplicate" {
				u := "http://" + in.Host + strings.Fields(in.Detail)[0]
				line += " — " + strings.Join(crawlLogLines(dirsOf(all), u), "; ")
			}
			lines = append(lines, line)
		}
		t.Errorf("%d duplicates, overlaps or short gaps outside every fault window:\n%s", len(outside), strings.Join(lines, "\n"))
	}
	// What happened inside each window: pages fetched, duplicates.
	fetched := make([]int, len(faults))
	for _, p := range all {
		f, err := os.Open(filepath.Join(p.data, "crawl.log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e logEntry
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Status <= 0 {
				continue
			}
			for i, w := range faults {
				if !e.Time.Before(w.from) && !e.Time.After(w.to) {
					fetched[i]++
				}
			}
		}
		f.Close()
	}
	for i, f := range faults {
		t.Logf("window %s: %d pages fetched in it (%d when it began); in it (+%s): %d duplicates, %d overlaps, %d short gaps",
			f, fetched[i], f.pagesAt, slack, perFault[i].duplicate, perFault[i].overlap, perFault[i].gap)
		for _, e := range examples[i] {
			t.Logf("    e.g. %s", e)
		}
	}
	t.Logf("total %s (churn %s, then the crawl's end)", time.Since(start).Round(time.Second), churnEnd.Sub(start).Round(time.Second))
	logShares(t, running)
	for _, p := range all {
		t.Logf("%s membership: %d joined, %d left, %d rebalances done", p.name, len(p.logRecords("member joined")),
			len(p.logRecords("member left")), len(p.logRecords("rebalance done")))
	}
}
