package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/bandwidth"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/node"
)

// bigWeb serves sites of large pages: every site has the same number of
// pages (its index included, padded to the same size), site i's of
// size[i] bytes, the index linking the others and, last, /end, a few
// bytes. Few large requests keep the time between two requests, which no
// site can use, small against the crawl. The node fetches a
// host's URLs in the order it found them over one connection, so the
// request for /end arrives when the site's last page has been read: its
// arrival is the site's completion time, as the server itself records it.
type bigWeb struct {
	pages int
	size  map[string]int // host -> page size

	mu  sync.Mutex
	log []served
}

type served struct {
	host, path string
	at         time.Time
	bytes      int
}

func (w *bigWeb) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(strings.Split(r.Host, ":")[0])
	size, ok := w.size[host]
	n := w.pages
	rec := served{host: host, path: r.URL.Path, at: time.Now()}
	var body []byte
	switch {
	case !ok || r.URL.Path == "/robots.txt":
		http.NotFound(rw, r)
	case r.URL.Path == "/end":
		body = []byte("end\n")
	case r.URL.Path == "/":
		var b strings.Builder
		b.WriteString("<html><body>")
		for k := 1; k < n; k++ {
			fmt.Fprintf(&b, `<a href="/p/%d">%d</a>`, k, k)
		}
		b.WriteString(`<a href="/end">end</a><!--`)
		b.WriteString(strings.Repeat("x", max(size-b.Len()-20, 0)))
		b.WriteString("--></body></html>")
		body = []byte(b.String())
		rw.Header().Set("Content-Type", "text/html")
	case strings.HasPrefix(r.URL.Path, "/p/"):
		body = make([]byte, size)
		for i := range body {
			body[i] = byte('a' + i%26)
		}
		rw.Header().Set("Content-Type", "application/octet-stream")
	default:
		http.NotFound(rw, r)
	}
	if body != nil {
		rw.Header().Set("Content-Length", fmt.Sprint(len(body)))
		rw.Write(body)
		rec.bytes = len(body)
	}
	w.mu.Lock()
	w.log = append(w.log, rec)
	w.mu.Unlock()
}

// siteTimes reads the server's records: the crawl's start (first request),
// each site's completion (its /end request) and bytes served.
func (w *bigWeb) siteTimes(t *testing.T) (start time.Time, finish map[string]time.Time, bytes map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	finish, bytes = map[string]time.Time{}, map[string]int{}
	last := map[string]served{}
	for _, r := range w.log {
		if start.IsZero() || r.at.Before(start) {
			start = r.at
		}
		bytes[r.host] += r.bytes
		if r.path == "/end" {
			finish[r.host] = r.at
		}
		if r.at.After(last[r.host].at) {
			last[r.host] = r
		}
	}
	for h := range w.size {
		if last[h].path != "/end" {
			t.Fatalf("%s: the last request was %s, not /end: the completion time cannot be read from the records", h, last[h].path)
		}
	}
	return start, finish, bytes
}

// achieved is the throughput the crawl reached, ΣD over the time from the
// first request to the last site's completion. It is at most the budget;
// how far below depends on the CPU the node is left (8-13% below with the
// whole suite on two cores). The models below are run at this rate, so
// that they test how the node shares what it gets, and at the budget, which
// bounds what the node may do.
func achieved(start time.Time, finish map[string]time.Time, bytes map[string]int) float64 {
	var total int
	var end time.Duration
	for h, b := range bytes {
		total += b
		end = max(end, finish[h].Sub(start))
	}
	return float64(total) / end.Seconds()
}

// The six sites: pages of bwPage × the paper's ratio, bwPages of them
// (ΣD ≈ 8.3 MB), crawled under bwBudget (≈ 3.3 s).
const (
	bwPages  = 6
	bwPage   = 128 << 10
	bwBudget = 2_500_000
)

// runBandwidthCrawl crawls six sites whose data amounts are in the paper's
// ratio under budget u with policy, and returns the server's records.
func runBandwidthCrawl(t *testing.T, u config.ByteRate, policy string, sites ...config.Site) (*bigWeb, []string, *node.Node) {
	w := &bigWeb{pages: bwPages, size: map[string]int{}}
	var hosts []string
	for i, r := range bandwidth.PaperRatio {
		h := fmt.Sprintf("s%d.bw.test", i+1)
		w.size[h] = int(r * bwPage)
		hosts = append(hosts, h)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)
	c := config.Default()
	c.Name = "bw"
	c.Data = t.TempDir()
	c.HTTP = "127.0.0.1:0"
	c.AllowPrivate = true
	c.Resolve = []string{"*.bw.test=" + strings.TrimPrefix(srv.URL, "http://")}
	c.Delay = 0
	c.Workers = 8
	c.WARC.Enabled = false
	c.Bucket.MaxQueueWait = 20 * time.Millisecond
	c.Bandwidth = config.Bandwidth{Limit: u, Policy: policy}
	c.Sites = sites
	for _, h := range hosts {
		c.Seeds = append(c.Seeds, "http://"+h+"/")
	}
	n, stop := runNode(t, c)
	waitDone(t, n, 2*time.Minute)
	// The Budget records a site's lateness when it sees the site done,
	// within a reallocation interval of its last trip.
	deadlines := 0
	for _, s := range sites {
		if s.Deadline > 0 {
			deadlines++
		}
	}
	wait.For(t, 30*time.Second, "the lateness of every site with a deadline recorded", func() (bool, string) {
		_, k, _ := deadlineMetrics(t, n)
		return int(k) == deadlines, fmt.Sprintf("%v samples of %d sites with a deadline", k, deadlines)
	})
	stop()
	return w, hosts, n
}

