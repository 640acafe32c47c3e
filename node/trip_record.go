package node

import (
	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// pageRecording is the recording of a trip's pages. Each page is recorded
// as soon as it is done (its links, then its result, in one asynchronous
// frontier write), so a crash loses at most the pages whose write was not
// committed yet; commit waits for them all before the element is given
// back.
type pageRecording struct {
	results  []frontier.Result
	done     []frontier.NewURL // the URLs of the COMPLETED results not replicated yet (Replicator)
	settling []settling
	polled   int  // settling[:polled] are committed (or failed) and replicated
	added    int  // new URLs recorded by the committed settling writes
	failed   bool // a page could not be recorded: the rest of the trip falls back to commit

	guests []*pendingGuest // guests' fetches being recorded while the trip goes on, oldest first (guest.go)
	page   *pageWork       // a page being archived and parsed while the trip goes on
	// sent holds the fingerprints of the URLs the trip's page writes
	// carried (at most maxSent; nil: none kept): the links its pages repeat
	// (a site's menus, its home page) are written once a trip, not once a
	// page. Its page works share it, one at a time (joinPage).
	sent map[uint64]struct{}

	// tickets are the tickets of the WARC records written since the last
	// page was kept: that page's result is durable once they and its log
	// line's are written (keep, output.durable).
	tickets []*archive.Ticket
}

// settling is one page's asynchronous frontier write, and the page's URL
// when it was COMPLETED and a Replicator wants it once the write committed.
type settling struct {
	p    *frontier.Pending
	done []frontier.NewURL
	room int      // URLs of this host the write may take for the trip
	fps  []uint64 // the URLs of its results: requeued by commit should the write fail
}

// awaitNext waits for the oldest page write not collected yet and accounts for it.
func (t *hostTrip) awaitNext() {
	s := &t.settling[t.polled]
	k, err := s.p.Wait()
	t.settled(s, k, err)
}

// pageWork is a fetched page's handling that runs while the trip's next
// request does (the connection stays busy): in order, archiving its
// exchange, extracting its links (into sub, a hostTrip of its own), its
// crawl log line, then its frontier write (the links owned elsewhere
// queued for the outbox first, LocalSplitter.FileForeign: the write
// records the page as fetched only once they are durable), as keep and
// settlePage do for the other pages. A lent page (a guest) is archived and
// parsed so too, then recorded by recordGuest. The trip starts one at a
// time and joins it (joinPage) before it records anything else, so pages
// are recorded in order, each after its WARC records and log line, and a
// crash loses at most the pages whose write was not committed, as before.
type pageWork struct {
	it    bucket.Item
	resp  *fetch.Response
	res   frontier.Result
	entry archive.LogEntry
	rv    *archive.Revisit
	sub   hostTrip
	room  int               // URLs of the host its write may take for the trip
	p     *frontier.Pending // its write; nil when the links could not be routed
	guest *pendingGuest     // a guest's recording (it.Guest), started by joinPage
	done  chan struct{}
}

// startPage starts w once the page before it is recorded; a trip whose
// pages cannot be recorded one by one (failed) handles it at once.
func (t *hostTrip) startPage(w *pageWork) {
	t.joinPage()
	w.sub = hostTrip{n: t.n, host: t.host, hostHash: t.hostHash, pageRecording: pageRecording{sent: t.sent}}
	if t.failed {
		w.run()
		t.page = w
		t.joinPage()
		return
	}
	if w.it.Guest {
		// Another member's URL: its outcome and links are recorded by
		// recordGuest once the page is parsed (newGuest, startGuest), in
		// a slot of the node's taken now, so that the guests' pages
		// handled or recorded at once stay within one per worker.
		w.res.Delay = t.delay
		t.collectGuests()
		t.n.recording <- struct{}{}
	} else {
		t.prepare(w.it, &w.res)
		w.sub.done, t.done = t.done, nil
		w.room = t.list.takingRoom(t.down == "")
		t.list.reserved += w.room
	}
	w.done = make(chan struct{})
	t.page = w
	go func() {
		defer close(w.done)
		w.run()
		// Archived and read for links: the bodies and their share of the
		// memory budget go back now, not when the trip joins the page
		// (its next fetch may be waiting for that share).
		w.resp.Release()
		n := t.n
		n.shareFacets()
		if w.it.Guest {
			if n.lender != nil {
				w.guest = n.newGuest(w.it, w.res, w.entry, w.sub.found, w.sub.tickets)
			}
			return
		}
		rec := durable(append(w.sub.tickets, n.out.writeLog(w.entry)))
		local, filed, err := n.split.FileForeign(n.persistCtx, w.sub.unsent(w.sub.found))
		if err != nil {
			n.log.Error("route discovered URLs", "error", err, "urls", len(w.sub.found))
			return // joinPage hands the page and its links to commit
		}
		w.res.Durable = both(rec, filed)
		w.p = n.front.Settle(n.persistCtx, frontier.SettleRequest{Found: local, Results: []frontier.Result{w.res}, Take: &frontier.Take{Host: w.sub.host, Room: w.room}})
	}()
}

// run archives w's exchange and extracts its links.
func (w *pageWork) run() {
	w.sub.archiveAs(w.resp, &w.res, w.rv)
	w.entry.Outlinks = w.sub.links(w.resp, w.it, &w.entry)
}

// joinPage waits for the page being handled while the trip went on, if
// any, and takes its frontier write among the trip's (or, when it could
// not be made, the page and its links for commit).
func (t *hostTrip) joinPage() {
	w := t.page
	if w == nil {
		return
	}
	t.page = nil
	if w.done == nil { // handled at once (startPage): recorded like any page
		w.resp.Release()
		t.tickets = append(t.tickets, w.sub.tickets...)
		t.found = append(t.found, w.sub.found...)
		t.keep(w.it, w.res, w.entry, true)
		return
	}
	<-w.done
	w.resp.Release()
	if w.it.Guest {
		if w.guest == nil { // no Lender: not lent after all
			<-t.n.recording
			t.collectGuests()
			t.n.giveBack(t.n.guests.release([]uint64{w.it.FP}))
			return
		}
		t.startGuest(w.guest)
		return
	}
	if w.p == nil {
		t.failed = true
		t.list.reserved -= w.room
		t.results = append(t.results, w.res)
		t.found = append(t.found, w.sub.found...)
		t.done = append(t.done, w.sub.done...)
		return
	}
	t.settling = append(t.settling, settling{p: w.p, done: w.sub.done, room: w.room, fps: []uint64{w.res.FP}})
	t.list.wrote()
	t.poll()
}

// settlePage records the page just finished (the last of t.results) with
// the links found on it: the links owned elsewhere are queued for their
// owners' outboxes first (FileForeign), then one asynchronous frontier
// write adds the local links and records the result, which it keeps as
// fetched only once that outbox write is durable (the frontier's
// before-commit hook waits for it; Result.Durable asks it), so a crash
// or a failed write can lose a fetch but never a discovered URL.
func (t *hostTrip) settlePage() {
	t.n.shareFacets()
	if t.failed {
		return // recorded by commit at the end of the trip
	}
	n := t.n
	local, filed, err := n.split.FileForeign(n.persistCtx, t.unsent(t.found))
	if err != nil {
		// Keep the page and its links for commit, which tries again.
		n.log.Error("route discovered URLs", "error", err, "urls", len(t.found))
		t.failed = true
		return
	}
	res := t.results[len(t.results)-1:]
	res[0].Durable = both(res[0].Durable, filed)
	room := t.list.takingRoom(t.down == "" && !t.failed)
	t.list.reserved += room
	p := n.front.Settle(n.persistCtx, frontier.SettleRequest{Found: local, Results: res, Take: &frontier.Take{Host: t.host, Room: room}})
	t.settling = append(t.settling, settling{p: p, done: t.done, room: room, fps: []uint64{res[0].FP}})
	t.list.wrote()
	t.results, t.found, t.done = nil, nil, nil // owned by the write now
	t.poll()
}

// maxSent bounds hostTrip.sent.
const maxSent = 1 << 16

// unsent returns found without the URLs an earlier page write of the trip
// carried already (in place). Such a URL is durable once that write is,
// and writes commit in order, so the page that repeats it loses nothing:
// should the earlier write fail, its page stays IN_PROGRESS and is fetched
// again after a restart, links and all. A URL with more to say than its
// address (a sitemap's lastmod, a redirect count, a revisit's due time)
// is always sent.
func (r *pageRecording) unsent(found []frontier.NewURL) []frontier.NewURL {
	if r.sent == nil {
		return found
	}
	out := found[:0]
	for _, u := range found {
		if u.LastMod.IsZero() && u.Redirects == 0 && u.Due.IsZero() {
			fp := frontier.Fingerprint(u.URL)
			if _, ok := r.sent[fp]; ok {
				continue
			}
			if len(r.sent) < maxSent {
				r.sent[fp] = struct{}{}
			}
		}
		out = append(out, u)
	}
	return out
}

// putBack hands it back untried: a URL of this node's to the queue (commit
// requeues t.requeue), a guest to its owner (t.guestsBack). A guest and a
// URL of this node's may share a fingerprint (the URL changed owner while
// lent), so which one goes back is the item's, not the fingerprint's.
func (t *hostTrip) putBack(it bucket.Item) {
	if it.Guest {
		t.guestsBack = append(t.guestsBack, it.FP)
		return
	}
	t.requeue = append(t.requeue, it.FP)
}

// refs is the frontier.Refs of fingerprints of the trip's host.
func (t *hostTrip) refs(fps []uint64) []frontier.Ref {
	refs := make([]frontier.Ref, len(fps))
	for i, fp := range fps {
		refs[i] = frontier.Ref{FP: fp, Host: t.host}
	}
	return refs
}

// poll collects the page writes committed so far (they commit in order)
// and replicates their completed pages.
func (t *hostTrip) poll() {
	for t.polled < len(t.settling) {
		s := &t.settling[t.polled]
		done, k, err := s.p.Poll()
		if !done {
			return
		}
		t.settled(s, k, err)
	}
}

// settled accounts for one committed page write: its new URLs, and the
// replication of its completed page, which must follow the commit (a
// replica of a page whose record was lost would keep it, and its links,
// from ever being crawled again).
func (t *hostTrip) settled(s *settling, added int, err error) {
	t.polled++
	t.list.reserved -= s.room
	t.list.committedWrite()
	for _, tk := range s.p.Taken() {
		if h := t.n.holder; h != nil && h.Held(tk.FP) {
			// Its owner, counting the members away, is away (cluster): it
			// waits in the queue like the scheduler's held URLs.
			t.requeue = append(t.requeue, tk.FP)
			continue
		}
		t.list.items = append(t.list.items, bucket.Item{FP: tk.FP, URL: tk.URL, Depth: tk.Depth, Run: tk.Run, Due: tk.Due})
		t.n.m.URLsTaken.Inc()
	}
	if err != nil {
		// The page stays IN_PROGRESS: commit puts it back to the queue,
		// to be fetched again, links and all (after a restart if commit
		// fails too).
		t.n.log.Error("record fetched page", "error", err)
		t.n.storageFailed(storeFrontier, err)
		if t.n.persistCtx.Err() == nil {
			t.requeue = append(t.requeue, s.fps...)
		}
		return
	}
	t.added += added
	t.replicate(s.done)
}

// replicate sends the URLs of completed pages whose records are committed
// to the node that keeps their second copy (cluster), without waiting for
// the write (Replicator.QueueReplicas). A failure only costs a page
// crawled again should this node fail: it is logged, not retried.
func (t *hostTrip) replicate(done []frontier.NewURL) {
	if len(done) == 0 {
		return
	}
	if err := t.n.repl.QueueReplicas(t.n.persistCtx, done); err != nil {
		t.n.log.Warn("replicate completed URLs", "error", err, "urls", len(done))
	}
}

// commit makes the trip durable: it waits for the pages settled one by one
// and records what is left in one write (pages not recorded yet with their
// links — the links routed first, so a crash can lose a fetch but never a
// discovered URL — and the URLs the trip did not get to).
func (t *hostTrip) commit() {
	n := t.n
	ctx := n.persistCtx
	t.joinPage()
	t.joinGuests()
	for t.polled < len(t.settling) {
		t.awaitNext()
	}
	// What the trip did not get to (it was stopped, or its last writes
	// took URLs it has no time for now) goes back to the queue.
	// A refill still unanswered is waited for (the scheduler answers at the
	// end of its pass, at once while the phase is closed): its URLs are the
	// trip's and go back with the rest. A node that stops recovers them.
	t.takeRefill(true)
	for _, it := range t.list.rest() {
		t.putBack(it)
	}
	if len(t.guestsBack) > 0 {
		t.n.giveBack(t.n.guests.release(t.guestsBack))
		t.guestsBack = nil
	}
	added := t.added
	n.shareFacets()
	// A write that fails (a full disk) is tried again until it goes
	// through or the node stops: the disk guard pauses the node
	// meanwhile, and space may come back.
	found := t.unsent(t.found)
	var local []frontier.NewURL
	var err error
	for try := 0; ; try++ {
		if local, err = n.split.RouteForeign(ctx, found); err == nil {
			break
		}
		n.log.Error("route discovered URLs", "error", err, "urls", len(found), "try", try+1)
		n.storageFailed(storeOutbox, err)
		if !n.retryWrite(ctx, try, err) {
			return
		}
	}
	var k int
	for try := 0; ; try++ {
		if k, err = n.front.Settle(ctx, frontier.SettleRequest{Found: local, Results: t.results, Requeue: t.refs(t.requeue)}).Wait(); err == nil {
			break
		}
		n.log.Error("record host trip", "error", err, "urls", len(local), "results", len(t.results), "try", try+1)
		n.storageFailed(storeFrontier, err)
		if !n.retryWrite(ctx, try, err) {
			// The node stops: the pages stay IN_PROGRESS, and on restart
			// they are fetched again and their links found again.
			return
		}
	}
	t.replicate(t.done)
	added += k
	n.m.URLsNew.Add(float64(added))
	if added > 0 || len(t.requeue) > 0 {
		n.notify()
	}
}
