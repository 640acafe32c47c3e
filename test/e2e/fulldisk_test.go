package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// TestFullDisk crawls a web whose WARC files need more room than the data
// directory's file system has (a small tmpfs): the node pauses before the
// disk is full (storage.min_free), the file system is grown as an operator
// would, and the node resumes by itself and finishes. No page is lost:
// every page the web answered 200 has a 200 response record in the WARC
// files, and every page the frontier holds as fetched has its record and
// its crawl-log line. Needs root (mount); CI runs as root.
func TestFullDisk(t *testing.T) {
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.MaxSitePages = 40, 1200, 100
	wc.MinBody, wc.MaxBody = 16<<10, 32<<10
	wc.GzipHosts, wc.SlowHosts, wc.CrawlDelayHosts, wc.TrapHosts = 0, 0, 0, 0
	srv := startWeb(t, wc)
	dir := t.TempDir()
	remount := harness.MountTmpfs(t, dir, "8m") // skips when not root
	cfg := srv.NodeConfig("disk", dir, 2*time.Millisecond)
	cfg.Storage.MinFree = "256KiB" // small: the disk fills between two reads of the free space, and writes fail
	cfg.WARC.MaxSize = 2 << 20     // several files: rotation under a full disk too
	exp := srv.Web.Expected(srv.Scope(cfg.UserAgent))

	n, stop := runNode(t, cfg)
	api := "http://" + n.Addr().String()
	wait.For(t, time.Minute, "the node paused for its disk", func() (bool, string) {
		st := fetchStatus(t, n)
		if st.Paused && st.PausedReason == "disk" {
			t.Logf("paused after %d pages: %+v", st.PagesFetched, st.Frontier)
			return true, ""
		}
		if n.Done() {
			t.Fatalf("the crawl finished on the small disk (%d pages): make the web bigger", st.PagesFetched)
		}
		return false, fmt.Sprintf("%+v", st)
	})
	metrics := fetchText(t, api+"/metrics")
	for _, want := range []string{"phasecrawl_storage_paused 1", "phasecrawl_storage_free_bytes "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q while paused", want)
		}
	}
	// Paused, it sends no request once those in flight are done: the web
	// falls quiet, and stays so for a second more, which nothing but the
	// clock can show.
	last := srv.Web.Report().Requests
	wait.Steady(t, 30*time.Second, 500*time.Millisecond, "the requests in flight at the pause answered, no new one", func() (bool, string) {
		now := srv.Web.Report().Requests
		quiet := now == last
		last = now
		return quiet, fmt.Sprintf("%d requests to the web", now)
	})
	before := srv.Web.Report().Requests
	time.Sleep(time.Second) // no request during a second: only the clock shows it
	if after := srv.Web.Report().Requests; after != before {
		t.Errorf("the paused node went on: %d requests to the web, then %d", before, after)
	}
	// An operator's resume does not end a disk pause.
	n.Resume()
	if st := fetchStatus(t, n); !st.Paused || st.PausedReason != "disk" {
		t.Errorf("after an operator resume: paused %v (%q), want a disk pause", st.Paused, st.PausedReason)
	}

	remount("256m")
	waitDone(t, n, 2*time.Minute)
	st := fetchStatus(t, n)
	metrics = fetchText(t, api+"/metrics")
	stop()
	if st.Paused {
		t.Errorf("still paused after the file system grew: %q", st.PausedReason)
	}
	storageErrs := metricLines(metrics, "phasecrawl_storage_errors_total")

	// Every page the web answered 200 has a 200 response record.
	served := map[string]bool{}
	for host, visits := range srv.Web.Visits() {
		for _, v := range visits {
			if v.Status == 200 && v.URI != "/robots.txt" {
				served["http://"+host+v.URI] = true
			}
		}
	}
	archived, err := harness.WARCResponses(filepath.Join(cfg.Data, "warc"))
	if err != nil || len(archived) == 0 {
		t.Fatalf("WARC files: %d pages, %v", len(archived), err)
	}
	lost := 0
	for u := range served {
		if archived[u] == 0 {
			if lost++; lost <= 10 {
				t.Errorf("served 200 but not in the WARC files: %s", u)
			}
		}
	}
	// The frontier, the crawl log and the WARC agree: every page the
	// frontier holds as fetched with a 200 has its record and its line.
	logged := map[string]int{}
	if _, err := archive.ReadCrawlLog(filepath.Join(cfg.Data, "crawl.log"), func(e archive.LogEntry) error {
		if e.Status == 200 {
			logged[e.URL]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ro, err := frontier.OpenReadOnly(filepath.Join(cfg.Data, "frontier.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	completed, unrecorded := 0, 0
	if err := ro.Records(nil, func(r frontier.Record) error {
		if r.State != frontier.Completed {
			t.Errorf("frontier: %s is %v after the crawl", r.URL, r.State)
			return nil
		}
		completed++
		if r.Status == 200 && (archived[r.URL] == 0 || logged[r.URL] == 0) {
			if unrecorded++; unrecorded <= 10 {
				t.Errorf("frontier holds %s fetched (200) but the WARC has %d responses and the crawl log %d lines of it", r.URL, archived[r.URL], logged[r.URL])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	twice := 0
	for _, c := range archived {
		if c > 1 {
			twice++
		}
	}
	if len(served) < exp.Status[200] {
		t.Errorf("the web served %d pages 200, want at least the %d expected", len(served), exp.Status[200])
	}
	t.Logf("pages served 200: %d; with no WARC record: %d (lost); frontier completed %d, unrecorded %d; archived twice: %d; %s",
		len(served), lost, completed, unrecorded, twice, storageErrs)
}

// metricLines returns the lines of a /metrics text that start with name.
func metricLines(text, name string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(out)
}