// TestBandwidthMaxT: with maxt the six sites finish together, each
// within 5% of their mean completion time, and none before 0.95 × ΣD/U
// (the budget is never exceeded), measured from the server's records.
// How close the mean comes to ΣD/U depends on the CPU left to the node
// (it was 3.4-3.5 s against 3.3 s with the whole suite on two cores): it
// is logged, not bounded.
func TestBandwidthMaxT(t *testing.T) {
	if testing.Short() {
		t.Skip("a crawl of a few seconds")
	}
	const u = bwBudget
	w, hosts, _ := runBandwidthCrawl(t, u, "maxt")
	start, finish, bytes := w.siteTimes(t)
	var total int
	for _, b := range bytes {
		total += b
	}
	want := float64(total) / u
	var mean float64
	for _, h := range hosts {
		mean += finish[h].Sub(start).Seconds() / float64(len(hosts))
	}
	var lines []string
	bad := false
	for _, h := range hosts {
		got := finish[h].Sub(start).Seconds()
		dev, fromMean := (got-want)/want, (got-mean)/mean
		lines = append(lines, fmt.Sprintf("%s: %d bytes, done at %.3f s (%+.1f%% of ΣD/U, %+.1f%% of the mean)", h, bytes[h], got, 100*dev, 100*fromMean))
		if fromMean > 0.05 || fromMean < -0.05 || dev < -0.05 {
			bad = true
		}
	}
	t.Logf("ΣD = %d bytes, U = %d B/s, ΣD/U = %.3f s, mean completion %.3f s (%+.1f%%)\n%s", total, u, want, mean, 100*(mean-want)/want, strings.Join(lines, "\n"))
	if bad {
		t.Errorf("a site finished more than 5%% away from the mean completion %.3f s, or before 0.95 × ΣD/U = %.3f s", mean, want)
	}
}

// TestBandwidthSumT: with sumt the sites finish smallest first, and the sum
// of their completion times is what the fluid model of ReAlloc-SUMT
// predicts for their data amounts: between 0.95 × what it predicts at the
// budget and 1.05 × what it predicts at the throughput achieved. A site's own time
// is logged against the model but not bounded: the smallest sites finish
// early because their first pages are fetched at equal shares, before any
// size is known (up to 13% early for the smallest on a loaded machine).
func TestBandwidthSumT(t *testing.T) {
	if testing.Short() {
		t.Skip("a crawl of a few seconds")
	}
	const u = bwBudget
	w, hosts, _ := runBandwidthCrawl(t, u, "sumt")
	start, finish, bytes := w.siteTimes(t)
	sites := make([]bandwidth.Site, len(hosts))
	for i, h := range hosts {
		sites[i] = bandwidth.Site{D: float64(bytes[h])}
	}
	reached := achieved(start, finish, bytes)
	pred := bandwidth.Simulate(sites, reached, 0, bandwidth.PolicyFunc(bandwidth.SumT), true)
	floor := bandwidth.Simulate(sites, u, 0, bandwidth.PolicyFunc(bandwidth.SumT), true)
	var lines []string
	var sumGot float64
	got := make([]float64, len(hosts))
	for i, h := range hosts {
		got[i] = finish[h].Sub(start).Seconds()
		sumGot += got[i]
		dev := (got[i] - pred.Finish[i]) / pred.Finish[i]
		lines = append(lines, fmt.Sprintf("%s: %d bytes, done at %.3f s, predicted %.3f s (%+.1f%%)", h, bytes[h], got[i], pred.Finish[i], 100*dev))
	}
	t.Logf("throughput %.0f B/s (budget %d), Σt measured %.3f s, predicted %.3f s at that throughput, %.3f s at the budget\n%s",
		reached, u, sumGot, pred.Sum, floor.Sum, strings.Join(lines, "\n"))
	for i := 1; i < len(hosts); i++ {
		if bytes[hosts[i]] > bytes[hosts[i-1]] && got[i] < got[i-1] {
			t.Errorf("%s (%d bytes) finished before %s (%d bytes): sumt finishes the smaller sites first",
				hosts[i], bytes[hosts[i]], hosts[i-1], bytes[hosts[i-1]])
		}
	}
	if sumGot > 1.05*pred.Sum {
		t.Errorf("Σt %.3f s is above 1.05 × the %.3f s predicted at the throughput achieved", sumGot, pred.Sum)
	}
	if sumGot < 0.95*floor.Sum {
		t.Errorf("Σt %.3f s is below 0.95 × the %.3f s predicted at the budget: the budget was exceeded", sumGot, floor.Sum)
	}
}

