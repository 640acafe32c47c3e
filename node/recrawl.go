package node

import (
	"context"
	"crypto/sha1"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// Recurring crawls: a fetched page is due again after its host's revisit
// interval (recrawl.interval, or its sites: entry's revisit). The frontier
// keeps the due times in an index and the revisit lane releases the due
// URLs into their phases' queues, where the scheduler takes them like any
// queued URL. A revisit is a conditional GET with the page's last
// validators; a 304, or a payload with the last capture's digest, is
// archived as a WARC revisit record and its links are not extracted again.

// revisitSchedule is how the pages of host are revisited (zero Interval:
// they are not).
func (n *Node) revisitSchedule(host string) frontier.Schedule {
	iv := n.cfg.RevisitFor(host)
	if iv <= 0 {
		return frontier.Schedule{}
	}
	r := n.cfg.Recrawl
	return frontier.Schedule{Interval: iv, Adaptive: r.Adaptive, Min: r.MinInterval, Max: r.MaxInterval}
}

// revisitOf returns the page state of a revisit (nil for a first visit, or
// a page without an archived capture to compare with).
func (t *hostTrip) revisitOf(it bucket.Item) *frontier.PageState {
	if it.Due.IsZero() {
		return nil
	}
	rec, ok, err := t.n.front.Get(frontier.Ref{FP: it.FP, Host: t.host})
	if err != nil {
		t.n.log.Error("read a revisited page's state", "url", it.URL, "error", err)
		return nil
	}
	if !ok {
		return nil
	}
	return prevPage(rec)
}

// prevPage returns rec's page state when it has a capture to compare with.
func prevPage(rec frontier.Record) *frontier.PageState {
	if !rec.Page.HasDigest() {
		return nil
	}
	p := rec.Page
	return &p
}

// conditional returns the validators to send with a revisit.
func conditional(prev *frontier.PageState) fetch.Conditional {
	if prev == nil {
		return fetch.Conditional{}
	}
	return fetch.Conditional{ETag: prev.ETag, LastModified: prev.LastModified}
}

// dedupMode is what classify does with the digest index (warc.dedup).
type dedupMode int

const (
	dedupOff    dedupMode = iota // neither: a guest's page (its owner's index is elsewhere)
	dedupRecord                  // record a payload archived in full: a page recovered from its WARC record
	dedupFull                    // look the payload up, and record it when archived in full
)

// dedup reports whether identical payloads are archived as revisit
// records (warc.dedup, with WARC output on).
func (n *Node) dedup() bool { return n.cfg.WARC.Dedup && n.out.archiving() }

// lookupDigest returns the archived capture of the payload sum, if the
// digest index holds one.
func (n *Node) lookupDigest(sum [20]byte) (frontier.Capture, bool) {
	c, ok, err := n.front.LookupDigest(sum)
	if err != nil {
		n.log.Error("digest index", "error", err)
		return frontier.Capture{}, false
	}
	return c, ok
}

// classify compares a response with the page's last capture (prev, nil
// for none) and with the payloads archived before (the digest index, per
// dd), and sets res.Change, res.Page and res.Captured; at is the
// response's capture time. It returns the revisit record to archive
// instead of the response when the page is unchanged, or its payload is
// one archived before (nil otherwise). Pages of hosts that are not
// revisited keep no page state.
func (t *hostTrip) classify(resp *fetch.Response, prev *frontier.PageState, at time.Time, res *frontier.Result, dd dedupMode) *archive.Revisit {
	revisited := t.n.cfg.RevisitFor(t.host) > 0
	if !t.n.dedup() {
		dd = dedupOff
	}
	if prev == nil && !revisited && dd == dedupOff {
		return nil
	}
	m := t.n.m
	etag, lm := resp.Header.Get("Etag"), resp.Header.Get("Last-Modified")
	unchanged := func(profile string) *archive.Revisit {
		res.Change = frontier.Unchanged
		p := *prev
		if etag != "" { // a 304 may update the validators
			p.ETag = etag
		}
		if lm != "" {
			p.LastModified = lm
		}
		res.Page = &p
		m.PagesUnchanged.Inc()
		return &archive.Revisit{Profile: profile, RefersToTargetURI: resp.URL, RefersToDate: prev.Archived,
			PayloadDigest: archive.FormatDigest(prev.Digest)}
	}
	switch {
	case resp.Status == http.StatusNotModified && prev != nil && conditional(prev) != (fetch.Conditional{}):
		// A 304 to a request that sent no validators says nothing of
		// the page: outcome logs it as unsolicited_304.
		rv := unchanged(archive.ProfileNotModified)
		if dd == dedupFull {
			// The last capture may be a revisit record of another URL's
			// capture: refer to that one, archived in full.
			if orig, found := t.n.lookupDigest(prev.Digest); found {
				rv.RefersToTargetURI, rv.RefersToDate = orig.URL, orig.Date
			}
		}
		return rv
	case resp.Status >= 200 && resp.Status < 300 && !resp.Truncated:
		sum := sha1.Sum(resp.RawBody)
		var orig frontier.Capture
		found := false
		if dd == dedupFull {
			orig, found = t.n.lookupDigest(sum)
		}
		if prev != nil && prev.Digest == sum {
			rv := unchanged(archive.ProfileIdenticalPayload)
			if found {
				// The payload's first capture, which may be another URL's
				// (this page's last capture may be a revisit record).
				// Not found: the last capture is a response the digest
				// index does not hold (archived before it, or by another
				// member before the page moved here), not recorded in it.
				rv.RefersToTargetURI, rv.RefersToDate = orig.URL, orig.Date
			}
			return rv
		}
		if prev != nil {
			res.Change = frontier.Changed
			m.PagesChanged.Inc()
		}
		if prev != nil || revisited {
			res.Page = &frontier.PageState{ETag: etag, LastModified: lm, Digest: sum, Archived: at}
		}
		if found {
			m.PagesDuplicate.Inc()
			return &archive.Revisit{Profile: archive.ProfileIdenticalPayload, RefersToTargetURI: orig.URL, RefersToDate: orig.Date,
				PayloadDigest: archive.FormatDigest(sum)}
		}
		if dd != dedupOff {
			res.Captured = &frontier.Capture{Digest: sum, URL: resp.URL, Date: at}
		}
	}
	return nil
}

// archiveAs archives a page's exchange: as a revisit record when rv is
// set, else in full (with the capture time res.Captured or res.Page
// holds, when set: the one the digest index and page state record).
func (t *hostTrip) archiveAs(resp *fetch.Response, res *frontier.Result, rv *archive.Revisit) {
	if !t.n.out.archiving() {
		return
	}
	var date time.Time
	switch {
	case rv != nil:
	case res.Captured != nil:
		date = res.Captured.Date
	case res.Page != nil:
		date = res.Page.Archived
	}
	head := archive.HTTPResponseHead(resp.Proto, resp.Status, resp.Header, len(resp.RawBody))
	x := archive.Capture{Target: resp.URL, IP: resp.IP, Date: date, Request: resp.RequestDump, Response: head, Body: resp.RawBody,
		Truncated: resp.Truncated, Stored: precompressed(resp.Header.Get("Content-Encoding"), resp.ContentType), Revisit: rv}
	t.tickets = append(t.tickets, t.n.out.writeWARC(x))
}

// releaseDue moves the URLs whose revisit is due to the queue, and
// reports whether it moved any.
func (n *Node) releaseDue(ctx context.Context, now time.Time) bool {
	moved := false
	for {
		next, ok := n.front.NextDue()
		if !ok || next.After(now) {
			return moved
		}
		k, err := n.front.ReleaseDue(ctx, now, 1000)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Error("revisit lane", "error", err)
			}
			return moved
		}
		moved = moved || k > 0
		if k < 1000 {
			return moved
		}
	}
}

// initRecrawl registers the due-URL gauge and, in a cluster, keeps due
// records of URLs another member owns (replicas) from being released here.
func (n *Node) initRecrawl() error {
	if n.holder != nil {
		h := n.holder
		n.front.SetDueFilter(func(r frontier.Record) bool { return !h.Held(r.FP) })
	}
	if err := n.m.Registry.Register(n.spareGauge()); err != nil {
		return err
	}
	return n.m.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "phasecrawl_recrawl_due_urls",
		Help: "URLs due for a revisit and not fetched again yet: released to the queue, or past their due time in the due index.",
	}, func() float64 { return float64(n.front.DueURLs(time.Now(), 100000)) }))
}
