package cluster_test

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/harness"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// TestProcRecrawlJoinLeave: three node processes crawl a small web whose
// pages half change every 3 s, with a revisit every 3 s (--revisit); once
// every page was fetched, a fourth node joins, and later one of the first
// three leaves gracefully (SIGTERM). Nothing is lost: at the end every page
// was fetched within a bound of its due time (interval, plus a turn of
// every phase, plus slack), and after its first fetch no page ever waited
// longer than twice that bound, across the join and the leave (the new
// owner knows when each URL it takes over is due, and the replicas the
// leaver held do not stay blocked). Never two requests at once to a host,
// no politeness gap under the delay, nothing fetched that a crawl must not
// fetch, and no page fetched again before half its interval (a join and a
// graceful leave fetch nothing twice).
func TestProcRecrawlJoinLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process recurring crawl in -short mode")
	}
	const (
		interval = 3 * time.Second
		slack    = 4 * time.Second // the revisit lane's tick, a trip's wait for a worker, a loaded machine
	)
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seeds, wc.TrapHosts = 10, 150, 3, 0
	wc.SlowHosts, wc.CrawlDelayHosts = 0, 0
	wc.ChangeEvery, wc.ChangingPages, wc.Validators = 3*time.Second, 0.5, true
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	webAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(harness.FreePort(t, "127.0.0.1")))
	exp := harness.StartWeb(t, exec.Command(phasecrawlBin(t), harness.WebArgs(webAddr, wc)...), webAddr, web)

	c := newProcCluster(t, web, webAddr)
	c.extra = []string{"--revisit", interval.String()}
	start := time.Now()
	running := startCluster(t, c, 3)
	all := slices.Clone(running)
	if err := running[0].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}
	// A host's URLs are fetched in their owner's turn on the host's phase:
	// a due URL waits for a turn of every phase, twice at most (a trip
	// cut at the turn's end).
	bound := interval + 2*4*c.phase + slack
	wait.For(t, 60*time.Second, "every page fetched once", func() bool {
		rep, err := harness.WebReport(webAddr)
		if err != nil {
			return false
		}
		for u := range exp.Pages {
			if rep.URLs[u] == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("%5.1fs first round done (%d pages)", time.Since(start).Seconds(), len(exp.Pages))
	// The cluster revisits for an interval, real time, before and after each
	// change of members: the revisits over those spans are what is checked.
	time.Sleep(interval)

	joiner := c.add(3)
	joinAt := time.Now()
	joiner.start(running[0].gossip)
	joiner.waitUp()
	running, all = append(running, joiner), append(all, joiner)
	wait.For(t, 60*time.Second, "node3 joined", func() bool { return c.formed(running) })
	t.Logf("%5.1fs node3 joined (%s)", time.Since(start).Seconds(), time.Since(joinAt).Round(time.Millisecond))
	time.Sleep(2 * interval)

	leaver := running[1]
	leaveAt := time.Now()
	if err := leaver.stop(syscall.SIGTERM, time.Minute); err != nil {
		t.Fatalf("%s graceful leave: %v\n%s", leaver.name, err, leaver.tail(20))
	}
	running = slices.DeleteFunc(slices.Clone(running), func(p *proc) bool { return p == leaver })
	wait.For(t, 60*time.Second, leaver.name+" left", func() bool { return c.formed(running) })
	t.Logf("%5.1fs %s left (%s)", time.Since(start).Seconds(), leaver.name, time.Since(leaveAt).Round(time.Millisecond))
	time.Sleep(bound + interval)
	end := time.Now()

	rep, err := harness.WebReport(webAddr)
	if err != nil {
		t.Fatal(err)
	}
	visits, err := harness.WebVisits(webAddr)
	if err != nil {
		t.Fatal(err)
	}
	// Every request the web answered, per page, in arrival order.
	fetches := map[string][]time.Time{}
	for host, vs := range visits {
		for _, v := range vs {
			if u := "http://" + host + v.URI; v.URI != "/robots.txt" && v.Status > 0 && exp.Pages[u] {
				fetches[u] = append(fetches[u], v.Start)
			}
		}
	}
	var stale, waited, early []string
	var maxWait time.Duration
	revisits := 0
	for u := range exp.Pages {
		fs := fetches[u]
		slices.SortFunc(fs, func(a, b time.Time) int { return a.Compare(b) })
		if len(fs) == 0 {
			stale = append(stale, u+": never fetched")
			continue
		}
		revisits += len(fs) - 1
		if idle := end.Sub(fs[len(fs)-1]); idle > bound {
			stale = append(stale, fmt.Sprintf("%s: last fetched %s before the end (%d fetches)", u, idle.Round(time.Millisecond), len(fs)))
		}
		for i := 1; i < len(fs); i++ {
			gap := fs[i].Sub(fs[i-1])
			maxWait = max(maxWait, gap)
			if gap > bound {
				waited = append(waited, fmt.Sprintf("%s: %s between fetches at %s and %s", u, gap.Round(time.Millisecond),
					fs[i-1].Format("15:04:05.000"), fs[i].Format("15:04:05.000")))
			}
			if gap < interval/2 {
				early = append(early, fmt.Sprintf("%s: fetched again %s after its fetch at %s — %s", u, gap.Round(time.Millisecond),
					fs[i-1].Format("15:04:05.000"), strings.Join(crawlLogLines(dirsOf(all), u), "; ")))
			}
		}
	}
	if len(stale) > 0 {
		// Where the stale pages' records are: stop the nodes and read
		// their frontiers.
		for _, p := range running {
			_ = p.stop(syscall.SIGKILL, 10*time.Second)
		}
		var lost []string
		for u := range exp.Pages {
			if fs := fetches[u]; len(fs) == 0 || end.Sub(fs[len(fs)-1]) > bound {
				lost = append(lost, u)
			}
		}
		slices.Sort(lost)
		t.Logf("records of the pages not revisited:\n%s", strings.Join(frontierRecords(t, all, lost[:min(len(lost), 12)]), "\n"))
	}
	report := func(what string, lines []string) {
		t.Helper()
		if len(lines) == 0 {
			return
		}
		slices.Sort(lines)
		if len(lines) > 20 {
			lines = append(lines[:20], fmt.Sprintf("... %d more", len(lines)-20))
		}
		t.Errorf("%s:\n%s", what, strings.Join(lines, "\n"))
	}
	report(fmt.Sprintf("pages not revisited within %s of the end (join at %s, leave at %s)", bound,
		joinAt.Format("15:04:05.000"), leaveAt.Format("15:04:05.000")), stale)
	report(fmt.Sprintf("pages that waited over %s for a revisit", bound), waited)
	report(fmt.Sprintf("pages fetched again before half their interval (%s)", interval/2), early)

	// Never two requests at once to a host, polite gaps, nothing fetched
	// that must not be; robots.txt at most once per node process.
	vs := harness.Violations(rep, exp, c.delay, len(all))
	for _, in := range synthweb.Incidents(visits, harness.HostGap(exp, c.delay)) {
		if in.Kind != "duplicate" {
			vs = append(vs, in.String())
		}
	}
	report("violations", vs)
	if revisits < 2*len(exp.Pages) {
		t.Errorf("%d revisits of %d pages in %s: want at least two rounds", revisits, len(exp.Pages), end.Sub(start).Round(time.Second))
	}
	t.Logf("%d pages, %d revisits in %s; longest wait between two fetches of a page %s (bound %s)",
		len(exp.Pages), revisits, end.Sub(start).Round(time.Second), maxWait.Round(time.Millisecond), bound)
}

// frontierRecords describes the records of urls in the frontiers of the
// stopped nodes ps: node, state, reason, due time.
func frontierRecords(t *testing.T, ps []*proc, urls []string) []string {
	t.Helper()
	byURL := map[string][]string{}
	for _, p := range ps {
		f, err := frontier.Open(frontier.DefaultOptions(filepath.Join(p.data, "frontier.db")))
		if err != nil {
			t.Logf("%s: open frontier: %v", p.name, err)
			continue
		}
		for _, u := range urls {
			n, err := urlscope.Normalize(u)
			if err != nil {
				continue
			}
			rec, ok, err := f.Get(frontier.RefOf(n))
			if err != nil || !ok {
				continue
			}
			byURL[u] = append(byURL[u], fmt.Sprintf("%s: %s reason %q due %s interval %s", p.name, rec.State, rec.Reason,
				rec.Due.Format("15:04:05.000"), rec.Page.Interval))
		}
		f.Close()
	}
	var out []string
	for _, u := range urls {
		out = append(out, u+": "+strings.Join(byURL[u], "; "))
	}
	return out
}
