package crash

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

const (
	crashWorkers = 16
	// perWorker bounds what one kill can make a worker fetch twice: its
	// request in flight plus the pages it fetched whose write (each page is
	// recorded as soon as it is fetched, asynchronously) was not committed
	// yet — a few at most, even when fsync is slow under load.
	perWorker  = 4
	crashDelay = 5 * time.Millisecond
	userAgent  = "phasecrawl/0.1 (+https://github.com/phasecrawl/phasecrawl)"
)

func envInt(t *testing.T, name string, def int64) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}

// crawlArgs is the command line of every run: the same data directory each time.
func crawlArgs(srv *webnode.Server, data, addr string) []string {
	args := []string{"run", "--name", "crash", "--data", data, "--http", addr,
		"--resolve", srv.Web.ResolvePattern() + "=" + srv.Addr, "--allow-private", "--delay", crashDelay.String(),
		"--workers", strconv.Itoa(crashWorkers), "--allow-domain", srv.Web.Config().Domain,
		"--max-pages-per-host", strconv.Itoa(webnode.MaxPagesPerHost), "--log-format", "json",
		// The trap limits' pattern depths live in memory: a killed node
		// learns them again, so the calendar is cut by the per-host cap alone.
		"--max-pattern-depth", "0"}
	for _, s := range srv.Web.Seeds() {
		args = append(args, "--seed", s)
	}
	return args
}

var crashEnv = []string{"PHASECRAWL_BUCKET_MAX_QUEUE_WAIT=100ms", "PHASECRAWL_FETCH_RETRY_BACKOFF=1s",
	"PHASECRAWL_SHUTDOWN_TIMEOUT=10s", "PHASECRAWL_BUCKET_LIST_CAP=20"}

// ledger accounts for every fetch the synthetic web served: a fetch whose URL is not
// COMPLETED in the frontier right after a kill was lost with the process and will be made
// again. Those are the only duplicates allowed.
type ledger struct {
	prev   map[string]int // URL -> fetches served at the last kill
	wasted map[string]int // URL -> fetches a kill made useless
	fps    map[string]frontier.Ref
}

func newLedger() *ledger {
	return &ledger{prev: map[string]int{}, wasted: map[string]int{}, fps: map[string]frontier.Ref{}}
}

func (l *ledger) fp(t *testing.T, u string) frontier.Ref {
	if fp, ok := l.fps[u]; ok {
		return fp
	}
	n, err := urlscope.Normalize(u)
	if err != nil {
		t.Fatalf("synthetic URL %s does not normalize: %v", u, err)
	}
	l.fps[u] = frontier.RefOf(n)
	return l.fps[u]
}

// afterKill opens the frontier the dead process left and returns how many fetches of the
// killed run were lost (not COMPLETED).
func (l *ledger) afterKill(t *testing.T, rep synthweb.Report, dbPath string) int {
	t.Helper()
	f, err := frontier.Open(frontier.DefaultOptions(dbPath))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		t.Fatalf("open the frontier after a kill: %v", err)
	}
	defer f.Close()
	lost := 0
	for u, c := range rep.URLs {
		if c <= l.prev[u] {
			continue
		}
		rec, found, err := f.Get(l.fp(t, u))
		if err != nil {
			t.Fatalf("frontier get %s: %v", u, err)
		}
		if !found || rec.State != frontier.Completed {
			l.wasted[u] += c - l.prev[u]
			lost += c - l.prev[u]
		}
		l.prev[u] = c
	}
	return lost
}

// checkWARCs reads every closed WARC file (they must be whole) and returns the .open ones.
func checkWARCs(t *testing.T, dir string) (open []string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if strings.HasSuffix(f, archive.OpenSuffix) {
			open = append(open, f)
			continue
		}
		if !strings.HasSuffix(f, ".warc.gz") {
			continue // an index: checked with its WARC file (a kill may leave one half-written as .tmp)
		}
		if _, err := archive.ValidateWARC(f); err != nil {
			t.Fatalf("closed WARC file does not pass validation: %v", err)
		}
		if _, err := archive.CheckCDXJ(f); err != nil {
			t.Fatalf("closed WARC file's index: %v", err)
		}
	}
	return open
}

