package node

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// storageCheckInterval is how often the disk guard reads the data
// directory's free space; a write error has it read at once.
const storageCheckInterval = time.Second

// Storage error kinds (phasecrawl_storage_errors_total{what}).
const (
	storeWARC     = "warc"
	storeCrawlLog = "crawl_log"
	storeFrontier = "frontier"
	storeOutbox   = "outbox"
	storeCDXJ     = "cdxj"
)

// storageHolder is a cluster phase clock that holds this member off its
// phase, as a fenced member, while it is short of disk space
// (phase.Schedule.SetStorageHold, cluster/phase).
type storageHolder interface{ SetStorageHold(on bool) }

// diskGuard pauses the node while its data directory's file system has
// less than storage.min_free free: the node's gate (control.open) is then
// closed, as for an operator pause but apart from it, so neither undoes
// the other. It resumes once the free space is back above min_free plus a
// quarter of it (the margin keeps a node near the threshold from flapping
// between paused and running with each file it writes).
type diskGuard struct {
	n     *Node
	dir   string
	wake  chan struct{} // a write failed: check now
	statf func(dir string) (free, total uint64, err error)
	free  prometheus.Gauge
	// warned: a failed statfs was logged (once); run's goroutine only.
	warned bool
}

func newDiskGuard(n *Node) *diskGuard {
	return &diskGuard{n: n, dir: n.cfg.Data, wake: make(chan struct{}, 1), statf: statfs,
		free: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "phasecrawl_storage_free_bytes", Help: "Free bytes of the data directory's file system (for the node's user), read every second.",
		})}
}

// failed tells the guard a write failed: it reads the free space now.
func (g *diskGuard) failed() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// run checks the free space every storageCheckInterval, and at once after
// a write error, until ctx is done.
func (g *diskGuard) run(ctx context.Context) {
	tick := time.NewTicker(storageCheckInterval)
	defer tick.Stop()
	for {
		g.check()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-g.wake:
		}
	}
}

// check reads the free space and pauses or resumes the node.
func (g *diskGuard) check() {
	free, total, err := g.statf(g.dir)
	if err != nil {
		if !g.warned {
			g.warned = true
			g.n.log.Warn("cannot read the data directory's free space: storage.min_free is not enforced", "error", err)
		}
		return
	}
	g.free.Set(float64(free))
	min, err := g.n.cfg.Storage.MinFreeBytes(total)
	if err != nil || min == 0 {
		g.n.ctl.setDiskPaused(false, free, min)
		return
	}
	switch {
	case free < min:
		g.n.ctl.setDiskPaused(true, free, min)
	case free >= min+min/4:
		g.n.ctl.setDiskPaused(false, free, min)
	}
}

// Storage write retries (retryWrite): the first waits storageRetryFirst,
// each next one twice as long up to storageRetryMax, and then every
// storageRetryMax until the write goes through or the node stops: the disk
// guard pauses the node meanwhile, and an operator who frees space gets the
// trip's pages recorded without a restart.
const (
	storageRetryFirst = 100 * time.Millisecond
	storageRetryMax   = 5 * time.Second
)

// retryWrite waits before the next try of a failed durable write (try
// counts from 0) and reports whether to try again: not once the node is
// stopping or the frontier is closed.
func (n *Node) retryWrite(ctx context.Context, try int, err error) bool {
	if ctx.Err() != nil || errors.Is(err, frontier.ErrClosed) || errors.Is(err, context.Canceled) {
		return false
	}
	t := time.NewTimer(min(storageRetryFirst<<min(try, 16), storageRetryMax))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// storageFailed counts a write error of what and has the disk guard read
// the free space at once. A write given up because the node stops is no
// storage error.
func (n *Node) storageFailed(what string, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, frontier.ErrClosed) {
		return
	}
	n.m.StorageErrors.WithLabelValues(what).Inc()
	if n.disk != nil {
		n.disk.failed()
	}
}
