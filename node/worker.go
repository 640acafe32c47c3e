package node

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// hostTrip is one worker's visit to one host: the element's list fetched in
// order over the host's single persistent connection, with the host's delay
// between two requests (robots.txt included).
type hostTrip struct {
	n          *Node
	host       string
	robotsResp *fetch.Response // the robots.txt fetched for the current URL, until parsed (its body budget share)
	hostHash   uint64          // of the host's politeness unit (Node.unit): its phase
	delay      time.Duration   // max(delay, Crawl-delay)
	last       time.Time       // end of the previous request to this host
	results    []frontier.Result
	done       []frontier.NewURL // the URLs of the COMPLETED results not replicated yet (Replicator)
	found      []frontier.NewURL
	requeue    []uint64      // fingerprints of this host's URLs to put back in the queue
	down       string        // error kind once the host looks unreachable: the rest of the list is STALLED without a try
	held       tripHold      // set once the host asked to be called back later: the rest of the list waits for it
	notBefore  time.Time     // the end of the host's back-off pause (backoff.go), when it is short enough to wait for
	grown      time.Duration // the host's delay grown by its back-offs (0: none)
	inactive   bool          // the trip runs in the dead-link lane (deadlane.go)
	downFree   bool          // an adaptive timeout cut the host: the rest of the list goes back to the queue untried
	pd         PhaseDeadline // nil without phases that end
	expect     time.Duration // the host's expected response time (latencies)

	// Each page is recorded as soon as it is done (its links, then its
	// result, in one asynchronous frontier write), so a crash loses at most
	// the pages whose write was not committed yet; commit waits for them
	// all before the element is given back.
	settling []settling
	polled   int  // settling[:polled] are committed (or failed) and replicated
	added    int  // new URLs recorded by the committed settling writes
	failed   bool // a page could not be recorded: the rest of the trip falls back to commit

	guests []*pendingGuest // guests' fetches being recorded while the trip goes on, oldest first (guest.go)
	page   *pageWork       // a page being archived and parsed while the trip goes on
	from   *url.URL        // the page whose links links (or whose Location followRedirect) is collecting (trap limits); nil otherwise
	// fromRun is from's run (frontier.Record.Run): its links' runs count from it.
	fromRun int
	// sent holds the fingerprints of the URLs the trip's page writes
	// carried (at most maxSent; nil: none kept): the links its pages repeat
	// (a site's menus, its home page) are written once a trip, not once a
	// page. Its page works share it, one at a time (joinPage).
	sent map[uint64]struct{}

	// tickets are the tickets of the WARC records written since the last
	// page was kept: that page's result is durable once they and its log
	// line's are written (keep, output.durable).
	tickets []*archive.Ticket

	requests int           // requests sent (robots.txt included)
	slowed   time.Duration // politeness.delay_factor times the last response time (capped)
	unitKey  string        // the host's politeness unit with politeness.key domain
	gated    bool          // the trip holds its unit's gate (Node.gates) for a request
	busy     time.Duration // their response times, summed
	refused  refusals      // refused links not yet counted in the hosts report (reports.go)

	// The trip's list (trip.go): the element's URLs, then the URLs of this
	// host its pages link to that the frontier took for the trip (Taken),
	// then the refills the scheduler gave it (refill: the one asked for
	// and not answered yet).
	list   tripList
	id     bucket.ElementID
	refill *refillAsk
}

// settling is one page's asynchronous frontier write, and the page's URL
// when it was COMPLETED and a Replicator wants it once the write committed.
type settling struct {
	p    *frontier.Pending
	done []frontier.NewURL
	room int      // URLs of this host the write may take for the trip
	fps  []uint64 // the URLs of its results: requeued by commit should the write fail
}

// work fetches one dispatched element. fetchCtx bounds the requests
// themselves; runCtx being done means "start no new request".
func (n *Node) work(fetchCtx, runCtx context.Context, b bucket.Batch) {
	n.workIn(fetchCtx, runCtx, b, false)
}

