package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// TestProcExitWhenDone: three members run with --exit-when-done and
// crawl a small web; every one exits with status 0 once the whole
// cluster's crawl is done, none before the last page: the web serves no
// request after the first member exited, and serves every reachable page
// exactly once.
func TestProcExitWhenDone(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.TrapHosts = 40, 1500, 0
	web, webAddr, exp := startWeb(t, wc)
	c := newProcCluster(t, web, webAddr)
	c.delay = 20 * time.Millisecond
	c.extra = []string{"--exit-when-done"}
	c.env = []string{"PHASECRAWL_DONE_GRACE=2s"}
	ps := startCluster(t, c, 3)
	// The members wait for their seeds (a cluster that fetched nothing is
	// not done): none exits before them. That none exits within 3 s only the
	// clock can show.
	time.Sleep(3 * time.Second)
	for _, p := range ps {
		if !p.running() {
			t.Fatalf("%s exited before any seed: %v\n%s", p.name, p.exitErr, p.tail(10))
		}
	}
	if err := ps[1].postSeeds(web.Seeds()); err != nil {
		t.Fatal(err)
	}
	var atFirstExit int64 = -1
	wait.For(t, 3*time.Minute, "every member exited", func() (bool, string) {
		exited := 0
		for _, p := range ps {
			if !p.running() {
				exited++
			}
		}
		if exited > 0 && atFirstExit < 0 {
			rep, err := harness.WebReport(webAddr)
			if err != nil {
				t.Fatal(err)
			}
			atFirstExit = rep.Requests
		}
		return exited == len(ps), fmt.Sprintf("%d of %d members exited", exited, len(ps))
	})
	for _, p := range ps {
		if p.exitErr != nil {
			t.Errorf("%s: exit %v, want status 0\n%s", p.name, p.exitErr, p.tail(10))
		}
		if len(p.logRecords("crawl done: exiting (exit_when_done)")) != 1 {
			t.Errorf("%s did not log that the crawl was done", p.name)
		}
	}
	rep := checkCrawl(t, webAddr, exp, c.delay, 1, 0, ps)
	if rep.Requests != atFirstExit {
		t.Errorf("the web served %d requests after the first member exited (%d at its exit, %d in all)", rep.Requests-atFirstExit, atFirstExit, rep.Requests)
	}
	if len(rep.URLs) != exp.Fetches {
		t.Errorf("%d pages fetched, want %d", len(rep.URLs), exp.Fetches)
	}
}
