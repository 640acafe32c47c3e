package node

import (
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
)

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
	hosts   map[string][]frontier.Guest
	unit    frontier.Unit             // the politeness unit phases are hashed from (Node.unit)
	queued  map[uint64]frontier.Guest // guests waiting here or placed in the bucket, by fingerprint
	fetched map[uint64]time.Time      // fingerprints fetched (reported) here, and when
	n       int
}

func newGuestPool() *guestPool {
	return &guestPool{hosts: map[string][]frontier.Guest{}, queued: map[uint64]frontier.Guest{}, fetched: map[uint64]time.Time{}}
}

// AddGuests takes the URLs lent to this node (the cluster calls it) and
// returns those it cannot take now (not running, or the pool is full),
// for their owners to have back at once. It drops the ones it holds or
// fetched already, and wakes the scheduler.
func (n *Node) AddGuests(gs []frontier.Guest) (refused []frontier.Guest) {
	if len(gs) == 0 {
		return nil
	}
	if !n.ready.Load() {
		return gs
	}
	var redirects []frontier.NewURL
	p := n.guests
	p.mu.Lock()
	added := 0
	for i, g := range gs {
		fp := frontier.Fingerprint(g.URL)
		if _, ok := p.queued[fp]; ok {
			continue
		}
		if _, ok := p.fetched[fp]; ok {
			// Fetched and reported here, and lent again: the owner has
			// not settled it (its outcome was lost). Given back, so that
			// the lend ends now rather than recurring each epoch; the
			// next holder or the owner fetches it again.
			refused = append(refused, g)
			continue
		}
		if p.n >= maxGuests {
			refused = append(refused, gs[i:]...)
			break
		}
		p.queued[fp] = g
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
	return refused
}

// hostsIn returns the hosts with guests waiting whose phase (of nphase)
// is phase.
func (p *guestPool) hostsIn(phase, nphase int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for h := range p.hosts {
		if nphase <= 1 || frontier.PhaseOf(p.unit.Hash(h), nphase) == phase {
			out = append(out, h)
		}
	}
	return out
}

// take removes and returns up to most of host's guests still valid at
// now, oldest first; expired ones met on the way are dropped. A host
// holds up to maxGuests of them and the scheduler takes a list's worth at
// a time (Bucket.Room), so it reads only what it takes.
func (p *guestPool) take(now time.Time, host string, most int) []frontier.Guest {
	p.mu.Lock()
	defer p.mu.Unlock()
	gs := p.hosts[host]
	var out []frontier.Guest
	i := 0
	for ; i < len(gs) && len(out) < most; i++ {
		if g := gs[i]; now.Before(g.Until) {
			out = append(out, g)
		} else {
			delete(p.queued, frontier.Fingerprint(g.URL))
			p.n--
		}
	}
	if i == len(gs) {
		delete(p.hosts, host)
	} else {
		clear(gs[:i])
		p.hosts[host] = gs[i:]
	}
	return out
}

// lender is the member that lent the guest fp ("" when unknown).
func (p *guestPool) lender(fp uint64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queued[fp].Lender
}

// putBack returns guests the bucket refused to the pool, ahead of the
// host's others (they were taken first).
func (p *guestPool) putBack(host string, gs []frontier.Guest) {
	if len(gs) == 0 {
		return
	}
	p.mu.Lock()
	p.hosts[host] = append(gs[:len(gs):len(gs)], p.hosts[host]...)
	p.mu.Unlock()
}

// placed forgets that guests are counted in the pool (they are in the bucket).
func (p *guestPool) placed(k int) {
	p.mu.Lock()
	p.n -= k
	p.mu.Unlock()
}

// release forgets guests that left the bucket unfetched (a phase swap, the
// end of a trip) and returns them, for their owners to lend or fetch again.
func (p *guestPool) release(fps []uint64) []frontier.Guest {
	if len(fps) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var gs []frontier.Guest
	for _, fp := range fps {
		if g, ok := p.queued[fp]; ok {
			gs = append(gs, g)
			delete(p.queued, fp)
		}
	}
	return gs
}

// clear drops every waiting guest (the phase changed) and returns them.
func (p *guestPool) clear() []frontier.Guest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gs []frontier.Guest
	for h, hs := range p.hosts {
		for _, g := range hs {
			fp := frontier.Fingerprint(g.URL)
			if _, ok := p.queued[fp]; ok {
				gs = append(gs, g)
				delete(p.queued, fp)
			}
		}
		delete(p.hosts, h)
	}
	p.n = 0
	return gs
}