// TestBandwidthDeadlines: the two largest sites have deadlines the budget
// cannot meet (Û > U). The node shares by M-STET; the lateness measured
// from the server's records is the one the fluid model of the same
// allocation predicts, between its prediction at the budget and at the
// throughput achieved (±(0.1 s + 10%)); the node reports it
// (deadline_missed_total, site_lateness_seconds).
func TestBandwidthDeadlines(t *testing.T) {
	if testing.Short() {
		t.Skip("a crawl of a few seconds")
	}
	const u = bwBudget
	deadlines := map[string]time.Duration{"s6.bw.test": 1200 * time.Millisecond, "s5.bw.test": 1500 * time.Millisecond}
	var cs []config.Site
	for h, d := range deadlines {
		cs = append(cs, config.Site{Match: h, Deadline: d})
	}
	w, hosts, n := runBandwidthCrawl(t, u, "maxt", cs...)
	start, finish, bytes := w.siteTimes(t)
	sites := make([]bandwidth.Site, len(hosts))
	for i, h := range hosts {
		sites[i] = bandwidth.Site{D: float64(bytes[h]), Deadline: deadlines[h].Seconds()}
	}
	if req := bandwidth.Required(sites); req <= u {
		t.Fatalf("Û = %.0f B/s ≤ U: the deadlines can be met, the test needs them not to", req)
	}
	reached := achieved(start, finish, bytes)
	pred := bandwidth.SimulateTicks(sites, reached, bandwidth.PolicyFunc(bandwidth.MaxT), 0.25)
	floor := bandwidth.SimulateTicks(sites, u, bandwidth.PolicyFunc(bandwidth.MaxT), 0.25)
	var late, lines []string
	var measured float64
	missed := 0
	for i, h := range hosts {
		got := finish[h].Sub(start).Seconds()
		lines = append(lines, fmt.Sprintf("%s: %d bytes, deadline %v, done at %.3f s, predicted %.3f s", h, bytes[h], deadlines[h], got, pred.Finish[i]))
		if d := deadlines[h].Seconds(); d > 0 && got > d {
			measured += got - d
			missed++
			late = append(late, h)
		}
	}
	t.Logf("throughput %.0f B/s (budget %d), lateness measured %.3f s (%v), predicted %.3f s at that throughput, %.3f s at the budget\n%s",
		reached, u, measured, late, pred.Lateness, floor.Lateness, strings.Join(lines, "\n"))
	if measured > pred.Lateness+0.1+0.1*pred.Lateness {
		t.Errorf("lateness %.3f s is above the %.3f s predicted at the throughput achieved", measured, pred.Lateness)
	}
	if measured < floor.Lateness-(0.1+0.1*floor.Lateness) {
		t.Errorf("lateness %.3f s is below the %.3f s predicted at the budget: the budget was exceeded", measured, floor.Lateness)
	}
	reportedMissed, reportedCount, reportedSum := deadlineMetrics(t, n)
	t.Logf("reported: %v deadlines missed, %v lateness samples summing to %.3f s", reportedMissed, reportedCount, reportedSum)
	if int(reportedMissed) != missed || reportedCount != float64(len(deadlines)) {
		t.Errorf("reported %v missed deadlines and %v lateness samples; measured %d missed of %d", reportedMissed, reportedCount, missed, len(deadlines))
	}
	if d := reportedSum - measured; d > 0.3 || d < -0.3 {
		t.Errorf("reported lateness %.3f s, measured %.3f s", reportedSum, measured)
	}
}

// deadlineMetrics reads the node's phasecrawl_site_deadline_missed_total
// and the count and sum of its phasecrawl_site_lateness_seconds.
func deadlineMetrics(t *testing.T, n *node.Node) (missed, count, sum float64) {
	t.Helper()
	mfs, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "phasecrawl_site_deadline_missed_total":
			missed = mf.GetMetric()[0].GetCounter().GetValue()
		case "phasecrawl_site_lateness_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			count, sum = float64(h.GetSampleCount()), h.GetSampleSum()
		}
	}
	return missed, count, sum
}