// workIn is work in a lane: the live one, or the dead-link lane (inactive).
func (n *Node) workIn(fetchCtx, runCtx context.Context, b bucket.Batch, inactive bool) {
	t := &hostTrip{n: n, host: b.Host, hostHash: n.unit.Hash(b.Host), delay: n.cfg.Delay, id: b.ID, sent: make(map[uint64]struct{}),
		list: tripList{items: b.Items, listCap: n.cfg.Bucket.ListCap, refills: !inactive}, inactive: inactive}
	n.m.DeadLane.WithLabelValues(lane(inactive)).Inc()
	pd := n.deadlines
	if pd != nil {
		t.pd, t.expect = pd, n.lat.expect(b.Host)
		t.last = pd.Handover(time.Now()) // pace the first request after the previous owner's last
	}
	t.afterRestart()
	var lim fetch.BodyLimiter
	if n.bwOn {
		// The host's share of the bandwidth budget paces its bodies.
		if l := n.bw.Begin(b.Host); l != nil {
			lim = l
		}
	}
	for t.more() {
		ctx, cancel := fetchCtx, context.CancelFunc(func() {})
		if pd != nil {
			// Taken before the phase check: if the phase ends in between,
			// the deadline is already past and the request is requeued.
			ctx, cancel = context.WithDeadline(fetchCtx, pd.Deadline(time.Now()))
		}
		if runCtx.Err() != nil || fetchCtx.Err() != nil || !t.phaseOpen() {
			cancel()
			break // commit requeues the rest of the list
		}
		t.askRefill()
		it, _ := t.list.pop()
		t.fetchOne(fetch.WithBodyLimiter(ctx, lim), it)
		cancel()
	}
	if n.bwOn {
		// URLs left: the phase is closing (or the node stopping).
		n.bw.End(b.Host, t.list.unstarted() > 0)
	}
	t.end(b.ID)
}

// more reports whether the trip has a URL left to fetch. At the end of the
// list it waits for what may still add to it: the refill asked for (until
// the scheduler has stopped: takeRefill), then the page writes that may take URLs of this host for
// the trip (commit would wait for them anyway).
func (t *hostTrip) more() bool {
	for {
		t.takeRefill(false)
		if t.list.unstarted() > 0 {
			return true
		}
		t.joinPage() // its write may take URLs for the trip
		t.askRefill()
		switch {
		case t.list.waiting():
			// The connection is idle: the scheduler passes over the queue
			// now, and the trip's page writes (URLs of the host it may
			// find there) commit without waiting for more.
			t.refill.dry.Store(true)
			t.n.notify()
			t.hurry()
			if !t.takeRefill(true) {
				return false // the scheduler stopped: commit requeues the list
			}
		case t.list.awaitsWrites():
			t.hurry()
			t.awaitNext()
		default:
			return false
		}
	}
}

// hurry asks the frontier's writer to commit what it gathered now, for
// a trip whose connection is idle until its page writes commit, unless
// a dispatched element waits for a worker (Node.backlogged): then the
// writes wait for their batch like every other, and the worker's time
// is not what bounds the crawl.
func (t *hostTrip) hurry() {
	if !t.n.backlogged.Load() {
		t.n.front.Hurry()
	}
}

// refillAsk is a running trip's request to the scheduler for more URLs of
// its host (scheduler.refill), answered exactly once on reply, with the
// URLs (IN_PROGRESS, the trip's like its list) or none.
type refillAsk struct {
	id    bucket.ElementID
	host  string
	room  int
	reply chan []bucket.Item // buffered: the scheduler never waits
	dry   atomic.Bool        // the trip has nothing left to fetch until the answer
}

// askRefill asks the scheduler for more URLs of the host when the list
// wants them (tripList.refillRoom) and the host is fine (refillable). A
// full request channel counts as a refusal.
func (t *hostTrip) askRefill() {
	if !t.refillable() || t.n.refills == nil {
		return
	}
	room := t.list.refillRoom()
	if room == 0 {
		return
	}
	a := &refillAsk{id: t.id, host: t.host, room: room, reply: make(chan []bucket.Item, 1)}
	select {
	case t.n.refills <- a:
		t.refill = a
		t.list.askedFor(room)
	default:
		t.list.refused()
	}
}

// refillable reports whether the host is fine for more of its URLs: not
// down, not backed off, and its pages recorded.
func (t *hostTrip) refillable() bool {
	return t.down == "" && !t.downFree && !t.failed && t.held.reason == ""
}

// takeRefill takes the answer to the refill asked for, if any: at once
// (!wait), or waiting for it until the scheduler has stopped (it answers
// every refill it took before it stops; one it never took holds no URL).
// It reports whether an answer was taken or none was outstanding. An
// answer already there is always taken, so its URLs (IN_PROGRESS, the
// trip's) go back with the trip's list. The URLs of an answer that comes
// once the host is no longer fine go back to the queue untried.
func (t *hostTrip) takeRefill(wait bool) bool {
	a := t.refill
	if a == nil {
		return true
	}
	var items []bucket.Item
	select {
	case items = <-a.reply:
	default:
		if !wait {
			return false
		}
		select {
		case items = <-a.reply:
		case <-t.n.schedDone:
			select {
			case items = <-a.reply:
			default:
				return false
			}
		}
	}
	t.refill = nil
	ok := t.refillable()
	t.list.refilled(items, ok)
	if ok {
		t.n.m.URLsRefilled.Add(float64(len(items)))
	}
	return true
}

