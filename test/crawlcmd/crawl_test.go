// Package crawlcmd_test runs `phasecrawl crawl` as a user does, as a
// process (the binary of test/testbin), against a synthetic web on
// loopback: in a pseudo-terminal (tmux), piped, interrupted and resumed,
// and with bad usage.
package crawlcmd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/testbin"
)

// TestMain removes the binary built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// summary is the part of `phasecrawl crawl --json` the tests read.
type summary struct {
	Result       string           `json:"result"`
	Data         string           `json:"data"`
	PagesThisRun int64            `json:"pages_this_run"`
	Pages        int64            `json:"pages"`
	ByStatus     map[string]int64 `json:"pages_by_status"`
	Hosts        int              `json:"hosts"`
	Queued       int64            `json:"queued"`
	WARC         []string         `json:"warc"`
	CDXJ         []string         `json:"cdxj"`
	CrawlLog     string           `json:"crawl_log"`
	Log          string           `json:"log"`
}

// startWeb serves a small synthetic web (hosts hosts, pages pages, no
// trap) on loopback.
func startWeb(t *testing.T, hosts, pages int) *webnode.Server {
	t.Helper()
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seeds = hosts, pages, 2
	wc.TrapHosts, wc.SlowHosts, wc.CrawlDelayHosts, wc.UnlinkedHosts = 0, 0, 0, 0
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// crawlArgs are the arguments of a crawl of srv's web: its seeds, with the
// web's hosts dialled on loopback.
func crawlArgs(srv *webnode.Server, data string, delay time.Duration, more ...string) []string {
	args := []string{"crawl", "--allow-private", "--resolve", srv.Web.ResolvePattern() + "=" + srv.Addr,
		"--delay", delay.String(), "--max-pages-per-host", strconv.Itoa(srv.PerHostCap())}
	if data != "" {
		args = append(args, "--data", data)
	}
	args = append(args, more...)
	return append(args, srv.Web.Seeds()...)
}

// exitCode is cmd's exit status once it ran.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("run: %v", err)
	return -1
}

// controlChars returns the bytes of b below 0x20 other than newline.
func controlChars(b []byte) []byte {
	var out []byte
	for _, c := range b {
		if (c < 0x20 && c != '\n') || c == 0x7f {
			out = append(out, c)
		}
	}
	return out
}

