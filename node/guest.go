package node

import (
	"context"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// Guest is a URL another member (its owner) lent this node for the phase
// this node works on now: the owner keeps the URL's record, this node
// fetches it within its trips to the host and reports the outcome
// (LentOutcome) back to the owner, which settles the record. Guests are
// kept in memory only: one that is not fetched by Until is dropped, and
// the owner lends it again or fetches it itself.
type Guest struct {
	frontier.NewURL
	Tries int
	// Until is the local time at which the phase the URL was lent for ends.
	Until time.Time
}

// LentOutcome is the result of a guest's fetch, for its owner.
type LentOutcome struct {
	URL   string
	Depth int
	frontier.Result
}

// Lender is an optional Router extension (the cluster): ReportLent durably
// sends the outcomes of guests' fetches to their owners.
type Lender interface {
	ReportLent(ctx context.Context, outs []LentOutcome) error
}

// Limits of the guest pool.
const (
	// maxGuests bounds the guests waiting in memory.
	maxGuests = 1 << 16
	// guestMemory is how long a guest fetched here is remembered, so that
	// the same lend arriving again (its owner restarted before the outcome
	// reached it) is not fetched twice.
	guestMemory = 10 * time.Minute
	// maxGuestMemory bounds the fingerprints remembered.
	maxGuestMemory = 1 << 18
)

// guestPool holds the guests lent to this node, by host, until the
// scheduler places them in the bucket.
type guestPool struct {
	mu      sync.Mutex
	hosts   map[string][]Guest
	queued  map[uint64]struct{}  // fingerprints waiting here or placed in the bucket
	fetched map[uint64]time.Time // fingerprints fetched (reported) here, and when
	n       int
}

func newGuestPool() *guestPool {
	return &guestPool{hosts: map[string][]Guest{}, queued: map[uint64]struct{}{}, fetched: map[uint64]time.Time{}}
}

// AddGuests takes the URLs lent to this node (the cluster calls it). It
// drops those it already holds or fetched, and any beyond maxGuests, and
// wakes the scheduler.
func (n *Node) AddGuests(gs []Guest) {
	if len(gs) == 0 || !n.ready.Load() {
		return // not running (yet): the owner lends them again or fetches them
	}
	var redirects []frontier.NewURL
	p := n.guests
	p.mu.Lock()
	added := 0
	for _, g := range gs {
		fp := frontier.Fingerprint(g.URL)
		if _, ok := p.queued[fp]; ok {
			continue
		}
		if _, ok := p.fetched[fp]; ok {
			continue
		}
		if p.n >= maxGuests {
			break
		}
		p.queued[fp] = struct{}{}
		p.hosts[g.Host] = append(p.hosts[g.Host], g)
		p.n++
		added++
		if g.Redirects > 0 {
			redirects = append(redirects, g.NewURL)
		}
	}
	p.mu.Unlock()
	n.RememberRedirects(redirects)
	if added > 0 {
		n.m.GuestsReceived.Add(float64(added))
		n.notify()
	}
}

// take removes and returns, by host, the guests of the hosts in phase of
// nphase still valid at now; expired ones are dropped.
func (p *guestPool) take(now time.Time, phase, nphase int) map[string][]Guest {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		return nil
	}
	var out map[string][]Guest
	for h, gs := range p.hosts {
		if nphase > 1 && frontier.PhaseOf(frontier.HostHash(h), nphase) != phase {
			continue
		}
		keep := gs[:0]
		for _, g := range gs {
			if now.Before(g.Until) {
				keep = append(keep, g)
			} else {
				delete(p.queued, frontier.Fingerprint(g.URL))
			}
		}
		p.n -= len(gs)
		delete(p.hosts, h)
		if len(keep) > 0 {
			if out == nil {
				out = map[string][]Guest{}
			}
			out[h] = keep
			p.n += len(keep)
		}
	}
	return out
}

// putBack returns guests the bucket refused to the pool.
func (p *guestPool) putBack(host string, gs []Guest) {
	if len(gs) == 0 {
		return
	}
	p.mu.Lock()
	p.hosts[host] = append(p.hosts[host], gs...)
	p.mu.Unlock()
}

// placed forgets that guests are counted in the pool (they are in the bucket).
func (p *guestPool) placed(k int) {
	p.mu.Lock()
	p.n -= k
	p.mu.Unlock()
}

// release forgets guests that left the bucket unfetched (a phase swap, the
// end of a trip): their owner lends them again or fetches them itself.
func (p *guestPool) release(fps []uint64) {
	if len(fps) == 0 {
		return
	}
	p.mu.Lock()
	for _, fp := range fps {
		delete(p.queued, fp)
	}
	p.mu.Unlock()
}

// clear drops every waiting guest (the phase changed).
func (p *guestPool) clear() {
	p.mu.Lock()
	for h, gs := range p.hosts {
		for _, g := range gs {
			delete(p.queued, frontier.Fingerprint(g.URL))
		}
		delete(p.hosts, h)
	}
	p.n = 0
	p.mu.Unlock()
}