// tear appends the first half of a gzip member to path, as a crash in the middle of a write
// would leave it, and checks that a reader now sees a torn record.
func tear(t *testing.T, path string) int64 {
	t.Helper()
	var member bytes.Buffer
	zw := gzip.NewWriter(&member)
	fmt.Fprintf(zw, "WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 100000\r\n\r\n%s", strings.Repeat("torn ", 2000))
	_ = zw.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := member.Bytes()[:member.Len()/2]
	if _, err := f.Write(half); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	err = archive.ReadWARC(path, func(map[string]string, []byte) error { return nil })
	if !errors.Is(err, archive.ErrTornRecord) {
		t.Fatalf("a torn last record is not detected: ReadWARC = %v", err)
	}
	return int64(len(half))
}

// TestCrashRecovery kills the node with SIGKILL at random moments of a crawl and restarts it
// on the same data directory each time: the crawl completes, no URL is lost, a fetch is only
// repeated when a kill lost it, WARC files stay readable (a torn last record is cut, never
// kept) and the bbolt file is intact. PHASECRAWL_CRASH_KILLS sets the number of kills
// (default 20), PHASECRAWL_CRASH_SEED the random seed (default: the clock; it is logged).
func TestCrashRecovery(t *testing.T) {
	kills := int(envInt(t, "PHASECRAWL_CRASH_KILLS", 20))
	seed := envInt(t, "PHASECRAWL_CRASH_SEED", time.Now().UnixNano())
	t.Logf("kills %d, seed %d (PHASECRAWL_CRASH_SEED=%d repeats the kill times)", kills, seed, seed)
	rng := rand.New(rand.NewSource(seed))
	bin := binary(t)

	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages = 80, 3000
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sc := srv.Scope(userAgent)
	sc.PatternDepth = 0 // crawlArgs: --max-pattern-depth 0
	exp := web.Expected(sc)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	warcDir := filepath.Join(data, "warc")
	dbPath := filepath.Join(data, "frontier.db")

	led := newLedger()
	torn := map[string]int64{} // .open file torn by the test -> its size before
	var recoveryLogs strings.Builder
	start := time.Now()
	maxLost, tears := 0, 0
	for k := 0; k < kills; k++ {
		c := startChild(t, bin, srv, data)
		// Kill at a random moment: sometimes during start-up and recovery,
		// mostly mid-crawl. The random time is the point: no state to wait for.
		after := time.Duration(rng.Intn(900)+30) * time.Millisecond
		time.Sleep(after)
		c.kill()
		keepRecoveryLines(&recoveryLogs, c.logs.String())
		lost := led.afterKill(t, quiet(t, web), dbPath)
		maxLost = max(maxLost, lost)
		if lost > crashWorkers*perWorker {
			t.Errorf("kill %d lost %d fetches, more than %d per worker (%d): requests in flight plus pages not yet recorded", k+1, lost, perWorker, crashWorkers*perWorker)
		}
		open := checkWARCs(t, warcDir)
		for p := range torn { // recovered by a later start: renamed, cut back, readable
			if _, err := os.Stat(p); err == nil {
				continue
			}
			final := strings.TrimSuffix(p, archive.OpenSuffix)
			if fi, err := os.Stat(final); err != nil || fi.Size() > torn[p] {
				t.Fatalf("torn %s: recovered file %v, size %v; want at most %d bytes", p, err, fi, torn[p])
			}
			delete(torn, p)
		}
		if k%4 == 1 && len(open) > 0 && len(torn) == 0 {
			fi, err := os.Stat(open[0])
			if err != nil {
				t.Fatal(err)
			}
			tear(t, open[0])
			torn[open[0]] = fi.Size()
			tears++
		}
		t.Logf("kill %2d after %4s: %5d requests served so far, %3d fetches lost, %d WARC files open, %d torn by the test", k+1, after.Round(time.Millisecond), web.Report().Requests, lost, len(open), tears)
	}

	// A last run crawls to the end and stops gracefully.
	c := startChild(t, bin, srv, data)
	c.waitReady(t, 30*time.Second)
	wait.Steady(t, 4*time.Minute, 200*time.Millisecond, "crawl done after the kills", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		code, body, err := c.get(ctx, "/v1/status")
		cancel()
		var st node.Status
		if err == nil && code == 200 && json.Unmarshal(body, &st) == nil && st.Done {
			return true, ""
		}
		return false, fmt.Sprintf("status %d %v: %+v\n%s", code, err, st.Frontier, tail(c.logs.String()))
	})
	c.stop(t, 30*time.Second)
	keepRecoveryLines(&recoveryLogs, c.logs.String())
	t.Logf("crawl completed %s after the first start, across %d kills (at most %d fetches lost by one kill)", time.Since(start).Round(time.Millisecond), kills, maxLost)

	checkOracle(t, web.Report(), exp, led)
	checkTornRecovered(t, torn, tears, recoveryLogs.String())
	if tears == 0 && kills >= 8 {
		t.Errorf("no WARC file was open at a kill to tear: the torn-record path went untested")
	}
	if open := checkWARCs(t, warcDir); len(open) > 0 {
		t.Errorf("WARC files left open after a graceful stop: %v", open)
	}
	checkWARCCoverage(t, warcDir, exp)
	checkBolt(t, dbPath, exp)
	logged := map[string]bool{}
	skipped, err := archive.ReadCrawlLog(filepath.Join(data, "crawl.log"), func(e archive.LogEntry) error {
		logged[e.URL] = true
		return nil
	})
	if err != nil {
		t.Errorf("crawl log: %v", err)
	}
	unlogged := 0
	for u := range exp.Pages {
		if !logged[u] {
			unlogged++
		}
	}
	t.Logf("crawl log: %d torn lines skipped; %d of %d pages have no line", skipped, unlogged, len(exp.Pages))
	if unlogged > 0 {
		t.Errorf("%d fetched pages have no crawl-log line: lines were lost with a killed process", unlogged)
	}
}

