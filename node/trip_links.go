package node

import (
	"net/url"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/links"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

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
	var page links.Page
	switch {
	case isHTML(resp.ContentType, resp.Body):
		if cfg.Parser == "goquery" {
			page = links.ExtractRequisites(base, resp.Body, cfg.Requisites)
		} else {
			page = links.ExtractFastRequisites(base, resp.Body, cfg.Requisites)
		}
	case cfg.Requisites && mediaType(resp.ContentType) == "text/css":
		page = links.ExtractCSS(base, resp.Body)
	case cfg.Sitemaps != "off" && links.MayBeSitemap(resp.ContentType, resp.Body):
		if kept, ok := t.sitemap(resp.Body, it.Depth); ok {
			return kept
		}
	}
	if len(resp.Header.Values("Link")) > 0 {
		page.Merge(links.FromHeader(base, resp.Header))
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
		// Page links are normalized already (links.Page.Links).
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
	sm, err := links.ParseSitemap(body)
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
		for _, s := range links.RobotsSitemaps(body) {
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
	norm, err := urlscope.Normalize(raw)
	if err != nil {
		t.n.m.OutOfScope.WithLabelValues(invalidReason(err)).Inc()
		return false
	}
	return t.discoverNormalized(norm, depth)
}

// discoverNormalized is discover for a URL urlscope.Normalize returned.
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
