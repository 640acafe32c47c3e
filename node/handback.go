package node

import (
	"context"
	"sync"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// handBacks are the scheduler's writes that put URLs it holds IN_PROGRESS
// and will not fetch now back in the queue (frontier.Requeue): at a phase
// swap, and the URLs joined for a refill that was not used. The scheduler
// never waits for the disk, so it cannot try such a write again itself;
// a failed one (a full disk) is tried again here until it goes through or
// the node stops, as a trip's commit is. Without that, its URLs stay
// IN_PROGRESS in no bucket and no queue: nothing fetches them before the
// next start (frontier.Open puts them back), and the crawl never ends.
type handBacks struct {
	mu      sync.Mutex
	watched []handBack     // submitted by the scheduler, not answered yet
	failed  []frontier.Ref // to write again
	wake    chan struct{}  // cap 1
}

// handBack is a requeue write the scheduler submitted, and its URLs.
type handBack struct {
	p    *frontier.Pending
	refs []frontier.Ref
}

func newHandBacks() *handBacks { return &handBacks{wake: make(chan struct{}, 1)} }

// watch has the loop check the answer of p, the requeue write of refs.
// A node built without them (tests of the scheduler alone) only submits.
func (h *handBacks) watch(p *frontier.Pending, refs []frontier.Ref) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.watched = append(h.watched, handBack{p: p, refs: refs})
	h.mu.Unlock()
	h.signal()
}

// retry has the loop write the requeue of refs again (a write that failed).
func (h *handBacks) retry(refs []frontier.Ref) {
	if h == nil || len(refs) == 0 {
		return
	}
	h.mu.Lock()
	h.failed = append(h.failed, refs...)
	h.mu.Unlock()
	h.signal()
}

func (h *handBacks) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// take returns and forgets what the loop has to do.
func (h *handBacks) take() ([]handBack, []frontier.Ref) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, f := h.watched, h.failed
	h.watched, h.failed = nil, nil
	return w, f
}

// handBackLoop waits for the scheduler's requeue writes and writes the
// failed ones again, with the storage retries' back-off, until ctx is
// done: the URLs of a write that never went through stay IN_PROGRESS,
// and the next Open puts them back in the queue.
func (n *Node) handBackLoop(ctx context.Context) {
	h := n.handBacks
	var failed []frontier.Ref
	var last error // the last failure
	try := 0
	for {
		if len(failed) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-h.wake:
			}
		}
		watched, more := h.take()
		failed = append(failed, more...)
		for _, w := range watched {
			if _, err := w.p.Wait(); err != nil {
				n.requeueFailed(err, len(w.refs), 0)
				failed, last = append(failed, w.refs...), err
			}
		}
		if len(failed) == 0 {
			try = 0
			continue
		}
		if !n.retryWrite(ctx, try, last) {
			return
		}
		try++
		if err := n.front.Requeue(n.persistCtx, failed); err != nil {
			n.requeueFailed(err, len(failed), try)
			last = err
			continue
		}
		n.log.Info("URLs handed back to the queue after a failed write", "urls", len(failed), "tries", try+1)
		failed, try = nil, 0
		n.notify() // the scheduler skipped them while they were IN_PROGRESS
	}
}

// requeueFailed logs and counts a failed requeue write of urls URLs
// (retry: 0 for the scheduler's own write, k for the k-th time
// handBackLoop wrote it again).
func (n *Node) requeueFailed(err error, urls, retry int) {
	if n.persistCtx.Err() != nil {
		return // the node stops: Open puts them back
	}
	n.log.Error("hand URLs back to the queue: will write again", "error", err, "urls", urls, "retry", retry)
	n.storageFailed(storeFrontier, err)
}