func startChild(t *testing.T, bin string, srv *webnode.Server, data string) *child {
	addr := freeAddr(t)
	return start(t, bin, addr, crashEnv, crawlArgs(srv, data, addr)...)
}

// quiet waits until the web has served nothing new for a while (requests the killed process
// sent before it died may still be on their way to a handler) and returns its report.
func quiet(t *testing.T, web *synthweb.Web) synthweb.Report {
	t.Helper()
	last := web.Report()
	wait.Steady(t, 10*time.Second, 200*time.Millisecond, "the synthetic web quiet after the kill", func() (bool, string) {
		rep := web.Report()
		quiet := rep.Requests == last.Requests
		last = rep
		return quiet, fmt.Sprintf("%d requests served", rep.Requests)
	})
	return last
}

var recoveryLine = regexp.MustCompile(`(recovered WARC file|cutting the torn end of a WARC file)[^\n]*`)

func keepRecoveryLines(b *strings.Builder, logs string) {
	for _, l := range recoveryLine.FindAllString(logs, -1) {
		b.WriteString(l + "\n")
	}
}

// checkOracle compares what the web served with its oracle: every page fetched, nothing
// forbidden or unknown fetched, the trap cut exactly, and every repeated fetch explained by
// a kill.
func checkOracle(t *testing.T, rep synthweb.Report, exp synthweb.Expectation, led *ledger) {
	t.Helper()
	var v []string
	for u := range exp.Pages {
		if rep.URLs[u] == 0 {
			v = append(v, "lost (never fetched): "+u)
		}
	}
	trapURLs := map[string]int{}
	dups, explained := 0, 0
	for u, c := range rep.URLs {
		host := strings.SplitN(strings.TrimPrefix(u, "http://"), "/", 2)[0]
		_, trap := exp.TrapHosts[host]
		switch {
		case exp.Pages[u] || trap:
			if trap {
				trapURLs[host]++
			}
			dups += c - 1
			if c-1 > led.wasted[u] {
				v = append(v, fmt.Sprintf("duplicate not explained by a kill: %s fetched %d times, %d lost by kills", u, c, led.wasted[u]))
			} else {
				explained += c - 1
			}
		case exp.Disallowed[u]:
			v = append(v, "robots-disallowed URL fetched: "+u)
		default:
			v = append(v, "unexpected fetch: "+u)
		}
	}
	for h, n := range exp.TrapHosts {
		if trapURLs[h] != n {
			v = append(v, fmt.Sprintf("trap host %s: %d distinct URLs fetched, want %d", h, trapURLs[h], n))
		}
	}
	for u, c := range rep.Unknown {
		v = append(v, fmt.Sprintf("request to an unknown host or path: %s (%d times)", u, c))
	}
	for h := range exp.Contacted {
		if rep.Hosts[h].RobotsFetches < 1 {
			v = append(v, "robots.txt never fetched: "+h)
		}
	}
	sort.Strings(v)
	if len(v) > 0 {
		t.Errorf("%d violations:\n%s", len(v), strings.Join(v[:min(len(v), 30)], "\n"))
	}
	t.Logf("%d pages expected, %d duplicate fetches, all lost by kills: %v", len(exp.Pages), dups, explained == dups)
}

