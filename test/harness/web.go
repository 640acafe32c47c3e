package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// WebArgs are the arguments of `phasecrawl synthweb` serving the web of wc
// at listen (HOST:PORT): its seed, hosts, pages, seeds, trap, slow and
// Crawl-delay hosts and its changes (the other fields keep their defaults).
func WebArgs(listen string, wc synthweb.Config) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{"synthweb", "--listen", listen, "--trap-hosts", strconv.Itoa(wc.TrapHosts),
		"--hosts", strconv.Itoa(wc.Hosts), "--pages", strconv.Itoa(wc.Pages), "--seed", strconv.FormatInt(wc.Seed, 10),
		"--seeds", strconv.Itoa(wc.Seeds), "--slow-hosts", f(wc.SlowHosts), "--crawl-delay-hosts", f(wc.CrawlDelayHosts),
		"--change-every", wc.ChangeEvery.String(), "--changing-pages", f(wc.ChangingPages),
		"--validators=" + strconv.FormatBool(wc.Validators)}
}

// StartWeb starts cmd, a `phasecrawl synthweb` process (WebArgs) serving
// web at addr, kills it when the test ends, waits until it answers, and
// returns what a crawl of the web by the tests' nodes must do (their
// scope: the web's domain, webnode.MaxPagesPerHost, the default user
// agent).
func StartWeb(t testing.TB, cmd *exec.Cmd, addr string, web *synthweb.Web) synthweb.Expectation {
	t.Helper()
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	wait.For(t, 30*time.Second, "synthweb process answers", func() bool {
		_, err := WebReport(addr)
		return err == nil
	})
	return web.Expected(synthweb.Scope{Domains: []string{web.Config().Domain}, MaxPagesPerHost: webnode.MaxPagesPerHost,
		UserAgent: config.Default().UserAgent, PatternDepth: config.Default().Scope.MaxPatternDepth})
}

// WebJSON decodes the JSON the synthweb process at addr serves at path
// into v.
func WebJSON(addr, path string, v any) error {
	resp, err := Client.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("synthweb %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// WebReport reads what the synthweb process at addr served.
func WebReport(addr string) (synthweb.Report, error) {
	var rep synthweb.Report
	err := WebJSON(addr, synthweb.ReportPath, &rep)
	return rep, err
}

// WebVisits reads every request the synthweb process at addr served
// (synthweb.Web.Visits).
func WebVisits(addr string) (map[string][]synthweb.Visit, error) {
	var vs map[string][]synthweb.Visit
	err := WebJSON(addr, synthweb.VisitsPath, &vs)
	return vs, err
}

// HostGap is the shortest allowed gap between two requests to a host: the
// crawl's delay or the host's Crawl-delay (synthweb.Incidents' need).
func HostGap(exp synthweb.Expectation, delay time.Duration) func(host string) time.Duration {
	return func(h string) time.Duration { return max(delay, exp.CrawlDelay[h]) }
}

// Violations is the oracle's check of a crawl by a cluster (rep.Check with
// the politeness delay), without its duplicate fetches, which a test
// counts and explains itself (Duplicated), and with each contacted host's
// robots.txt fetched 1..robotsPerHost times instead of once (the cluster
// shares robots.txt: once, unless a node lost its copies).
func Violations(rep synthweb.Report, exp synthweb.Expectation, delay time.Duration, robotsPerHost int) []string {
	var vs []string
	for _, v := range rep.Check(exp, delay) {
		switch {
		case strings.Contains(v, "robots.txt fetched"), strings.HasSuffix(v, ": robots.txt fetches"):
			continue // checked below
		case strings.HasPrefix(v, "duplicate: "), strings.HasSuffix(v, ": duplicate fetches"):
			continue // for the test
		}
		vs = append(vs, v)
	}
	for h := range exp.Contacted {
		if r := rep.Hosts[h].RobotsFetches; r < 1 || r > robotsPerHost {
			vs = append(vs, fmt.Sprintf("host %s: robots.txt fetched %d times, want 1..%d", h, r, robotsPerHost))
		}
	}
	return vs
}

// Duplicated returns the pages of exp the web served more than once.
func Duplicated(rep synthweb.Report, exp synthweb.Expectation) map[string]bool {
	dup := map[string]bool{}
	for u, n := range rep.URLs {
		if n > 1 && exp.Pages[u] {
			dup[u] = true
		}
	}
	return dup
}

// FetchEvent is one fetch of a URL (a response received) as a node's crawl
// log has it.
type FetchEvent struct {
	Node string
	At   time.Time
}

// FetchEvents returns every fetch of the URLs in urls in the crawl logs
// (crawl.log) of the data directories dirs (node name to directory), by
// URL, oldest first.
func FetchEvents(dirs map[string]string, urls map[string]bool) map[string][]FetchEvent {
	out := map[string][]FetchEvent{}
	for name, dir := range dirs {
		f, err := os.Open(filepath.Join(dir, "crawl.log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e struct {
				Time   time.Time `json:"time"`
				URL    string    `json:"url"`
				Status int       `json:"status"`
			}
			if json.Unmarshal(sc.Bytes(), &e) == nil && urls[e.URL] && e.Status > 0 {
				out[e.URL] = append(out[e.URL], FetchEvent{name, e.Time})
			}
		}
		f.Close()
	}
	for _, evs := range out {
		slices.SortFunc(evs, func(a, b FetchEvent) int { return a.At.Compare(b.At) })
	}
	return out
}