// giveBack returns guests this node will not fetch to their owners.
func (n *Node) giveBack(gs []frontier.Guest) {
	if len(gs) == 0 || n.lender == nil {
		return
	}
	if err := n.lender.ReturnLent(n.persistCtx, gs); err != nil {
		// Their owners lend them again once the marks expire.
		n.log.Warn("return lent URLs to their owners", "error", err, "urls", len(gs))
	}
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
// with its host's element (one trip, one connection per host), as many as
// the bucket takes now (Bucket.Room); the others wait in the pool for the
// next pass.
func (s *scheduler) placeGuests(now time.Time, phase, nphase int) {
	n := s.n
	for _, host := range n.guests.hostsIn(phase, nphase) {
		hh := frontier.HostHash(host)
		room := n.bkt.Room(host, hh)
		if room == 0 {
			continue
		}
		gs := n.guests.take(now, host, room)
		placed := 0
		for i, g := range gs {
			it := bucket.Item{FP: frontier.Fingerprint(g.URL), URL: g.URL, Depth: g.Depth, Run: g.Run, Tries: g.Tries, Guest: true}
			o := n.bkt.Add(now, host, hh, it)
			if o == bucket.Rejected {
				n.guests.putBack(host, gs[i:])
				break
			}
			if o == bucket.Placed && s.priority(host) {
				s.urgent = append(s.urgent, host)
			}
			placed++
		}
		n.guests.placed(placed)
	}
}

// pendingGuest is a guest's fetch being recorded while the trip goes on:
// its own links' frontier write (p, nil when there are none), then the
// outbox write of its outcome (recordGuest). done is closed when it is
// recorded (or failed); added is how many of its links were new.
type pendingGuest struct {
	p       *frontier.Pending
	out     frontier.LentOutcome
	foreign []frontier.NewURL
	entry   archive.LogEntry
	tickets []*archive.Ticket // of its WARC records: the outcome is reported once they are written
	added   int
	done    chan struct{}
}

// guestPage records a guest whose page the trip handled at once (not a
// page to parse: a redirect, an error, a robots.txt refusal): see
// newGuest and startGuest.
func (t *hostTrip) guestPage(it bucket.Item, res frontier.Result, entry archive.LogEntry) {
	n := t.n
	found, tickets := t.found, t.tickets
	t.found, t.tickets = nil, nil
	if res.FP == 0 || n.lender == nil {
		t.collectGuests()
		n.giveBack(n.guests.release([]uint64{it.FP}))
		return
	}
	res.Delay = t.delay
	t.collectGuests()
	n.recording <- struct{}{} // a slot of the node's: released once recorded
	t.startGuest(n.newGuest(it, res, entry, found, tickets))
}

// newGuest starts recording a guest's fetch: the links found on it that
// this node owns go to its frontier (an asynchronous write); recordGuest
// waits for that write, then files the other links and the outcome. It
// runs in the trip's goroutine, or in the page's (pageWork) for a page
// parsed while the trip's next request runs.
func (n *Node) newGuest(it bucket.Item, res frontier.Result, entry archive.LogEntry, found []frontier.NewURL, tickets []*archive.Ticket) *pendingGuest {
	n.shareFacets()
	local, foreign := n.lender.SplitLinks(found)
	g := &pendingGuest{out: frontier.LentOutcome{URL: it.URL, Depth: it.Depth, Lender: n.guests.lender(it.FP), Result: res},
		foreign: foreign, entry: entry, tickets: tickets, done: make(chan struct{})}
	if len(local) > 0 {
		g.p = n.front.Settle(n.persistCtx, frontier.SettleRequest{Found: local})
	}
	return g
}

// startGuest records g while the trip goes on (recordGuest, in a
// goroutine of its own), in a slot of Node.recording the caller took
// before the guest's page was handled: the trip waits for it only before
// it ends (joinGuests), or when the node handles as many guests' pages as
// it has workers (taking a slot). Those writes are group-committed with
// every other trip's, so a host whose URLs are mostly lent is fetched at
// the pace of its requests, not of a durable write per page; and a crash
// loses at most two outcomes per worker: the request in flight and one
// being handled or recorded, on average (their owners' marks expire and
// the URLs are fetched again).
func (t *hostTrip) startGuest(g *pendingGuest) {
	n := t.n
	t.collectGuests()
	t.guests = append(t.guests, g)
	go func() {
		defer close(g.done)
		defer func() { <-n.recording }()
		n.recordGuest(g)
	}()
}

// collectGuests collects the guests recorded already, without waiting.
func (t *hostTrip) collectGuests() { t.reapGuests(len(t.guests)) }

// reapGuests collects the guests recorded already and waits for the
// oldest ones until at most keep are being recorded.
func (t *hostTrip) reapGuests(keep int) {
	for len(t.guests) > 0 {
		g := t.guests[0]
		if len(t.guests) > keep {
			<-g.done
		} else {
			select {
			case <-g.done:
			default:
				return
			}
		}
		t.added += g.added
		t.guests[0] = nil
		t.guests = t.guests[1:]
	}
}

// joinGuests waits for every guest being recorded.
func (t *hostTrip) joinGuests() { t.reapGuests(0) }

// recordGuest records g: once its own links are committed, one durable
// outbox write files the other links for their owners and the outcome for
// the URL's owner; only then is its crawl log line written. A failure on
// the way leaves the outcome unreported: the owner fetches the URL again
// later, and nothing is lost.
func (n *Node) recordGuest(g *pendingGuest) {
	fp := g.out.FP
	if g.p != nil {
		k, err := g.p.Wait()
		if err != nil {
			n.log.Error("record URLs found on a lent page (its owner will have it fetched again)", "error", err, "url", g.out.URL)
			n.guests.release([]uint64{fp})
			return
		}
		g.added = k
	}
	// Reported to its owner only once its WARC records are written: else
	// the owner would record as fetched a page this node's WARC files
	// lack. Its crawl-log line follows the report, as a kill -9 between
	// the two must leave no line of a page its owner does not know fetched
	// (the owner would fetch it again: the crawl logs would show it twice).
	if !n.out.written(g.tickets) {
		n.log.Warn("a lent page's records were not written (its owner will have it fetched again)", "url", g.out.URL)
		n.guests.release([]uint64{fp})
		return
	}
	if err := n.lender.ReportLent(n.persistCtx, g.out, g.foreign); err != nil {
		n.log.Error("report a lent page to its owner (it will have it fetched again)", "error", err, "url", g.out.URL)
		n.guests.release([]uint64{fp}) // not given back: the mark's expiry covers a report that may have been filed
		return
	}
	n.guests.done(fp, time.Now())
	n.m.GuestsFetched.Inc()
	n.out.writeLog(g.entry)
}
