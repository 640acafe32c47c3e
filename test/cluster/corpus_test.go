package cluster_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/test/harness"
)

// rustDocRoot is where Debian's rust-doc package puts the Rust book and
// the std/core API documentation.
const rustDocRoot = "/usr/share/doc/rust-doc/html"

// needCorpus returns nginx's path and the rust-doc corpus, or fails the
// test (under CI=true: .ci/run installs both) or skips it (elsewhere).
func needCorpus(t testing.TB) (nginx, root string) {
	t.Helper()
	bin, ok := harness.NginxBinary()
	_, err := os.Stat(filepath.Join(rustDocRoot, "index.html"))
	if ok && err == nil {
		return bin, rustDocRoot
	}
	why := fmt.Sprintf("nginx found: %v, %s/index.html: %v", ok, rustDocRoot, err)
	if os.Getenv("CI") == "true" {
		t.Fatalf("the rust-doc corpus test needs the Debian packages nginx and rust-doc (.ci/run installs them): %s", why)
	}
	t.Skipf("needs the Debian packages nginx and rust-doc (apt-get install nginx rust-doc; under CI=true this fails): %s", why)
	return "", ""
}

// corpusCrawl is one crawl of the corpus: the members' processes started
// together, from their start to the last page the server answered.
type corpusCrawl struct {
	members   int
	start     time.Time      // the first process started
	first     time.Time      // the server logged the first request
	last      time.Time      // the server logged the last request
	pages     map[string]int // URI -> requests (robots.txt aside)
	robots    int            // requests of /robots.txt
	perMember []int          // pages each member logged in its crawl log
	cpu       time.Duration  // user and system CPU time of the members' processes
}

// total is the crawl's time, start-up included.
func (c corpusCrawl) total() time.Duration { return c.last.Sub(c.start) }

// crawling is the crawl's time from its first request to its last.
func (c corpusCrawl) crawling() time.Duration { return c.last.Sub(c.first) }

func (c corpusCrawl) String() string {
	return fmt.Sprintf("%d member(s): %d pages in %.2fs from the start (%.2fs to the first request), %.0f pages/s while crawling (%.2fs); pages per member %v; CPU %.2fs",
		c.members, len(c.pages), c.total().Seconds(), c.first.Sub(c.start).Seconds(), float64(len(c.pages))/c.crawling().Seconds(), c.crawling().Seconds(), c.perMember, c.cpu.Seconds())
}

// corpusEnvVar names a variable whose words (KEY=VALUE, space-separated)
// crawlCorpus adds to each member's environment, to compare settings on
// the corpus, as in bench_defaults_test.go:
// PHASECRAWL_BENCH_NODE_ENV='PHASECRAWL_CLUSTER_BATCH_DELAY=40ms'.
const corpusEnvVar = "PHASECRAWL_BENCH_NODE_ENV"