// awaitNext waits for the oldest page write not collected yet and accounts for it.
func (t *hostTrip) awaitNext() {
	s := &t.settling[t.polled]
	k, err := s.p.Wait()
	t.settled(s, k, err)
}

// end makes the trip durable (commit: it waits for the trip's page writes
// and records what is left) and reports its element finished.
func (t *hostTrip) end(id bucket.ElementID) {
	t.commit()
	t.n.done <- t.finished(id)
}

// finished is the trip's report to the scheduler, made once its records are
// committed. The element's TIMEWAIT is what is left of the host's delay
// after the trip's last request: the commit may have used part of it (the
// next request to the host still comes a whole delay after this one's end).
// perPage is what one request of this host costs in time (its delay plus
// its mean response time), for the scheduler's priority lane.
func (t *hostTrip) finished(id bucket.ElementID) finished {
	f := finished{id: id, wait: t.gap(), host: t.host, inactive: t.inactive}
	if !t.last.IsZero() {
		f.wait = max(t.gap()-time.Since(t.last), 0)
	}
	if !t.held.until.IsZero() {
		// The host's element waits out its back-off in TIMEWAIT (bounded:
		// its URLs wait in the retry lane, and a long hold would keep a
		// bucket row from other hosts).
		f.wait = max(f.wait, min(time.Until(t.held.until), maxBackoffTimeWait))
	}
	if t.requests > 0 {
		f.perPage = t.delay + t.busy/time.Duration(t.requests)
	}
	return f
}

// afterRestart paces the trip after the last request an earlier process of
// this node sent to the host (frontier.HostStats: when, and the host's
// delay then, Crawl-delay included), so a restart does not shorten the
// host's pause. Only needed while the longest delay since the start has not
// passed; later every such request is long enough ago.
func (t *hostTrip) afterRestart() {
	n := t.n
	longest := max(n.cfg.Delay, n.cfg.Robots.MaxCrawlDelay)
	if time.Since(n.started) > longest {
		return
	}
	hs, ok, err := n.front.Host(t.host)
	if err != nil || !ok || !hs.LastFetch.Before(n.started) {
		return
	}
	if hs.LastFetch.After(t.last) {
		t.last = hs.LastFetch
	}
	t.delay = max(t.delay, min(hs.Delay, longest))
}

// errPhaseClosed: the host's phase ended (or entered its guard) before a
// request could be sent; the URL goes back to IN_LIST untried.
var errPhaseClosed = fmt.Errorf("node: the host's phase is closing: %w", fetch.ErrAborted)

// phaseOpen reports whether this host's phase is still the node's active
// one and, when phases end, whether a request started now is expected to be
// answered before the phase's request deadline: twice the host's remembered
// response time (at most a quarter of the phase) must fit, so a host known
// to be slow stops early instead of being cut at the swap (its URL would be
// fetched twice).
func (t *hostTrip) phaseOpen() bool {
	now := time.Now()
	phase, nphase, open := t.n.phases.Active(now)
	if !open || frontier.PhaseOf(t.hostHash, nphase) != phase {
		return false
	}
	if t.pd == nil || t.expect == 0 {
		return true
	}
	// Capped at a quarter of the phase: a host slower than that is still
	// tried early in each phase (and may be cut), never starved.
	need := min(2*t.expect, t.n.cfg.Cluster.PhaseDuration/4)
	return now.Add(need).Before(t.pd.Deadline(now))
}

// observe remembers how long the host took to answer.
func (t *hostTrip) observe(d time.Duration) {
	if t.pd == nil {
		return
	}
	t.expect = max(d, t.expect)
	t.n.lat.observe(t.host, d)
}

// pace waits until the host's delay has passed since the previous request.
func (t *hostTrip) pace(ctx context.Context) error {
	if t.last.IsZero() && t.notBefore.IsZero() {
		return t.waitUntil(ctx, time.Time{})
	}
	at := t.notBefore // the larger of the back-off's end and the delay (Crawl-delay included) wins
	if !t.last.IsZero() && t.last.Add(t.gap()).After(at) {
		at = t.last.Add(t.gap())
	}
	return t.waitUntil(ctx, at)
}

