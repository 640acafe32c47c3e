package node

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// archivedPage is a response found in a WARC file left by a crash whose
// URL the frontier still has waiting.
type archivedPage struct {
	rec       frontier.Record
	block     []byte
	truncated bool
	at        time.Time        // WARC-Date
	rv        *archive.Revisit // a revisit record (block: the HTTP head alone)
}

// recoverArchived settles the pages an earlier process of this node fetched
// and archived but had not recorded when it was killed, from the WARC files
// it left open (crashed, output.crashed): a response record, or a revisit
// record (recoverRevisit). A page is archived
// (one write(2) of its WARC records) before its frontier write is even
// submitted, and the frontier commits in groups, so after kill -9 the
// frontier has the last pages fetched back IN_LIST while the WARC file left
// open holds their responses. Each such response is classified again as the
// worker did (its links extracted, its redirect followed), and the page is
// recorded as if just fetched — routed, replicated and logged to the
// frontier like any other — so only the requests that were in flight are
// sent again. It runs once at start, before the scheduler, and returns the
// number of pages it settled. A page it cannot rebuild is left IN_LIST (it
// is fetched again).
func (n *Node) recoverArchived(ctx context.Context, crashed []string) (int, error) {
	found := map[uint64]*archivedPage{}
	for _, path := range crashed {
		err := archive.EachCapture(path, func(h archive.RecordHeader, block []byte) error {
			target := h.TargetURI
			ref := frontier.RefOf(target)
			rec, ok, err := n.front.Get(ref)
			if err != nil {
				return err
			}
			if !ok || rec.URL != target || rec.State != frontier.InList && rec.State != frontier.InProgress {
				return nil // recorded already (or robots.txt, or not ours)
			}
			// A URL waiting again (a STALLED retry, later a revisit) was
			// recorded after this response: not the one lost.
			at := h.Date
			if at.IsZero() || !rec.Fetched.IsZero() && !rec.Fetched.Before(at) {
				return nil
			}
			// The latest response of a URL is the one not recorded.
			found[ref.FP] = &archivedPage{rec: rec, block: block, truncated: h.Truncated, at: at, rv: h.Revisit}
			return nil
		})
		if err != nil {
			// A bad record ends the file's scan; what was found before stays.
			n.log.Warn("read a WARC file left by the crash", "file", path, "error", err)
		}
	}
	if len(found) == 0 {
		return 0, nil
	}
	// The crawl log line of a page is written after its WARC records, so the
	// kill may have come between the two: the lines of the last moments are
	// read back (the file's tail only) and a page without one gets it now.
	oldest := time.Now()
	for _, p := range found {
		oldest = minTime(oldest, p.at)
	}
	logged, err := n.out.loggedSince(oldest.Add(-time.Minute), 2*time.Minute)
	if err != nil {
		return 0, fmt.Errorf("node: recover archived pages: %w", err)
	}
	byHost := map[string][]*archivedPage{}
	for _, p := range found {
		byHost[p.rec.Host] = append(byHost[p.rec.Host], p)
	}
	hosts := make([]string, 0, len(byHost))
	for h := range byHost {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	settled := 0
	for _, host := range hosts {
		pages := byHost[host]
		refs := make([]frontier.Ref, len(pages))
		for i, p := range pages {
			refs[i] = p.rec.Ref()
		}
		// Settle takes results of IN_PROGRESS URLs only.
		if err := n.front.MarkInProgress(ctx, refs); err != nil {
			return settled, fmt.Errorf("node: recover %d archived pages of %s: %w", len(refs), host, err)
		}
		t := &hostTrip{n: n, host: host, hostHash: n.unit.Hash(host), tripPace: tripPace{delay: n.cfg.Delay}}
		for _, p := range pages {
			it := bucket.Item{FP: p.rec.FP, URL: p.rec.URL, Depth: p.rec.Depth, Run: p.rec.Run, Tries: p.rec.Tries, Due: p.rec.Due}
			if p.rv != nil {
				if t.recoverRevisit(it, p, !logged[p.rec.URL]) {
					settled++
				}
				continue
			}
			resp, err := fetch.FromRecord(p.rec.URL, p.block, p.truncated, n.cfg.Fetch.MaxBodySize)
			if err != nil {
				n.log.Warn("archived response not usable: the page is fetched again", "url", p.rec.URL, "error", err)
				t.requeue = append(t.requeue, p.rec.FP)
				continue
			}
			res := frontier.Result{FP: it.FP, Host: host, State: frontier.Completed}
			entry := archive.LogEntry{Time: p.at, URL: p.rec.URL} // its duration is not archived
			// A full response was archived: the page changed (or was new).
			t.classify(resp, prevPage(p.rec), p.at, &res, dedupRecord)
			t.outcome(it, resp, nil, &res, &entry)
			t.keep(it, res, entry, !logged[p.rec.URL])
			settled++
		}
		t.commit()
	}
	return settled, nil
}

// recoverRevisit settles a page archived as a revisit record (unchanged
// since its last capture, or the payload of another capture, warc.dedup)
// as the worker did: its links are not extracted. It reports whether it
// did; a record it cannot read leaves the page to be fetched again.
func (t *hostTrip) recoverRevisit(it bucket.Item, p *archivedPage, log bool) bool {
	n := t.n
	resp, err := fetch.HeadFromRecord(p.rec.URL, p.block)
	sum, ok := archive.ParseDigest(p.rv.PayloadDigest)
	if err != nil || !ok {
		n.log.Warn("archived revisit not usable: the page is fetched again", "url", p.rec.URL, "error", err)
		t.requeue = append(t.requeue, p.rec.FP)
		return false
	}
	res := frontier.Result{FP: it.FP, Host: t.host, State: frontier.Completed}
	entry := archive.LogEntry{Time: p.at, URL: p.rec.URL}
	t.outcomeHead(resp, &res, &entry)
	res.Reason, entry.Reason = "ok", "duplicate"
	prev := prevPage(p.rec)
	switch {
	case prev != nil && prev.Digest == sum:
		res.Change, entry.Reason = frontier.Unchanged, "unchanged"
		page := *prev
		res.Page = &page
	case prev != nil || n.cfg.RevisitFor(t.host) > 0:
		if prev != nil {
			res.Change = frontier.Changed
		}
		res.Page = &frontier.PageState{ETag: resp.Header.Get("Etag"), LastModified: resp.Header.Get("Last-Modified"), Digest: sum, Archived: p.at}
	}
	t.keep(it, res, entry, log)
	return true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
