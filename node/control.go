package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/api"
)

// Budget reasons: why a node whose crawl budget is spent starts no new
// request (Status.Budget.Reached, the log).
const (
	BudgetMaxPages    = "max_pages"
	BudgetMaxDuration = "max_duration"
)

// control holds what the operator decides about fetching: pause and resume
// (POST /v1/pause, /v1/resume) and the crawl budget (max_pages,
// max_duration). Both act through the node's phase clock (gatedClock): a
// closed gate is like the guard before a phase swap, so the scheduler
// dispatches nothing and each worker starts no new request, finishing the
// one in flight and handing the rest of its host's list back to the queue.
type control struct {
	n      *Node
	paused atomic.Bool // by the operator (POST /v1/pause)
	// diskPaused is the disk guard's pause (storage.go): the data
	// directory's file system is short of storage.min_free. Apart from
	// paused: an operator's resume does not end it, nor it an operator's
	// pause.
	diskPaused atomic.Bool
	maxPages   int64
	maxDur     time.Duration

	mu        sync.Mutex
	reached   string    // BudgetMaxPages or BudgetMaxDuration once spent; never cleared
	reachedAt time.Time // when
	spent     atomic.Bool
}

func newControl(n *Node) *control {
	return &control{n: n, maxPages: n.cfg.MaxPages, maxDur: n.cfg.MaxDuration}
}

// open reports whether a new request may start at now: not paused, budget
// not spent. The first call that finds the budget spent records why.
func (c *control) open(now time.Time) bool {
	if c.paused.Load() || c.diskPaused.Load() {
		return false
	}
	if c.spent.Load() {
		return false
	}
	reason := ""
	switch {
	case c.maxPages > 0 && c.n.pages.Load() >= c.maxPages:
		reason = BudgetMaxPages
	case c.maxDur > 0 && now.Sub(c.n.started) >= c.maxDur:
		reason = BudgetMaxDuration
	default:
		return true
	}
	c.spend(reason, now)
	return false
}

// spend records, once, that the budget is spent and why.
func (c *control) spend(reason string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reached != "" {
		return
	}
	c.reached, c.reachedAt = reason, now
	c.spent.Store(true)
	c.n.log.Info("crawl budget spent: no new request starts (requests in flight finish)", "reason", reason,
		"pages", c.n.pages.Load(), "max_pages", c.maxPages, "elapsed", now.Sub(c.n.started).Round(time.Millisecond), "max_duration", c.maxDur)
}

// status is the budget part of GET /v1/status.
func (c *control) status() api.BudgetStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := api.BudgetStatus{MaxPages: c.maxPages, MaxDurationS: c.maxDur.Seconds(), Reached: c.reached}
	if !c.reachedAt.IsZero() {
		at := c.reachedAt.UTC()
		b.ReachedAt = &at
	}
	return b
}

// setPaused pauses or resumes; it reports whether the state changed.
func (c *control) setPaused(p bool, by string) bool {
	if c.paused.Swap(p) == p {
		return false
	}
	if p {
		c.n.log.Info("paused: no new request starts until POST /v1/resume", "by", by)
	} else {
		c.n.log.Info("resumed", "by", by)
		c.n.notify()
	}
	return true
}

// Pause reasons (Status.PausedReason).
const (
	PausedOperator = "operator" // POST /v1/pause
	PausedDisk     = "disk"     // the data directory is short of storage.min_free
)

// setDiskPaused pauses or resumes for the disk guard (free and min are
// the free space and the threshold, for the log).
func (c *control) setDiskPaused(p bool, free, min uint64) {
	if c.diskPaused.Swap(p) == p {
		return
	}
	if h := c.n.storageHold; h != nil {
		// In a cluster the member's phase goes idle, as a fenced
		// member's: it lends nothing and gives back what is lent to it.
		h.SetStorageHold(p)
	}
	if p {
		c.n.log.Warn("paused: the data directory is short of free space (storage.min_free); no new request starts until it is back above min_free plus a quarter",
			"dir", c.n.cfg.Data, "free_bytes", free, "min_free_bytes", min)
	} else {
		c.n.log.Info("resumed: the data directory has free space again", "dir", c.n.cfg.Data, "free_bytes", free, "min_free_bytes", min)
		c.n.notify()
	}
}

// pausedReason says why the node is paused ("" when it is not): the
// reasons, comma-separated.
func (c *control) pausedReason() string {
	switch op, disk := c.paused.Load(), c.diskPaused.Load(); {
	case op && disk:
		return PausedOperator + "," + PausedDisk
	case op:
		return PausedOperator
	case disk:
		return PausedDisk
	}
	return ""
}

// collectors are the control's series.
func (c *control) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "phasecrawl_paused", Help: "1 while the node is paused (POST /v1/pause): it starts no new request.",
		}, func() float64 { return b2f(c.paused.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "phasecrawl_storage_paused", Help: "1 while the node is paused for want of free space in its data directory (storage.min_free): it starts no new request.",
		}, func() float64 { return b2f(c.diskPaused.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "phasecrawl_budget_spent", Help: "1 once the node's crawl budget (max_pages or max_duration) is spent: it starts no new request.",
		}, func() float64 { return b2f(c.spent.Load()) }),
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Pause makes the node start no new request until Resume (requests in
// flight finish). It reports whether the node was running before.
func (n *Node) Pause() bool { return n.ctl.setPaused(true, "api") }

// Resume undoes Pause. It reports whether the node was paused.
func (n *Node) Resume() bool { return n.ctl.setPaused(false, "api") }

// Paused reports whether the node is paused by the operator.
func (n *Node) Paused() bool { return n.ctl.paused.Load() }

// DiskPaused reports whether the node is paused for want of free space.
func (n *Node) DiskPaused() bool { return n.ctl.diskPaused.Load() }

// gatedClock is the node's PhaseClock with the operator's gate: no phase
// is open while the node is paused or its budget is spent.
type gatedClock struct {
	PhaseClock
	c *control
}

// Active implements PhaseClock.
func (g gatedClock) Active(now time.Time) (int, int, bool) {
	phase, nphase, open := g.PhaseClock.Active(now)
	return phase, nphase, open && g.c.open(now)
}

// gate wraps p with the control's gate.
func (c *control) gate(p PhaseClock) PhaseClock {
	return gatedClock{PhaseClock: p, c: c}
}
