package crash

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestCrashDuringRecrawl kills the binary (SIGKILL) at random moments of a
// recurring crawl (revisit every 2 s, pages half changing every 3 s) and
// restarts it on the same data each time: no URL drops out of the revisit
// schedule. After a last run of several intervals every page was fetched
// again near its end, every record waits for its next revisit (its due
// time in the index, or released to the queue), and the WARC files read
// back whole.
func TestCrashDuringRecrawl(t *testing.T) {
	const (
		interval = 2 * time.Second
		slack    = 3 * time.Second // the lane's tick, the scheduler, the hosts' delay, -race
		kills    = 6
	)
	seed := envInt(t, "PHASECRAWL_CRASH_SEED", time.Now().UnixNano())
	t.Logf("seed %d (PHASECRAWL_CRASH_SEED=%d repeats the kill times)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	bin := binary(t)

	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seeds, wc.TrapHosts = 6, 60, 2, 0
	wc.SlowHosts, wc.CrawlDelayHosts, wc.UnlinkedHosts = 0, 0, 0
	wc.ChangeEvery, wc.ChangingPages, wc.Validators = 3*time.Second, 0.5, true
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	exp := web.Expected(srv.Scope(userAgent))
	data := filepath.Join(t.TempDir(), "data")
	dbPath := filepath.Join(data, "frontier.db")
	run := func() *child {
		addr := freeAddr(t)
		return start(t, bin, addr, crashEnv, append(crawlArgs(srv, data, addr), "--revisit", interval.String())...)
	}
	for k := range kills {
		c := run()
		// The first run gets through a round; later ones die at a random
		// moment (the randomness is the point: no state to wait for),
		// anywhere in the start-up, a revisit round or the pause between two.
		start := time.Now()
		if k == 0 {
			wait.For(t, time.Minute, "the first round: every page fetched", func() (bool, string) {
				rep := web.Report()
				for u := range exp.Pages {
					if rep.URLs[u] == 0 {
						return false, fmt.Sprintf("%s not fetched; %d URLs of %d", u, len(rep.URLs), len(exp.Pages))
					}
				}
				return true, ""
			})
		} else {
			time.Sleep(time.Duration(rng.Intn(2500)+200) * time.Millisecond)
		}
		c.kill()
		quiet(t, web)
		checkWARCs(t, filepath.Join(data, "warc"))
		t.Logf("kill %d after %s: %d requests served so far", k+1, time.Since(start).Round(time.Millisecond), web.Report().Requests)
	}
	c := run()
	c.waitReady(t, 30*time.Second)
	// The last run goes on for four intervals, real time: every page is
	// revisited over that span, which is what is checked.
	final := 4*interval + slack
	time.Sleep(final)
	c.stop(t, 30*time.Second)
	end := time.Now()

	last := map[string]time.Time{}
	for host, vs := range web.Visits() {
		for _, v := range vs {
			if u := "http://" + host + v.URI; v.URI != "/robots.txt" && v.End.After(last[u]) {
				last[u] = v.End
			}
		}
	}
	for u := range exp.Pages {
		if idle := end.Sub(last[u]); idle > interval+slack {
			t.Errorf("%s: last fetched %s before the end of a %s run (revisit every %s)", u, idle.Round(time.Millisecond), final, interval)
		}
	}
	if open := checkWARCs(t, filepath.Join(data, "warc")); len(open) > 0 {
		t.Errorf("WARC files left open after a graceful stop: %v", open)
	}

	f, err := frontier.Open(frontier.DefaultOptions(dbPath))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	led := newLedger()
	var completed, queued int
	for u := range exp.Pages {
		rec, ok, err := f.Get(led.fp(t, u))
		if err != nil || !ok {
			t.Fatalf("%s: no record (%v)", u, err)
		}
		switch {
		case rec.Due.IsZero():
			t.Errorf("%s: %s without a due time: dropped out of the revisit schedule", u, rec.State)
		case rec.State == frontier.Completed:
			completed++
		case rec.State == frontier.InList:
			queued++
		default:
			t.Errorf("%s: %s after a graceful stop", u, rec.State)
		}
	}
	// The counter covers every queued revisit, robots-disallowed URLs
	// included (they are checked again each round): count them all.
	var allQueued int64
	var from frontier.Cursor
	for {
		recs, next, end, err := f.ScanRecords(from, 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.State == frontier.InList && !r.Due.IsZero() {
				allQueued++
			}
		}
		if end {
			break
		}
		from = next
	}
	if got := f.Revisits(); got != allQueued {
		t.Errorf("the frontier counts %d queued revisits, its records %d", got, allQueued)
	}
	var revisits int
	for _, vs := range web.Visits() {
		for _, v := range vs {
			if v.Status == 304 {
				revisits++
			}
		}
	}
	if revisits == 0 {
		t.Error("no 304 served: the revisits were not conditional")
	}
	t.Logf("%d pages across %d kills: at the end %d wait for their due time, %d are queued; %d conditional GETs answered 304",
		len(exp.Pages), kills, completed, queued, revisits)
}