// TestCrawlPiped: with standard error a pipe, the progress is plain lines
// (no control character), one each --progress-interval; the summary
// (--json) names the WARC files, the CDXJ index and the crawl log; the
// default scope is the seeds' hosts; every page is fetched once.
func TestCrawlPiped(t *testing.T) {
	srv := startWeb(t, 6, 150)
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(testbin.Path(t), crawlArgs(srv, data, 20*time.Millisecond, "--json", "--progress-interval", "200ms")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Each line as it arrives, with its time.
	var at []time.Time
	sc := bufio.NewScanner(io.TeeReader(pipe, &stderr))
	for sc.Scan() {
		at = append(at, time.Now())
	}
	code := exitCode(t, cmd.Wait())
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if cc := controlChars(stderr.Bytes()); len(cc) > 0 {
		t.Errorf("standard error has control characters %q:\n%s", cc, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if !strings.HasPrefix(lines[0], "crawling 2 URLs into "+data+", status page http://127.0.0.1:") {
		t.Errorf("first line %q", lines[0])
	}
	lines = lines[1:]
	for _, l := range lines {
		if !strings.HasPrefix(l, "pages ") {
			t.Errorf("standard error line %q is not a progress line", l)
		}
	}
	// One line at the start, one each 200ms, one at the end: the gaps
	// between the progress lines but the last are near 200ms.
	if len(lines) < 4 || len(at) != len(lines)+1 {
		t.Fatalf("%d progress lines (%d timed), want at least 4 (the crawl takes over a second)", len(lines), len(at))
	}
	var gaps []time.Duration
	for i := 2; i < len(at)-1; i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	slices.Sort(gaps)
	if med := gaps[len(gaps)/2]; med < 150*time.Millisecond || med > 400*time.Millisecond {
		t.Errorf("median gap between progress lines %s, want about 200ms (gaps %v)", med, gaps)
	}
	var sum summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("summary is not one JSON object: %v\n%s", err, stdout.String())
	}
	rep := srv.Web.Report()
	if sum.Result != "finished" || sum.Data != data || sum.Pages == 0 || sum.ByStatus["2xx"] == 0 {
		t.Errorf("summary %+v", sum)
	}
	if len(sum.WARC) == 0 || len(sum.CDXJ) == 0 || sum.CrawlLog != filepath.Join(data, "crawl.log") || sum.Log != filepath.Join(data, "phasecrawl.log") {
		t.Errorf("summary paths: WARC %v CDXJ %v crawl log %q log %q", sum.WARC, sum.CDXJ, sum.CrawlLog, sum.Log)
	}
	for _, f := range append(append([]string{sum.CrawlLog, sum.Log}, sum.WARC...), sum.CDXJ...) {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (empty or missing)", f, err)
		}
	}
	// The seeds' hosts only (the default scope), each page once.
	if sum.Hosts != 2 || len(rep.Hosts) != 2 {
		t.Errorf("hosts crawled: summary %d, web %d; want the 2 seeds' hosts", sum.Hosts, len(rep.Hosts))
	}
	if rep.Duplicates != 0 || int64(len(rep.URLs)) != sum.PagesThisRun {
		t.Errorf("the web served %d URLs (%d duplicates), the summary says %d pages", len(rep.URLs), rep.Duplicates, sum.PagesThisRun)
	}
}

// TestCrawlInterrupt: SIGINT in the middle of a crawl exits 130 after the
// summary; the same command again finishes, and the web served no page
// twice.
func TestCrawlInterrupt(t *testing.T) {
	srv := startWeb(t, 6, 150)
	data := filepath.Join(t.TempDir(), "data")
	args := crawlArgs(srv, data, 40*time.Millisecond, "--allow-domain", srv.Web.Config().Domain)
	cmd := exec.Command(testbin.Path(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fetching := true
	t.Cleanup(func() {
		if fetching { // the wait failed: the crawl still runs
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Logf("stderr: %s", stderr.String())
		}
	})
	wait.For(t, 30*time.Second, "20 pages fetched", func() (bool, string) {
		k := len(srv.Web.Report().URLs)
		return k >= 20, fmt.Sprintf("%d pages", k)
	})
	fetching = false
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd.Wait()); code != 130 {
		t.Fatalf("exit %d after SIGINT, want 130\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "crawl interrupted") || !strings.Contains(stdout.String(), "WARC") {
		t.Errorf("no summary after SIGINT:\n%s", stdout.String())
	}
	first := len(srv.Web.Report().URLs)

	cmd = exec.Command(testbin.Path(t), append(args, "--json")...)
	stdout.Reset()
	stderr.Reset()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitCode(t, cmd.Run()); code != 0 {
		t.Fatalf("the same command again: exit %d, want 0\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	var sum summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	rep := srv.Web.Report()
	if sum.Result != "finished" || sum.PagesThisRun == 0 || int(sum.PagesThisRun) != len(rep.URLs)-first {
		t.Errorf("second run: %+v; the web served %d URLs, %d of them before", sum, len(rep.URLs), first)
	}
	if rep.Duplicates != 0 {
		var twice []string
		for u, c := range rep.URLs {
			if c > 1 {
				twice = append(twice, u)
			}
		}
		t.Errorf("%d pages fetched twice across the two runs: %v", rep.Duplicates, twice)
	}
	if sum.Pages != int64(len(rep.URLs)) {
		t.Errorf("summary pages %d (the crawl log of both runs), the web served %d URLs", sum.Pages, len(rep.URLs))
	}
}

// TestCrawlUsage: bad usage exits 2 with one line on standard error and
// nothing on standard output.
func TestCrawlUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no URL", []string{"crawl"}, "no URL given"},
		{"bad flag value", []string{"crawl", "--delay", "soon", "http://a.test/"}, `invalid value "soon" for flag -delay`},
		{"out of range", []string{"crawl", "--workers", "0", "http://a.test/"}, "workers=0: must be in 1..4096"},
		{"unknown flag", []string{"crawl", "--no-such-flag", "http://a.test/"}, "flag provided but not defined: -no-such-flag"},
		{"not a URL", []string{"crawl", "a.test"}, `"a.test" is not an http:// or https:// URL`},
		{"recurring", []string{"crawl", "--revisit", "1h", "http://a.test/"}, "--revisit: a recurring crawl never ends"},
		{"cluster", []string{"crawl", "--gossip", "127.0.0.1:7946", "http://a.test/"}, "--gossip: a crawl runs one node"},
		{"missing list", []string{"crawl", "-f", filepath.Join(dir, "none.txt")}, "none.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(testbin.Path(t), tc.args...)
			cmd.Dir = dir
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if code := exitCode(t, cmd.Run()); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			out := stderr.String()
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || !strings.Contains(out, tc.want) {
				t.Errorf("stderr %q: want one line with %q", out, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("bad usage created %d entries in the working directory", len(ents))
	}
}

// TestCrawlStdin: URLs from standard input ("-") and from -f FILE; the
// data directory defaults to one named after the first host and the
// time, which the summary names.
func TestCrawlStdin(t *testing.T) {
	srv := startWeb(t, 4, 40)
	dir := t.TempDir()
	seeds := srv.Web.Seeds()
	list := filepath.Join(dir, "list.txt")
	if err := os.WriteFile(list, []byte("# a comment\n\n"+seeds[1]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"crawl", "--allow-private", "--resolve", srv.Web.ResolvePattern() + "=" + srv.Addr,
		"--delay", "5ms", "--quiet", "--json", "-f", list, "-"}
	cmd := exec.Command(testbin.Path(t), args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(seeds[0] + "\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitCode(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("--quiet wrote to standard error: %q", stderr.String())
	}
	var sum summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(seeds[0], "http://"), "/")
	if !strings.HasPrefix(sum.Data, host+"-") {
		t.Errorf("data directory %q, want %s-TIME", sum.Data, host)
	}
	if _, err := os.Stat(filepath.Join(dir, sum.Data, "crawl.log")); err != nil {
		t.Error(err)
	}
	if sum.Hosts != 2 {
		t.Errorf("hosts %d, want 2 (the one of standard input, the one of the list)", sum.Hosts)
	}
}

// TestCrawlTerminal runs phasecrawl crawl in a pseudo-terminal (a tmux
// pane): the progress line is redrawn in place (carriage return and
// clear-to-end-of-line, one line on the screen), the summary appears and
// names the WARC files, and the exit status is 0.
func TestCrawlTerminal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux is needed (apt-get install tmux; .ci/run installs it)")
	}
	srv := startWeb(t, 6, 150)
	dir := t.TempDir()
	sock := filepath.Join(dir, "tmux.sock")
	raw, rc, gate := filepath.Join(dir, "raw"), filepath.Join(dir, "rc"), filepath.Join(dir, "go")
	args := crawlArgs(srv, filepath.Join(dir, "data"), 20*time.Millisecond, "--allow-domain", srv.Web.Config().Domain)
	quoted := []string{shellQuote(testbin.Path(t))}
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	script := "while [ ! -e " + shellQuote(gate) + " ]; do sleep 0.05; done; " + strings.Join(quoted, " ") +
		"; echo $? > " + shellQuote(rc) + "; sleep 60"
	run := func(a ...string) string {
		t.Helper()
		cmd := exec.Command(tmux, append([]string{"-S", sock}, a...)...)
		cmd.Env = append(os.Environ(), "TERM=xterm-256color")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", a, err, out)
		}
		return string(out)
	}
	run("-f", "/dev/null", "new-session", "-d", "-s", "crawl", "-x", "200", "-y", "40", "sh", "-c", script)
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen:\n%s", run("capture-pane", "-p", "-J", "-t", "crawl"))
		}
	})
	run("pipe-pane", "-t", "crawl", "-o", "cat > "+shellQuote(raw))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var code []byte
	wait.For(t, 60*time.Second, "the crawl's exit status written", func() bool {
		code, err = os.ReadFile(rc)
		return err == nil && len(code) > 0
	})
	// The pipe's last bytes: the summary is through, and nothing more comes.
	size := int64(-1)
	wait.Steady(t, 10*time.Second, 200*time.Millisecond, "the summary through the pipe", func() (bool, string) {
		fi, err := os.Stat(raw)
		if err != nil {
			return false, err.Error()
		}
		grew := fi.Size() != size
		size = fi.Size()
		out, err := os.ReadFile(raw)
		return err == nil && !grew && strings.Contains(string(out), "crawl finished"), fmt.Sprintf("%d bytes", size)
	})
	screen := run("capture-pane", "-p", "-J", "-t", "crawl")
	t.Logf("screen:\n%s", strings.TrimRight(screen, "\n"))
	if strings.TrimSpace(string(code)) != "0" {
		t.Errorf("exit status %s, want 0", strings.TrimSpace(string(code)))
	}
	progressLines := 0
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(l, "pages ") {
			progressLines++
		}
	}
	if progressLines != 1 {
		t.Errorf("%d progress lines on the screen, want 1 (redrawn in place)", progressLines)
	}
	if !strings.Contains(screen, "crawl finished") || !strings.Contains(screen, "WARC") || !strings.Contains(screen, ".warc.gz") {
		t.Errorf("no summary naming the WARC files on the screen")
	}
	out, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if k := strings.Count(string(out), "\rpages "); k < 2 {
		t.Errorf("the progress line was drawn %d times with a carriage return, want at least 2:\n%q", k, out)
	}
	if !strings.Contains(string(out), "\x1b[K") {
		t.Errorf("the progress line is not cleared to the end of the line (ESC [K):\n%q", out)
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// TestRunExitWhenDone: phasecrawl run --exit-when-done, alone, exits with
// status 0 once its crawl is done (every page fetched once); with
// --revisit it refuses to start, saying why.
func TestRunExitWhenDone(t *testing.T) {
	srv := startWeb(t, 4, 60)
	dir := t.TempDir()
	args := []string{"run", "--data", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--allow-private",
		"--resolve", srv.Web.ResolvePattern() + "=" + srv.Addr, "--delay", "5ms", "--exit-when-done"}
	for _, s := range srv.Web.Seeds() {
		args = append(args, "--seed", s)
	}
	cmd := exec.Command(testbin.Path(t), args...)
	cmd.Env = append(os.Environ(), "PHASECRAWL_DONE_GRACE=1s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(t, err); code != 0 {
			t.Fatalf("exit %d, want 0\n%s", code, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("run --exit-when-done still running after 60s\n%s", stderr.String())
	}
	rep := srv.Web.Report()
	if len(rep.URLs) == 0 || rep.Duplicates != 0 {
		t.Errorf("the web served %d pages, %d twice", len(rep.URLs), rep.Duplicates)
	}
	if !strings.Contains(stderr.String(), "crawl done: exiting (exit_when_done)") {
		t.Errorf("the log does not say why the node exited:\n%s", stderr.String())
	}

	cmd = exec.Command(testbin.Path(t), append(args, "--revisit", "1h")...)
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code == 0 || !strings.Contains(string(out), "exit_when_done: a recurring crawl") {
		t.Errorf("run --exit-when-done --revisit 1h: exit %d, %s", code, out)
	}
}

// TestCrawlError: a crawl that cannot run (its --data is a file) exits 1
// with the error as the last line of standard error.
func TestCrawlError(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Path(t), "crawl", "--data", filepath.Join(file, "data"), "http://a.test/")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if code := exitCode(t, cmd.Run()); code != 1 {
		t.Fatalf("exit %d, want 1; stderr: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "phasecrawl crawl: ") || !strings.Contains(last, "not a directory") {
		t.Errorf("last line %q, want the error", last)
	}
}

// TestCrawlVerbose: --verbose sends the node's log to standard error
// instead of DATA/phasecrawl.log, which a crawl without it writes.
func TestCrawlVerbose(t *testing.T) {
	srv := startWeb(t, 4, 40)
	for _, verbose := range []bool{false, true} {
		data := filepath.Join(t.TempDir(), "data")
		more := []string{"--progress-interval", "1h"}
		if verbose {
			more = append(more, "--verbose")
		}
		cmd := exec.Command(testbin.Path(t), crawlArgs(srv, data, 5*time.Millisecond, more...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if code := exitCode(t, cmd.Run()); code != 0 {
			t.Fatalf("--verbose=%v: exit %d\n%s", verbose, code, stderr.String())
		}
		logged := strings.Contains(stderr.String(), "msg=\"node running\"")
		_, err := os.Stat(filepath.Join(data, "phasecrawl.log"))
		if logged != verbose || (err == nil) == verbose {
			t.Errorf("--verbose=%v: log on standard error %v, phasecrawl.log: %v\n%s", verbose, logged, err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "crawl finished") {
			t.Errorf("--verbose=%v: no summary:\n%s", verbose, stdout.String())
		}
	}
}

// TestCrawlBudget: a crawl whose --max-pages is spent ends with status 0
// and says so; the URLs left are counted.
func TestCrawlBudget(t *testing.T) {
	srv := startWeb(t, 6, 150)
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(testbin.Path(t), crawlArgs(srv, data, 5*time.Millisecond, "--max-pages", "10", "--workers", "1", "--json")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitCode(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d, want 0\n%s", code, stderr.String())
	}
	var sum summary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Result != "budget" || sum.PagesThisRun < 10 || sum.PagesThisRun > 11 || sum.Queued == 0 {
		t.Errorf("summary %+v: want result budget, 10 pages (one more in flight at most), URLs left", sum)
	}
}
