package node

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/report"
)

// reports are the node's per-host, MIME-type and status-code figures
// (report.Tally, fed the crawl log's lines as they are written, and at
// start the lines an earlier process wrote), its pages per interval of
// the last 15 minutes, and the frontier's queued URLs per host, read
// again at most every queuedTTL.
type reports struct {
	tally   *report.Tally
	rate    report.Rate
	logSize int64 // the crawl log's size when the node opened: the lines to read again

	mu       sync.Mutex // serializes the frontier scans
	queued   map[string]int64
	queuedAt time.Time
	queuedIn time.Duration // how long the last scan took
}

// queuedTTL is the shortest time the queued URLs per host are kept; a
// scan that took longer than a tenth of it keeps its answer ten times as
// long as it took.
const queuedTTL = 10 * time.Second

// saveRefusedEvery is how often the refused URLs per host are saved.
const saveRefusedEvery = time.Minute

// newReports builds the node's reports, before the frontier and the crawl
// log open.
func newReports(data string) *reports {
	r := &reports{tally: report.NewTally()}
	if fi, err := os.Stat(filepath.Join(data, crawlLogName)); err == nil {
		r.logSize = fi.Size()
	}
	return r
}

// logged counts a crawl-log line (output.writeLog): once per page.
func (r *reports) logged(e archive.LogEntry) {
	r.tally.AddEntry(e)
	if e.Status > 0 {
		r.rate.Add(time.Now())
	}
}

// reportLoop reads the crawl log an earlier process wrote and the refused
// URLs it saved, then saves the refused URLs every saveRefusedEvery until
// ctx is done (Run saves them once more at the end).
func (n *Node) reportLoop(ctx context.Context) {
	r := n.rep
	start := time.Now()
	lines, skipped, err := r.tally.ReadCrawlLog(filepath.Join(n.cfg.Data, crawlLogName), r.logSize)
	if err != nil {
		n.log.Error("reports: read the crawl log", "error", err)
	} else if lines > 0 {
		n.log.Info("reports: read the crawl log", "lines", lines, "skipped", skipped, "hosts", r.tally.Len(), "took", time.Since(start).Round(time.Millisecond))
	}
	if m, err := report.LoadRefused(filepath.Join(n.cfg.Data, report.RefusedName)); err != nil {
		n.log.Error("reports: load refused URLs", "error", err)
	} else {
		r.tally.AddRefusedAll(m)
	}
	tick := time.NewTicker(saveRefusedEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			n.saveRefused()
		}
	}
}

func (n *Node) saveRefused() {
	if err := n.rep.tally.SaveRefused(filepath.Join(n.cfg.Data, report.RefusedName)); err != nil {
		n.log.Error("reports: save refused URLs", "error", err)
	}
}

// queuedByHost returns the frontier's queued URLs per host, read again
// when the last read is older than queuedTTL (or ten times what it took).
func (n *Node) queuedByHost() (map[string]int64, error) {
	r := n.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queued != nil && time.Since(r.queuedAt) < max(queuedTTL, 10*r.queuedIn) {
		return r.queued, nil
	}
	start := time.Now()
	q, err := n.front.QueuedByHost()
	if err != nil {
		return nil, err
	}
	r.queued, r.queuedAt, r.queuedIn = q, time.Now(), time.Since(start)
	return q, nil
}

// hostsReport returns the hosts report sorted by by, the first k rows
// (k <= 0: all). Hosts with queued URLs but no crawl-log line yet are
// listed too.
func (n *Node) hostsReport(by string, k int) ([]report.Host, error) {
	hs := n.rep.tally.Hosts()
	q, err := n.queuedByHost()
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(hs))
	for i := range hs {
		hs[i].Queued = q[hs[i].Host]
		seen[hs[i].Host] = true
	}
	for h, v := range q {
		if !seen[h] {
			hs = append(hs, report.Host{Host: h, Queued: v})
		}
	}
	return report.SortHosts(hs, by, k), nil
}

// firstRoundEnd estimates when the URLs queued now will have been
// fetched: at the pages/s of the last minute, or, when it takes longer,
// at the politeness delay of the hosts with the most queued URLs (the
// largest sites end a crawl). Nil when nothing is queued or nothing was
// fetched in the last minute.
func (n *Node) firstRoundEnd(now time.Time) *time.Time {
	c := n.front.Counts()
	left := c.InList + c.InProgress + c.Stalled
	if left == 0 {
		return nil
	}
	rate := n.rep.rate.Samples(now, n.started).PagesPerS
	if rate <= 0 {
		return nil
	}
	eta := time.Duration(float64(left) / rate * float64(time.Second))
	if q, err := n.queuedByHost(); err == nil {
		type hq struct {
			host string
			n    int64
		}
		top := make([]hq, 0, len(q))
		for h, v := range q {
			top = append(top, hq{h, v})
		}
		sort.Slice(top, func(i, j int) bool { return top[i].n > top[j].n })
		_, nphase, _ := n.phases.Active(now)
		for _, h := range top[:min(len(top), 5)] {
			delay := n.cfg.Delay
			if hs, ok, err := n.front.Host(h.host); err == nil && ok {
				delay = max(delay, hs.Delay)
			}
			eta = max(eta, time.Duration(h.n)*delay*time.Duration(max(nphase, 1)))
		}
	}
	end := now.Add(eta).UTC()
	return &end
}

// Hosts implements api.Reporter.
func (a apiNode) Hosts(by string, k int) ([]report.Host, error) { return a.hostsReport(by, k) }

// MIMETypes implements api.Reporter.
func (a apiNode) MIMETypes() []report.Count { return a.rep.tally.MIMETypes() }

// StatusCodes implements api.Reporter.
func (a apiNode) StatusCodes() []report.Count { return a.rep.tally.StatusCodes() }

// Rate implements api.Reporter.
func (a apiNode) Rate() report.Samples { return a.rep.rate.Samples(time.Now(), a.started) }

var _ api.Reporter = apiNode{}

// refusals gathers a trip's refused links while a page is handled, so the
// hosts report is told once a page (countRefused) rather than once a link:
// a run of links of one host refused for one reason, as a page's links past
// scope.max_depth are, is one count.
type refusals struct {
	host, reason string
	n            int64
}

// refuse notes one refused link of host.
func (t *hostTrip) refuse(host, reason string) {
	r := &t.refused
	if r.n > 0 && (r.host != host || r.reason != reason) {
		t.countRefused()
	}
	r.host, r.reason = host, reason
	r.n++
}

// countRefused adds the refusals noted to the hosts report.
func (t *hostTrip) countRefused() {
	if r := &t.refused; r.n > 0 {
		if t.n.rep != nil {
			t.n.rep.tally.AddRefused(r.host, r.reason, r.n)
		}
		r.n = 0
	}
}