// waitUntil waits until at; with politeness.key domain it then takes the
// unit's gate too (ungate gives it back), which may wait longer.
func (t *hostTrip) waitUntil(ctx context.Context, at time.Time) error {
	if g := t.n.gates; g != nil {
		if t.unitKey == "" {
			t.unitKey = t.n.unit(t.host)
		}
		if err := g.acquire(ctx, t.unitKey, at); err != nil {
			return err
		}
		t.gated = true
		return nil
	}
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// ungate gives the unit's gate back (politeness.key domain) once the
// trip's request has ended (or was not sent): the unit's next request,
// from any of its hosts, starts a gap after this one's end.
func (t *hostTrip) ungate() {
	if !t.gated {
		return
	}
	t.gated = false
	var next time.Time
	if !t.last.IsZero() {
		next = t.last.Add(t.gap())
	}
	t.n.gates.release(t.unitKey, next)
}

// responded records a request's response time d: with
// politeness.delay_factor the next request waits at least factor × d.
func (t *hostTrip) responded(d time.Duration) {
	t.requests, t.busy = t.requests+1, t.busy+d
	if f := t.n.cfg.Politeness.DelayFactor; f > 0 {
		t.slowed = min(time.Duration(f*float64(d)), max(t.n.cfg.Delay, t.n.cfg.Robots.MaxCrawlDelay))
	}
}

// robotsGet fetches robots.txt over the host's connection, paced like a page.
func (t *hostTrip) robotsGet(ctx context.Context, u string) (int, http.Header, []byte, error) {
	defer t.ungate()
	if err := t.pace(ctx); err != nil {
		return 0, nil, nil, err
	}
	if !t.phaseOpen() {
		return 0, nil, nil, errPhaseClosed
	}
	fctx := ctx
	to, adaptive := t.timeouts()
	if adaptive {
		fctx = fetch.WithTimeouts(ctx, to)
	}
	start := time.Now()
	resp, err := t.n.client.Fetch(fctx, u)
	t.last = time.Now()
	t.responded(t.last.Sub(start))
	t.ungate()
	if err != nil {
		if adaptive && ctx.Err() == nil && t.n.deadJobs != nil && t.cutBy(to, err) {
			// Not the server's verdict: the robots cache keeps nothing.
			t.adaptiveCut()
			return 0, nil, nil, fmt.Errorf("%w: %w", errAdaptiveCut, err)
		}
		return 0, nil, nil, err
	}
	if t.robotsResp != nil { // a redirect's, done with
		t.robotsResp.ReleaseBudget()
	}
	t.robotsResp = resp // its budget share is given back once parsed (fetchOne)
	t.observe(t.last.Sub(start))
	t.n.times.answer(t.host, resp.ConnectTime)
	t.archive(resp)
	if t.answered(resp.Status, resp.Header) {
		// A back-off: the robots cache keeps nothing, robots.txt is asked
		// again once the pause is over.
		return 0, nil, nil, fmt.Errorf("%w: robots.txt answered HTTP %d", errBackedOff, resp.Status)
	}
	t.robotsSitemaps(u, resp.Status, resp.Body)
	return resp.Status, resp.Header, resp.Body, nil
}

func (t *hostTrip) fetchOne(ctx context.Context, it bucket.Item) {
	n := t.n
	entry := archive.LogEntry{Time: time.Now().UTC(), URL: it.URL}
	res := frontier.Result{FP: it.FP, Host: t.host, State: frontier.Completed}
	async := false // the page is handled by a pageWork, which records it
	defer t.ungate()
	defer func() {
		if !async {
			t.keep(it, res, entry, true)
		}
	}()
	if t.downFree {
		// An adaptive timeout cut the host earlier in this list: the rest
		// goes back to the queue untried, for the dead-link lane.
		t.requeue = append(t.requeue, it.FP)
		res.FP = 0
		return
	}
	if t.down != "" {
		t.stall(&res, &entry, it, t.down, "host unreachable earlier in this list")
		return
	}
	if t.onHold() {
		t.stallHeld(&res, &entry)
		return
	}
	u, err := url.Parse(it.URL)
	if err != nil { // cannot happen for a normalized URL; never panic on it
		res.Reason, entry.Reason, entry.Error = "bad_url", "bad_url", err.Error()
		return
	}
	allowed, crawlDelay, err := n.robots.Check(ctx, u, t.robotsGet)
	if t.robotsResp != nil {
		// Parsed: its memory is out of the body budget's count (the robots
		// cache may keep parts of it).
		t.robotsResp.ReleaseBudget()
		t.robotsResp = nil
	}
	if crawlDelay > t.delay {
		t.delay = crawlDelay
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, errPhaseClosed) || errors.Is(err, errAdaptiveCut) {
			t.requeue = append(t.requeue, it.FP)
			res.FP = 0
			return
		}
		if t.held.reason != "" { // robots.txt's answer was a back-off
			t.stallHeld(&res, &entry)
			return
		}
		kind := fetch.ErrorKind(err)
		n.m.FetchErrors.WithLabelValues("robots_" + kind).Inc()
		n.errs.Add(1)
		if kind == "private_address" {
			res.Reason, entry.Reason, entry.Error = kind, kind, err.Error()
			return
		}
		t.stall(&res, &entry, it, "robots_unavailable", err.Error())
		if fetch.HostUnreachable(err) {
			t.down = kind
		}
		t.failedWith(kind)
		return
	}
	if !allowed {
		n.m.RobotsDenied.Inc()
		res.Reason, entry.Reason = "robots", "robots"
		return
	}
	perr := t.pace(ctx)
	if perr != nil || !t.phaseOpen() {
		t.ungate()
		// The pause may have run into the guard before a phase swap: a
		// request started now could outlive the phase and be cut.
		t.requeue = append(t.requeue, it.FP)
		res.FP = 0
		return
	}
	fctx := ctx
	to, adaptive := t.timeouts()
	if adaptive {
		fctx = fetch.WithTimeouts(ctx, to)
	}
	prev := t.revisitOf(it)
	start := time.Now()
	if !it.Due.IsZero() && it.Tries == 0 {
		n.m.RecrawlLag.Observe(max(start.Sub(it.Due), 0).Seconds())
	}
	resp, err := n.client.FetchConditional(fctx, it.URL, conditional(prev))
	t.last = time.Now()
	t.responded(t.last.Sub(start))
	t.ungate()
	entry.DurationMS = t.last.Sub(start).Milliseconds()
	if err != nil {
		kind := fetch.ErrorKind(err)
		if kind == "canceled" || ctx.Err() != nil {
			t.requeue = append(t.requeue, it.FP)
			res.FP = 0
			return
		}
		n.m.FetchErrors.WithLabelValues(kind).Inc()
		n.errs.Add(1)
		if kind == "private_address" {
			res.Reason, entry.Reason, entry.Error = kind, kind, err.Error()
			return
		}
		if adaptive && n.deadJobs != nil && t.cutBy(to, err) {
			// Cut by the host's derived timeout, not judged by the full
			// one: the URL goes back to the queue untried (no try used
			// up). A host that answered before is tried again by the
			// live workers with the full timeouts; one that never did
			// goes to the dead-link lane, which tries it with them.
			t.adaptiveCut()
			t.requeue = append(t.requeue, it.FP)
			res.FP = 0
			return
		}
		t.stall(&res, &entry, it, kind, err.Error())
		if fetch.HostUnreachable(err) {
			// Only a host that cannot be reached sets the rest of its list
			// aside; a failure inside one response is that URL's alone.
			t.down = kind
		}
		t.failedWith(kind)
		return
	}
	defer func() {
		if !async {
			resp.Release() // nothing below keeps the bodies past this page
		}
	}()
	if n.cfg.Fetch.AdaptiveTimeouts {
		n.times.observe(t.host, t.last.Sub(start))
	}
	n.times.answer(t.host, resp.ConnectTime)
	t.observe(t.last.Sub(start))
	n.m.FetchDuration.Observe(resp.Duration.Seconds())
	n.m.PagesFetched.WithLabelValues(codeLabel(resp.Status)).Inc()
	n.m.BytesFetched.Add(float64(len(resp.RawBody)))
	n.pages.Add(1)
	n.bytes.Add(int64(len(resp.RawBody)))
	dd := dedupFull
	if it.Guest {
		dd = dedupOff
	}
	rv := t.classify(resp, prev, time.Now(), &res, dd)
	if t.answered(resp.Status, resp.Header) {
		t.archiveAs(resp, &res, rv)
		entry.Status, entry.Bytes, entry.MIME = resp.Status, int64(len(resp.RawBody)), mediaType(resp.ContentType)
		res.Status = resp.Status
		t.stallHeld(&res, &entry)
		return
	}
	if rv == nil && resp.Status >= 200 && resp.Status < 300 {
		// A page to archive and parse: done while the next request runs.
		t.outcomeHead(resp, &res, &entry)
		res.Reason, entry.Reason = "ok", "ok"
		t.startPage(&pageWork{it: it, resp: resp, res: res, entry: entry, rv: rv})
		async = true
		return
	}
	t.archiveAs(resp, &res, rv)
	t.outcome(it, resp, rv, &res, &entry)
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
	w.sub = hostTrip{n: t.n, host: t.host, hostHash: t.hostHash, sent: t.sent}
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

// outcome classifies a page's response (archived already) into its result
// and log entry, and collects its links and redirect target.
func (t *hostTrip) outcome(it bucket.Item, resp *fetch.Response, rv *archive.Revisit, res *frontier.Result, entry *archive.LogEntry) {
	t.outcomeHead(resp, res, entry)
	switch {
	case res.Change == frontier.Unchanged:
		// A revisit of an unchanged page (a 304, or the same payload):
		// its links were extracted when it last changed.
		res.Reason, entry.Reason = "ok", "unchanged"
	case rv != nil:
		// The payload of a capture archived before (warc.dedup): its
		// links were extracted from that one.
		res.Reason, entry.Reason = "ok", "duplicate"
	case resp.Status == http.StatusNotModified:
		// A 304 to a request that sent no validators: nothing to compare
		// with, no body, no redirect. Not retried.
		res.Reason, entry.Reason = "unsolicited_304", "unsolicited_304"
	case resp.Status >= 300 && resp.Status < 400:
		res.Reason, entry.Reason = "redirect", "redirect"
		if resp.Location != "" {
			t.followRedirect(it, resp.Location, res, entry)
		}
	case resp.Status >= 500:
		t.stall(res, entry, it, "http_5xx", "HTTP "+strconv.Itoa(resp.Status))
		entry.Status = resp.Status
	case resp.Status >= 400:
		res.Reason, entry.Reason = "http_4xx", "http_4xx"
	default:
		res.Reason, entry.Reason = "ok", "ok"
		entry.Outlinks = t.links(resp, it, entry)
	}
}

// outcomeHead sets what every response gives its result and log entry.
func (t *hostTrip) outcomeHead(resp *fetch.Response, res *frontier.Result, entry *archive.LogEntry) {
	entry.Status, entry.Bytes, entry.MIME, entry.Truncated = resp.Status, int64(len(resp.RawBody)), mediaType(resp.ContentType), resp.Truncated
	res.Status, res.Bytes = resp.Status, int64(len(resp.RawBody))
	if resp.Truncated {
		t.n.m.Truncated.Inc()
	}
}

// keep records a finished page (res.FP 0: none, the URL was requeued): its
// result joins the trip's, its crawl log line is written (when log) and its
// frontier write is submitted.
func (t *hostTrip) keep(it bucket.Item, res frontier.Result, entry archive.LogEntry, log bool) {
	t.joinPage() // the page before, recorded first
	t.countRefused()
	if it.Guest {
		t.guestPage(it, res, entry)
		return
	}
	if res.FP == 0 {
		return
	}
	n := t.n
	t.prepare(it, &res)
	if log {
		t.tickets = append(t.tickets, n.out.writeLog(entry))
	}
	res.Durable, t.tickets = durable(t.tickets), nil
	t.results = append(t.results, res)
	t.settlePage()
}

// prepare completes a page's result with the host's delay and revisit
// schedule, and adds the page to t.done when a Replicator wants it.
func (t *hostTrip) prepare(it bucket.Item, res *frontier.Result) {
	n := t.n
	res.Delay = t.gap()
	// A STALLED result carries it too: the frontier completes a URL whose
	// tries are used up, and it is due again like the others.
	res.Revisit = n.revisitSchedule(t.host)
	if res.State == frontier.Completed && n.repl != nil {
		var due time.Time
		if res.Revisit.Interval > 0 {
			// The replica's copy of the Due the frontier sets (from the
			// base interval: the adaptive history is the owner's).
			due = time.Now().Add(res.Revisit.Interval)
		}
		t.done = append(t.done, frontier.NewURL{URL: it.URL, Host: t.host, Depth: it.Depth, Due: due})
	}
}

// links extracts, scopes and collects the outlinks of a 2xx response: an
// HTML page's links (and its requisites with fetch.requisites), a style
// sheet's requisites (fetch.requisites), a sitemap's URLs, and the Link
// headers of any response. It returns how many were kept, and records the
// page's canonical URL in its log entry. A page whose canonical is another
// URL in scope gives that URL and nothing else (docs/design/links.md).
func (t *hostTrip) links(resp *fetch.Response, it bucket.Item, entry *archive.LogEntry) int {
	defer t.countRefused()
	base, err := url.Parse(resp.URL)
	if err != nil {
		return 0
	}
	if from, err := url.Parse(it.URL); err == nil {
		t.from, t.fromRun = from, it.Run
		defer func() { t.from, t.fromRun = nil, 0 }()
	}
	cfg := &t.n.cfg.Fetch
	var page fetch.Page
	switch {
	case isHTML(resp.ContentType, resp.Body):
		if cfg.Parser == "goquery" {
			page = fetch.ExtractLinksRequisites(base, resp.Body, cfg.Requisites)
		} else {
			page = fetch.ExtractLinksFastRequisites(base, resp.Body, cfg.Requisites)
		}
	case cfg.Requisites && mediaType(resp.ContentType) == "text/css":
		page = fetch.ExtractCSSLinks(base, resp.Body)
	case cfg.Sitemaps != "off" && fetch.MayBeSitemap(resp.ContentType, resp.Body):
		if kept, ok := t.sitemap(resp.Body, it.Depth); ok {
			return kept
		}
	}
	if len(resp.Header.Values("Link")) > 0 {
		page.Merge(fetch.HeaderLinks(base, resp.Header))
	}
	if page.Canonical != "" && page.Canonical != it.URL {
		entry.Canonical = page.Canonical
	}
	if page.NoFollow {
		return 0
	}
	if entry.Canonical != "" && t.discoverNormalized(entry.Canonical, it.Depth) {
		t.n.m.CanonicalPages.Inc()
		return 1
	}
	kept := 0
	for _, l := range t.pageLinks(&page) {
		depth := it.Depth + 1
		switch {
		case l.NoFollow:
			continue
		case l.Requisite:
			if !cfg.Requisites {
				continue
			}
			depth = it.Depth // a requisite is part of its page
		}
		// Page links are normalized already (fetch.Page.Links).
		if t.discoverNormalized(l.URL, depth) {
			kept++
		}
	}
	return kept
}

// sitemap collects the URLs of a sitemap (or the sitemaps of a sitemap
// index) at depth+1 (depth); ok is false when body is not a sitemap. An
// entry's <lastmod> goes with its URL to the URL's owner, where a page
// captured before it is due for a revisit at once (frontier.NewURL.LastMod).
func (t *hostTrip) sitemap(body []byte, depth int) (kept int, ok bool) {
	sm, err := fetch.ParseSitemap(body)
	if err != nil {
		return 0, false
	}
	t.n.m.Sitemaps.Inc()
	if !sm.Index {
		depth++
	}
	for _, e := range sm.Entries {
		if t.discover(e.Loc, depth) {
			t.found[len(t.found)-1].LastMod = e.LastMod
			kept++
		}
	}
	return kept, true
}

// robotsSitemaps collects the sitemaps a host's robots.txt names (and its
// /sitemap.xml with fetch.sitemaps=all) at depth 0: they stand for the
// site's own list of its pages.
func (t *hostTrip) robotsSitemaps(robotsURL string, status int, body []byte) {
	mode := t.n.cfg.Fetch.Sitemaps
	if mode == "off" {
		return
	}
	if status >= 200 && status < 300 {
		for _, s := range fetch.RobotsSitemaps(body) {
			t.discover(s, 0)
		}
	}
	if mode == "all" {
		if u, err := url.Parse(robotsURL); err == nil {
			t.discover(u.Scheme+"://"+u.Host+"/sitemap.xml", 0)
		}
	}
}

// discover normalizes and scopes one discovered URL and keeps it for routing.
func (t *hostTrip) discover(raw string, depth int) bool {
	norm, err := fetch.Normalize(raw)
	if err != nil {
		t.n.m.OutOfScope.WithLabelValues(invalidReason(err)).Inc()
		return false
	}
	return t.discoverNormalized(norm, depth)
}

// discoverNormalized is discover for a URL fetch.Normalize returned.
func (t *hostTrip) discoverNormalized(norm string, depth int) bool {
	n := t.n
	u, err := url.Parse(norm)
	if err != nil {
		return false
	}
	if ok, reason := n.inScope(u, depth); !ok {
		n.m.OutOfScope.WithLabelValues(reason).Inc()
		if reason != "host" { // a host out of scope is never in the hosts report
			t.refuse(u.Host, reason)
		}
		return false
	}
	reason, run := n.traps.check(u, t.from, t.fromRun)
	if reason != "" {
		n.m.OutOfScope.WithLabelValues(reason).Inc()
		t.refuse(u.Host, reason)
		if n.traps.firstRefusal(u.Host) {
			n.log.Info("trap limit: a URL of this host refused (later refusals of the host are counted, not logged)", "host", u.Host, "reason", reason, "url", norm, "depth", depth)
		}
		return false
	}
	n.m.URLsDiscovered.Inc()
	t.found = append(t.found, frontier.NewURL{URL: norm, Host: u.Host, Depth: depth, Run: run})
	return true
}

// stall marks res STALLED (or COMPLETED once its tries are used up, which the
// frontier decides) with a retry time that doubles with every try.
func (t *hostTrip) stall(res *frontier.Result, entry *archive.LogEntry, it bucket.Item, reason, msg string) {
	backoff := t.n.cfg.Fetch.RetryBackoff << min(it.Tries, 16)
	res.State, res.Reason, res.RetryAt = frontier.Stalled, reason, time.Now().Add(backoff)
	entry.Reason, entry.Error = reason, msg
}

func (t *hostTrip) archive(resp *fetch.Response) {
	if !t.n.out.archiving() {
		return
	}
	head := archive.HTTPResponseHead(resp.Proto, resp.Status, resp.Header, len(resp.RawBody))
	t.tickets = append(t.tickets, t.n.out.writeWARC(archive.Exchange{Target: resp.URL, IP: resp.IP, Request: resp.RequestDump, Response: head, Body: resp.RawBody, Truncated: resp.Truncated,
		Stored: precompressed(resp.Header.Get("Content-Encoding"), resp.ContentType)}))
}

// settlePage records the page just finished (the last of t.results) with
// the links found on it: the links owned elsewhere are queued for their
// owners' outboxes first (FileForeign), then one asynchronous frontier
// write adds the local links and records the result, which it keeps as
// fetched only once that outbox write is durable (the frontier's
// before-commit hook waits for it; Result.Durable asks it), so a crash
// or a failed write can lose a fetch but never a discovered URL.
func (t *hostTrip) settlePage() {
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
func (t *hostTrip) unsent(found []frontier.NewURL) []frontier.NewURL {
	if t.sent == nil {
		return found
	}
	out := found[:0]
	for _, u := range found {
		if u.LastMod.IsZero() && u.Redirects == 0 && u.Due.IsZero() {
			fp := frontier.Fingerprint(u.URL)
			if _, ok := t.sent[fp]; ok {
				continue
			}
			if len(t.sent) < maxSent {
				t.sent[fp] = struct{}{}
			}
		}
		out = append(out, u)
	}
	return out
}

// dropGuests returns fps without the trip's guests (another member owns
// their records), which the guest pool forgets: their owners lend them
// again or fetch them.
func (t *hostTrip) dropGuests(fps []uint64) []uint64 {
	var guests map[uint64]bool
	for _, it := range t.list.all() {
		if it.Guest {
			if guests == nil {
				guests = map[uint64]bool{}
			}
			guests[it.FP] = true
		}
	}
	if guests == nil {
		return fps
	}
	var dropped []uint64
	fps = slices.DeleteFunc(fps, func(fp uint64) bool {
		if guests[fp] {
			dropped = append(dropped, fp)
			return true
		}
		return false
	})
	t.n.giveBack(t.n.guests.release(dropped))
	return fps
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
		t.requeue = append(t.requeue, it.FP)
	}
	t.requeue = t.dropGuests(t.requeue)
	added := t.added
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

// precompressed reports whether a body sent with this Content-Encoding and
// Content-Type is already compressed, so its WARC record is stored rather
// than deflated again (archive.Exchange.Stored).
func precompressed(encoding, contentType string) bool {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
	default:
		return true // gzip, deflate, br, zstd, ...
	}
	switch mt := mediaType(contentType); {
	case mt == "image/jpeg", mt == "image/png", mt == "image/gif", mt == "image/webp", mt == "image/avif",
		strings.HasPrefix(mt, "video/"), mt == "audio/mpeg", mt == "audio/aac", mt == "audio/ogg",
		mt == "application/zip", mt == "application/gzip", mt == "application/x-gzip", mt == "application/zstd",
		mt == "application/x-7z-compressed", mt == "application/x-bzip2", mt == "application/x-xz",
		mt == "font/woff", mt == "font/woff2":
		return true
	}
	return false
}

func codeLabel(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status)
}

func mediaType(ct string) string {
	if ct == "" || isBareMediaType(ct) {
		return ct // as mime.ParseMediaType (or the fallback below) would return it
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	}
	return mt
}

func isHTML(ct string, body []byte) bool {
	if ct == "" {
		ct = http.DetectContentType(body)
	}
	mt := mediaType(ct)
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// isBareMediaType reports whether ct is printable ASCII without spaces,
// upper-case letters or parameters ("text/html", as fetch.Response's
// ContentType always is): mediaType returns such a string unchanged.
func isBareMediaType(ct string) bool {
	for i := 0; i < len(ct); i++ {
		if c := ct[i]; c <= ' ' || c >= 0x7f || c == ';' || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}
