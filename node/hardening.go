package node

import (
	"errors"
	"fmt"
	"net/url"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/links"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// redirectMemory is how many redirect targets remember their chain length.
const redirectMemory = 1 << 16

// hardening holds what protects the node from hostile pages: the redirect
// chain lengths and the count of URLs refused over a host's cap (the API
// token is package api's).
type hardening struct {
	redirects   *lru.Cache[uint64, uint8] // fingerprint of a redirect target -> hops from its chain's start
	overHostCap prometheus.CounterFunc    // URLs the frontier refused over max_pages_per_host
}

// initHardening builds the redirect memory and registers the hardening
// metrics.
func (n *Node) initHardening() error {
	h := &hardening{}
	var err error
	if h.redirects, err = lru.New[uint64, uint8](redirectMemory); err != nil {
		return fmt.Errorf("redirect memory: %w", err)
	}
	front := n.front
	h.overHostCap = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "phasecrawl_urls_over_host_cap_total", Help: "Discovered URLs refused because their host reached scope.max_pages_per_host (traps, infinite URL spaces).",
	}, func() float64 { return float64(front.Skipped()) })
	if err := n.m.Registry.Register(h.overHostCap); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	n.hard.Store(h)
	return nil
}

// followRedirect routes a 3xx's Location unless the chain that led here is already
// fetch.max_redirects long: then the target is dropped and the URL is COMPLETED as
// "redirect_limit". Chain lengths are remembered per target (in memory, bounded).
func (t *hostTrip) followRedirect(it bucket.Item, loc string, res *frontier.Result, entry *archive.LogEntry) {
	n := t.n
	entry.Redirect = loc
	hops := 1
	if hd := n.hard.Load(); hd != nil {
		if h, ok := hd.redirects.Get(it.FP); ok {
			hops = int(h) + 1
		}
	}
	if limit := n.cfg.Fetch.MaxRedirects; hops > limit {
		n.m.OutOfScope.WithLabelValues("redirects").Inc()
		res.Reason, entry.Reason = "redirect_limit", "redirect_limit"
		entry.Error = fmt.Sprintf("redirect chain longer than fetch.max_redirects=%d: Location not followed", limit)
		return
	}
	// The target counts as found on the page that redirected to it (the
	// trap limits' runs): a sequence of redirects to the next page is one.
	if from, err := url.Parse(it.URL); err == nil {
		t.from, t.fromRun = from, it.Run
		defer func() { t.from, t.fromRun = nil, 0 }()
	}
	if !t.discover(loc, it.Depth+1) {
		return
	}
	t.found[len(t.found)-1].Redirects = hops // for its owner, should another member own it
	entry.Outlinks = 1
	if hd := n.hard.Load(); hd != nil {
		if norm, err := urlscope.Normalize(loc); err == nil {
			hd.redirects.Add(frontier.Fingerprint(norm), uint8(hops))
		}
	}
}

// pageLinks returns the links of a page to follow: the first fetch.max_outlinks of them. The
// hrefs that were not links and those over the cap are counted in urls_out_of_scope_total.
func (t *hostTrip) pageLinks(page *links.Page) []links.Link {
	oos := t.n.m.OutOfScope
	d := page.Dropped
	for _, c := range []struct {
		reason string
		n      int
	}{{"scheme", d.Scheme}, {"too_long", d.TooLong}, {"bad_host", d.BadHost + d.BadPort}, {"invalid", d.Invalid}} {
		if c.n > 0 {
			oos.WithLabelValues(c.reason).Add(float64(c.n))
		}
	}
	links := page.Links
	if limit := t.n.cfg.Fetch.MaxOutlinks; limit > 0 && len(links) > limit {
		oos.WithLabelValues("outlinks_cap").Add(float64(len(links) - limit))
		links = links[:limit]
	}
	return links
}

// invalidReason is the urls_out_of_scope_total reason of a URL Normalize refused: one of
// scheme, too_long, bad_host (a host that is not a DNS name or IP literal, or a port
// outside 1..65535) or invalid (a bounded set of label values).
func invalidReason(err error) string {
	switch {
	case errors.Is(err, urlscope.ErrScheme):
		return "scheme"
	case errors.Is(err, urlscope.ErrTooLong):
		return "too_long"
	case errors.Is(err, urlscope.ErrHost), errors.Is(err, urlscope.ErrPort):
		return "bad_host"
	}
	return "invalid"
}

// RememberRedirects implements the cluster's RedirectMemory: the redirect
// chain lengths of targets another member found, so that fetch.max_redirects
// counts a chain across members.
func (n *Node) RememberRedirects(urls []frontier.NewURL) {
	hd := n.hard.Load()
	if hd == nil {
		return
	}
	for _, u := range urls {
		if u.Redirects > 0 {
			hd.redirects.Add(frontier.Fingerprint(u.URL), uint8(min(u.Redirects, 255)))
		}
	}
}

// RedirectsOf is the redirect chain length remembered for the URL with
// fingerprint fp (0: none), which travels with the URL when the cluster
// lends it to another member.
func (n *Node) RedirectsOf(fp uint64) int {
	hd := n.hard.Load()
	if hd == nil {
		return 0
	}
	if h, ok := hd.redirects.Get(fp); ok {
		return int(h)
	}
	return 0
}