// crawlCorpus starts n members (a node alone when n is 1) with the
// shipped settings, --delay 0 and the corpus's index page as their seed,
// all at once (each but the first joining the first's gossip address),
// with --exit-when-done, and waits until every one exited.
func crawlCorpus(t testing.TB, ng *harness.Nginx, n int) corpusCrawl {
	t.Helper()
	if err := ng.Truncate(); err != nil {
		t.Fatal(err)
	}
	bin := phasecrawlBin(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := "http://" + ng.Addr + "/index.html"
	type member struct {
		name, data, log string
		cmd             *exec.Cmd
		done            chan struct{}
		err             error
	}
	var gossip0 string
	ms := make([]*member, n)
	var args [][]string
	for i := range n {
		ip := fmt.Sprintf("127.0.0.%d", i+1)
		m := &member{name: fmt.Sprintf("node%d", i), data: filepath.Join(dir, fmt.Sprintf("node%d", i)), log: filepath.Join(dir, fmt.Sprintf("node%d.log", i))}
		ms[i] = m
		a := []string{"run", "--name", m.name, "--data", m.data, "--http", net.JoinHostPort(ip, strconv.Itoa(harness.FreePort(t, ip))),
			"--allow-private", "--delay", "0", "--seed", seed, "--exit-when-done", "--log-format", "json"}
		if n > 1 {
			gossip := net.JoinHostPort(ip, strconv.Itoa(harness.FreePort(t, ip)))
			a = append(a, "--gossip", gossip, "--exchange", net.JoinHostPort(ip, strconv.Itoa(harness.FreePort(t, ip))), "--cluster-key-file", keyFile)
			if i == 0 {
				gossip0 = gossip
			} else {
				a = append(a, "--join", gossip0)
			}
		}
		args = append(args, a)
	}
	c := corpusCrawl{members: n, start: time.Now()}
	for i, m := range ms {
		cmd := exec.Command(bin, args[i]...)
		// The shipped settings, but for the crawl's end: done once the
		// crawl has stayed done for a second (not the default 5 s).
		cmd.Env = harness.NodeEnv(append([]string{"PHASECRAWL_DONE_GRACE=1s"}, strings.Fields(os.Getenv(corpusEnvVar))...)...)
		done, err := harness.StartLogged(cmd, m.log, "", func(err error) { m.err = err })
		if err != nil {
			t.Fatalf("start %s: %v", m.name, err)
		}
		m.cmd, m.done = cmd, done
		t.Cleanup(func() {
			if !harness.Closed(done) {
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	deadline := time.After(10 * time.Minute)
	for _, m := range ms {
		select {
		case <-m.done:
		case <-deadline:
			t.Fatalf("%s has not exited within 10 minutes: %s", m.name, harness.LogTail(m.log, 20))
		}
		if m.err != nil {
			t.Fatalf("%s exited: %v\n%s", m.name, m.err, harness.LogTail(m.log, 20))
		}
		if ps := m.cmd.ProcessState; ps != nil {
			c.cpu += ps.UserTime() + ps.SystemTime()
		}
	}
	visits, err := ng.Visits()
	if err != nil {
		t.Fatal(err)
	}
	if len(visits) == 0 {
		t.Fatalf("%d member(s): the server logged no request", n)
	}
	c.pages = map[string]int{}
	c.first, c.last = visits[0].At, visits[0].At
	for _, v := range visits {
		if v.At.Before(c.first) {
			c.first = v.At
		}
		if v.At.After(c.last) {
			c.last = v.At
		}
		if v.URI == "/robots.txt" {
			c.robots++
			continue
		}
		c.pages[v.URI]++
	}
	for _, m := range ms {
		b, err := os.ReadFile(filepath.Join(m.data, "crawl.log"))
		if err != nil {
			t.Fatal(err)
		}
		c.perMember = append(c.perMember, strings.Count(string(b), "\n"))
	}
	return c
}

// checkCorpus reports (tb.Errorf) what in crawl c departs from ref, the
// pages one node fetched: a page fetched more than once, missing or not
// fetched by one node, robots.txt requested more than once per member,
// crawl logs that do not hold the pages the server served.
func checkCorpus(tb testing.TB, ref map[string]int, c corpusCrawl) {
	tb.Helper()
	var twice, missing, extra []string
	for u, k := range c.pages {
		if k > 1 {
			twice = append(twice, fmt.Sprintf("%s (%d times)", u, k))
		}
		if ref[u] == 0 {
			extra = append(extra, u)
		}
	}
	for u := range ref {
		if c.pages[u] == 0 {
			missing = append(missing, u)
		}
	}
	for _, l := range []struct {
		what string
		us   []string
	}{{"fetched more than once", twice}, {"missing (fetched by one node)", missing}, {"not fetched by one node", extra}} {
		if len(l.us) > 0 {
			slices.Sort(l.us)
			tb.Errorf("%d member(s): %d pages %s: %s", c.members, len(l.us), l.what, strings.Join(l.us[:min(len(l.us), 10)], ", "))
		}
	}
	if c.robots > c.members {
		tb.Errorf("%d member(s): robots.txt requested %d times, want at most once per member", c.members, c.robots)
	}
	sum := 0
	for _, k := range c.perMember {
		sum += k
	}
	if sum != len(c.pages) {
		tb.Errorf("%d member(s): the crawl logs hold %d pages, the server served %d", c.members, sum, len(c.pages))
	}
}

// corpusRef returns the pages of a one-node crawl as the reference of the
// others, failing tb when it is not the whole corpus.
func corpusRef(tb testing.TB, alone corpusCrawl, root string) map[string]int {
	tb.Helper()
	if len(alone.pages) < 20000 {
		tb.Fatalf("one node fetched %d pages of the corpus, want over 20,000 (is %s the whole rust-doc?)", len(alone.pages), root)
	}
	return alone.pages
}

// corpusLooseBound is the start-up-included ratio of three members' time
// to one node's that TestProcCorpusRustDoc fails above. It is no timing
// claim (BenchmarkCorpusRustDoc holds the 1.5× bound, on a quiet machine):
// the test runs beside other packages' tests on two cores, where three
// members took up to 2.45× one node's time in one pair; 3× still catches
// the slowdown a member list or lending fault brings back (5.6× under
// load, 8× on a quiet machine before the big-site changes).
const corpusLooseBound = 3.0

// TestProcCorpusRustDoc: Debian's rust-doc (the Rust book and the std and
// core API documentation: over 20,000 HTML pages reachable from its
// index, many of them rustdoc's redirect pages, all on one host), served
// by a real nginx on a loopback address, crawled with --delay 0 by one
// node and by three members started together. Each crawl fetches every
// page exactly once, the same pages, robots.txt at most once per member,
// and the members' crawl logs hold exactly the pages served. Start-up
// included, three members take at most corpusLooseBound times one node's
// time (the better of each when a second pair is needed): a coarse guard
// against a slowdown, not the performance claim, which
// BenchmarkCorpusRustDoc checks on a quiet machine.
func TestProcCorpusRustDoc(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process corpus crawl in -short mode")
	}
	bin, root := needCorpus(t)
	ng := harness.StartNginx(t, bin, root, "127.0.0.10")
	var alone, three []corpusCrawl
	pair := func() {
		alone = append(alone, crawlCorpus(t, ng, 1))
		t.Logf("%v", alone[len(alone)-1])
		three = append(three, crawlCorpus(t, ng, 3))
		t.Logf("%v", three[len(three)-1])
	}
	best := func(cs []corpusCrawl) time.Duration {
		b := cs[0].total()
		for _, c := range cs[1:] {
			b = min(b, c.total())
		}
		return b
	}
	pair()
	if one, cl := best(alone), best(three); cl.Seconds() > corpusLooseBound*one.Seconds() {
		t.Logf("three members took %.2fs against one node's %.2fs: a second pair", cl.Seconds(), one.Seconds())
		pair()
	}
	ref := corpusRef(t, alone[0], root)
	for _, c := range slices.Concat(alone, three) {
		checkCorpus(t, ref, c)
	}
	one, cl := best(alone), best(three)
	t.Logf("best times, start-up included: one node %.2fs, three members %.2fs (%.2f×)", one.Seconds(), cl.Seconds(), cl.Seconds()/one.Seconds())
	if cl.Seconds() > corpusLooseBound*one.Seconds() {
		t.Errorf("start-up included, three members took %.2fs, %.2f× one node's %.2fs, want at most %.1f× (the test's coarse bound)",
			cl.Seconds(), cl.Seconds()/one.Seconds(), one.Seconds(), corpusLooseBound)
	}
}