// done remembers a guest fetched and reported here.
func (p *guestPool) done(fp uint64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.queued, fp)
	if len(p.fetched) >= maxGuestMemory {
		for k, at := range p.fetched {
			if now.Sub(at) > guestMemory {
				delete(p.fetched, k)
			}
		}
		if len(p.fetched) >= maxGuestMemory {
			for k := range p.fetched { // still full: forget an arbitrary half
				delete(p.fetched, k)
				if len(p.fetched) < maxGuestMemory/2 {
					break
				}
			}
		}
	}
	p.fetched[fp] = now
}

// placeGuests puts the guests of the hosts of phase in the bucket, each
// with its host's element (one trip, one connection per host); the ones the
// bucket refuses now wait in the pool for the next pass.
func (s *scheduler) placeGuests(now time.Time, phase, nphase int) {
	n := s.n
	for host, gs := range n.guests.take(now, phase, nphase) {
		hh := frontier.HostHash(host)
		placed := 0
		for i, g := range gs {
			it := bucket.Item{FP: frontier.Fingerprint(g.URL), URL: g.URL, Depth: g.Depth, Tries: g.Tries, Guest: true}
			switch n.bkt.Add(now, host, hh, it) {
			case bucket.Placed:
				if s.priority(host) {
					s.urgent = append(s.urgent, host)
				}
				placed++
			case bucket.Joined:
				placed++
			default:
				n.guests.placed(placed)
				n.guests.putBack(host, gs[i:])
				placed = -1
			}
			if placed < 0 {
				break
			}
		}
		if placed > 0 {
			n.guests.placed(placed)
		}
	}
}

// guestPage records a guest's fetch like settlePage a page of this node's:
// the links found on it that other members own go to the outbox first,
// then one asynchronous frontier write adds this node's own; once it is
// committed (settled), the outcome goes to the reporter, which sends it to
// the owner and only then writes the page's crawl log line. A failure on
// the way leaves the outcome unreported: the owner fetches the URL again
// later, and nothing is lost.
func (t *hostTrip) guestPage(it bucket.Item, res frontier.Result, entry archive.LogEntry) {
	n := t.n
	if res.FP == 0 || n.lender == nil {
		n.guests.release([]uint64{it.FP})
		return
	}
	res.Delay = t.delay
	rep := &guestReport{out: LentOutcome{URL: it.URL, Depth: it.Depth, Result: res}, entry: entry}
	ctx := n.persistCtx
	if t.failed {
		// The trip's writes fell back to commit: record the links now.
		local, err := n.split.RouteForeign(ctx, t.found)
		if err == nil {
			t.found = nil
			_, err = n.front.Settle(ctx, local, nil, nil)
		}
		if err != nil {
			n.log.Error("record URLs found on a lent page", "error", err)
			n.guests.release([]uint64{it.FP})
			return
		}
		n.reporter.add(rep)
		return
	}
	local, err := n.split.RouteForeign(ctx, t.found)
	if err != nil {
		n.log.Error("route URLs found on a lent page", "error", err, "urls", len(t.found))
		n.guests.release([]uint64{it.FP})
		t.found = nil
		return
	}
	room := t.room()
	t.reserved += room
	t.settling = append(t.settling, settling{p: n.front.SettleAsyncTaking(ctx, t.host, room, local, nil, nil), room: room, guest: rep})
	t.found = nil
	t.poll()
}

// guestReport is a guest's outcome and crawl log line, waiting to be sent.
type guestReport struct {
	out   LentOutcome
	entry archive.LogEntry
}

// reporter sends the outcomes of guests' fetches to their owners in
// batches (one durable outbox write each), then writes their crawl log
// lines; the workers do not wait for it. Run starts it before the workers
// and stops it after them, having sent everything.
type reporter struct {
	n    *Node
	mu   sync.Mutex
	q    []*guestReport
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newReporter(n *Node) *reporter {
	return &reporter{n: n, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// add queues a report.
func (r *reporter) add(rep *guestReport) {
	r.mu.Lock()
	r.q = append(r.q, rep)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run sends the queued reports until stop, then what is left.
func (r *reporter) run() {
	defer close(r.done)
	for {
		select {
		case <-r.wake:
			r.send()
		case <-r.quit:
			r.send()
			return
		}
	}
}

// stop sends what is queued and ends run.
func (r *reporter) stop() {
	close(r.quit)
	<-r.done
}

// send reports every queued outcome in one write, then logs the pages.
func (r *reporter) send() {
	n := r.n
	for {
		r.mu.Lock()
		q := r.q
		r.q = nil
		r.mu.Unlock()
		if len(q) == 0 {
			return
		}
		outs := make([]LentOutcome, len(q))
		for i, rep := range q {
			outs[i] = rep.out
		}
		fps := make([]uint64, len(q))
		for i, rep := range q {
			fps[i] = rep.out.FP
		}
		if err := n.lender.ReportLent(n.persistCtx, outs); err != nil {
			n.log.Error("report lent pages' outcomes to their owners (they will be fetched again)", "error", err, "urls", len(outs))
			n.guests.release(fps)
			continue
		}
		now := time.Now()
		for _, rep := range q {
			n.guests.done(rep.out.FP, now)
			if err := n.clog.Write(rep.entry); err != nil {
				n.log.Error("crawl log", "error", err)
			}
		}
		n.m.GuestsFetched.Add(float64(len(q)))
	}
}