// checkTornRecovered: every WARC file the test tore was cut back on a restart and logged.
func checkTornRecovered(t *testing.T, torn map[string]int64, tears int, logs string) {
	t.Helper()
	for p, size := range torn {
		final := strings.TrimSuffix(p, archive.OpenSuffix)
		fi, err := os.Stat(final)
		if _, operr := os.Stat(p); operr == nil || err != nil || fi.Size() > size {
			t.Errorf("torn %s was not recovered (open file still there: %v; final: %v)", p, operr == nil, err)
		}
	}
	// A cut is logged before it is made (and again once the file is
	// renamed, unless a kill came in between): count the files.
	re := regexp.MustCompile(`file=(\S+) .*bytes_cut=(\d+)`)
	cutFiles := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(logs, -1) {
		if n, _ := strconv.Atoi(m[2]); n > 0 {
			cutFiles[m[1]] = true
		}
	}
	cuts := len(cutFiles)
	t.Logf("%d WARC files recovered after kills, %d of them cut back", strings.Count(logs, "recovered WARC file left open by a crash file="), cuts)
	if cuts < tears {
		t.Errorf("%d files torn, %d recoveries logged a cut: a torn record was kept silently", tears, cuts)
	}
}

// checkWARCCoverage: every expected page has a response record, or a revisit record when its
// payload was archived before under another URL (warc.dedup): written before its result is
// committed, so no kill can lose it.
func checkWARCCoverage(t *testing.T, dir string, exp synthweb.Expectation) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	got := map[string]bool{}
	for _, f := range files {
		if err := archive.ReadWARC(f, func(h map[string]string, _ []byte) error {
			if typ := h["WARC-Type"]; typ == "response" || typ == "revisit" {
				got[h["WARC-Target-URI"]] = true
			}
			return nil
		}); err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
	}
	missing := 0
	for u := range exp.Pages {
		if !got[u] {
			missing++
			if missing <= 10 {
				t.Errorf("no WARC response for %s", u)
			}
		}
	}
	t.Logf("%d WARC files; %d of %d pages without a response record", len(files), missing, len(exp.Pages))
}

// checkBolt opens the bbolt file the way any tool would, runs its consistency check, and
// counts the frontier: everything COMPLETED, one record per expected URL.
func checkBolt(t *testing.T, path string, exp synthweb.Expectation) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("bbolt open: %v", err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		var errs []error
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		return errors.Join(errs...)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("bbolt consistency check: %v", err)
	}
	f, err := frontier.Open(frontier.DefaultOptions(path))
	if err != nil {
		t.Fatalf("frontier open: %v", err)
	}
	defer f.Close()
	c := f.Counts()
	want := int64(len(exp.Pages) + len(exp.Disallowed))
	for _, n := range exp.TrapHosts {
		want += int64(n)
	}
	if c.InList != 0 || c.InProgress != 0 || c.Stalled != 0 || c.Completed != want {
		t.Errorf("frontier counts %+v, want %d COMPLETED and nothing else", c, want)
	}
}
