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

// classify compares a response with the page's last capture (prev, nil
// for none) and sets res.Change and res.Page; at is the response's capture
// time. It returns the revisit record to archive instead of the response
// when the page is unchanged (nil otherwise). Pages of hosts that are not
// revisited keep no page state (no digest is computed for them).
func (t *hostTrip) classify(resp *fetch.Response, prev *frontier.PageState, at time.Time, res *frontier.Result) *archive.Revisit {
	if prev == nil && t.n.cfg.RevisitFor(t.host) <= 0 {
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
		return unchanged(archive.ProfileNotModified)
	case resp.Status >= 200 && resp.Status < 300 && !resp.Truncated:
		sum := sha1.Sum(resp.RawBody)
		if prev != nil && prev.Digest == sum {
			return unchanged(archive.ProfileIdenticalPayload)
		}
		if prev != nil {
			res.Change = frontier.Changed
			m.PagesChanged.Inc()
		}
		res.Page = &frontier.PageState{ETag: etag, LastModified: lm, Digest: sum, Archived: at}
	}
	return nil
}

// archiveAs archives a page's exchange: as a revisit record when rv is
// set, else in full (page, when set, holds the capture time to use).
func (t *hostTrip) archiveAs(resp *fetch.Response, page *frontier.PageState, rv *archive.Revisit) {
	if !t.n.out.archiving() {
		return
	}
	var date time.Time
	if page != nil && rv == nil {
		date = page.Archived
	}
	head := archive.HTTPResponseHead(resp.Proto, resp.Status, resp.Header, len(resp.RawBody))
	x := archive.Exchange{Target: resp.URL, IP: resp.IP, Date: date, Request: resp.RequestDump, Response: head, Body: resp.RawBody,
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
