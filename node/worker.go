package node

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
	requeue    []uint64        // fingerprints of this host's URLs to put back in the queue
	guestsBack []uint64        // fingerprints of guests handed back untried (to their owners)
	down       string          // error kind once the host looks unreachable: the rest of the list is STALLED without a try
	held       tripHold        // set once the host asked to be called back later: the rest of the list waits for it
	inactive   bool            // the trip runs in the dead-link lane (deadlane.go)
	downFree   bool            // an adaptive timeout cut the host: the rest of the list goes back to the queue untried

	// The host's pacing (trip_pace.go).
	tripPace
	// The recording of the trip's pages (trip_record.go).
	pageRecording

	found []frontier.NewURL
	from  *url.URL // the page whose links links (or whose Location followRedirect) is collecting (trap limits); nil otherwise
	// fromRun is from's run (frontier.Record.Run): its links' runs count from it.
	fromRun int
	refused refusals // refused links not yet counted in the hosts report (reports.go)

	// The trip's list (trip.go): the element's URLs, then the URLs of this
	// host its pages link to that the frontier took for the trip (Taken),
	// then the refills the scheduler gave it (refill: the one asked for
	// and not answered yet).
	list   tripList
	id     bucket.ElementID
	refill *refillAsk
}

// work fetches one dispatched element. fetchCtx bounds the requests
// themselves; runCtx being done means "start no new request".
func (n *Node) work(fetchCtx, runCtx context.Context, b bucket.Batch) {
	n.workIn(fetchCtx, runCtx, b, false)
}

// workIn is work in a lane: the live one, or the dead-link lane (inactive).
func (n *Node) workIn(fetchCtx, runCtx context.Context, b bucket.Batch, inactive bool) {
	t := &hostTrip{n: n, host: b.Host, hostHash: n.unit.Hash(b.Host), id: b.ID,
		tripPace:      tripPace{delay: n.cfg.Delay},
		pageRecording: pageRecording{sent: make(map[uint64]struct{})},
		list:          tripList{items: b.Items, listCap: n.cfg.Bucket.ListCap, refills: !inactive}, inactive: inactive}
	n.m.DeadLane.WithLabelValues(lane(inactive)).Inc()
	pd := n.deadlines
	if pd != nil {
		t.pd, t.expect = pd, n.lat.expect(b.Host)
		t.last = pd.Handover(n.clock.Now()) // pace the first request after the previous owner's last
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
			ctx, cancel = pd.Bound(fetchCtx, time.Now())
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
		f.wait = max(t.gap()-t.n.clock.Since(t.last), 0)
	}
	if !t.held.until.IsZero() {
		// The host's element waits out its back-off in TIMEWAIT (bounded:
		// its URLs wait in the retry lane, and a long hold would keep a
		// bucket row from other hosts).
		f.wait = max(f.wait, min(t.n.clock.Until(t.held.until), maxBackoffTimeWait))
	}
	if t.requests > 0 {
		f.perPage = t.delay + t.busy/time.Duration(t.requests)
	}
	return f
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
	start := t.n.clock.Now()
	resp, err := t.n.client.Fetch(fctx, u)
	t.last = t.n.clock.Now()
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
		t.putBack(it)
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
			t.putBack(it)
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
		t.putBack(it)
		res.FP = 0
		return
	}
	fctx := ctx
	to, adaptive := t.timeouts()
	if adaptive {
		fctx = fetch.WithTimeouts(ctx, to)
	}
	prev := t.revisitOf(it)
	start := n.clock.Now()
	if !it.Due.IsZero() && it.Tries == 0 {
		n.m.RecrawlLag.Observe(max(start.Sub(it.Due), 0).Seconds())
	}
	resp, err := n.client.FetchConditional(fctx, it.URL, conditional(prev))
	t.last = n.clock.Now()
	t.responded(t.last.Sub(start))
	t.ungate()
	entry.DurationMS = t.last.Sub(start).Milliseconds()
	if err != nil {
		kind := fetch.ErrorKind(err)
		if kind == "canceled" || ctx.Err() != nil {
			t.putBack(it)
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
			t.putBack(it)
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

// stall marks res STALLED (or COMPLETED once its tries are used up, which the
// frontier decides) with a retry time that doubles with every try.
func (t *hostTrip) stall(res *frontier.Result, entry *archive.LogEntry, it bucket.Item, reason, msg string) {
	backoff := t.n.cfg.Fetch.RetryBackoff << min(it.Tries, 16)
	res.State, res.Reason, res.RetryAt = frontier.Stalled, reason, t.n.clock.Now().Add(backoff)
	entry.Reason, entry.Error = reason, msg
}

func (t *hostTrip) archive(resp *fetch.Response) {
	if !t.n.out.archiving() {
		return
	}
	head := archive.HTTPResponseHead(resp.Proto, resp.Status, resp.Header, len(resp.RawBody))
	t.tickets = append(t.tickets, t.n.out.writeWARC(archive.Capture{Target: resp.URL, IP: resp.IP, Request: resp.RequestDump, Response: head, Body: resp.RawBody, Truncated: resp.Truncated,
		Stored: precompressed(resp.Header.Get("Content-Encoding"), resp.ContentType)}))
}

// precompressed reports whether a body sent with this Content-Encoding and
// Content-Type is already compressed, so its WARC record is stored rather
// than deflated again (archive.Capture.Stored).
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
