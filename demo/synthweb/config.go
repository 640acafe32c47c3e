// Package synthweb is a deterministic synthetic web for the demo (phasecrawl
// demo, phasecrawl synthweb) and for testing and benchmarking crawlers:
// many virtual hosts served by one http.Handler (one loopback listener,
// hosts told apart by the Host header), Zipf-distributed
// site sizes, same-host and cross-host links, robots.txt variants with
// disallowed paths and Crawl-delay, slow and gzip hosts, 404/410 pages,
// redirects, non-HTML files, links a crawler must not follow (rel=nofollow,
// meta robots nofollow, links in comments and scripts) and infinite-calendar
// spider traps.
//
// The web is an independent oracle: it imports nothing from phasecrawl.
// Expected computes exactly which URLs a correct crawler fetches from Seeds;
// ServeHTTP records what a crawler really did (Report) and Check compares
// the two.
package synthweb

import (
	"fmt"
	"strings"
	"time"
)

// Config describes a synthetic web. The same Config always yields a
// byte-identical web.
type Config struct {
	// Seed seeds the generator (math/rand). Default 1.
	Seed int64
	// Hosts is the number of regular hosts, named h0001.<Domain> ... .
	// Default 600, valid 1..99999.
	Hosts int
	// Pages is the number of content pages over all regular hosts (home
	// pages included; 404s, redirects, files, private and bait pages come on
	// top). Default 24000, valid Hosts..Hosts*MaxSitePages.
	Pages int
	// ZipfS is the Zipf exponent of site sizes (size of rank r ∝ 1/r^s).
	// Default 1.0, valid 0..4.
	ZipfS float64
	// MaxSitePages caps the content pages of one site. Default 400, valid
	// 1..100000.
	MaxSitePages int
	// Domain is the parent domain of every host. Default "synth.test".
	Domain string
	// Seeds is the number of seed home pages returned by Seeds. Default 5,
	// valid 1..Hosts.
	Seeds int
	// CrossLinks is the number of extra cross-host links per host (on top
	// of the spanning links that make hosts reachable). Default 3, valid
	// 0..100.
	CrossLinks float64
	// UnlinkedHosts is the fraction of hosts that no followable link points
	// to (only rel=nofollow links and links in comments): a crawler must
	// never fetch them. Default 0.02, valid 0..0.5.
	UnlinkedHosts float64
	// RobotsMissing is the fraction of hosts whose /robots.txt is 404.
	// Default 0.3, valid 0..1.
	RobotsMissing float64
	// RobotsDisallow is the fraction of hosts whose robots.txt disallows
	// /private/ (for "*", for the crawler's own group, or with an Allow
	// exception). RobotsMissing+RobotsDisallow <= 1; the remaining hosts
	// serve an allow-all robots.txt. Default 0.45, valid 0..1.
	RobotsDisallow float64
	// CrawlDelayHosts is the fraction of hosts whose robots.txt has a
	// fractional Crawl-delay (0.03s..0.08s). Default 0.03, valid 0..1.
	CrawlDelayHosts float64
	// CrawlDelayMaxPages: Crawl-delay only goes to sites with at most this
	// many content pages (keeps crawl time bounded). Default 50, valid
	// 1..100000.
	CrawlDelayMaxPages int
	// SlowHosts is the fraction of hosts that sleep SlowMin..SlowMax before
	// every response. Default 0.03, valid 0..1.
	SlowHosts float64
	// SlowMin and SlowMax bound the per-response sleep of a slow host.
	// Defaults 20ms and 50ms, valid 0..10s, SlowMin <= SlowMax.
	SlowMin, SlowMax time.Duration
	// SlowMaxPages: slowness only goes to sites with at most this many
	// content pages. Default 100, valid 1..100000.
	SlowMaxPages int
	// GzipHosts is the fraction of hosts that gzip responses when the
	// request accepts gzip. Default 0.3, valid 0..1.
	GzipHosts float64
	// TrapHosts is the number of spider-trap hosts (trap1.<Domain>, ...)
	// serving an infinite calendar. Default 1, valid 0..99.
	TrapHosts int
	// MinBody and MaxBody bound the size of an HTML content page in bytes.
	// Defaults 2048 and 8192, valid 256..1048576, MinBody <= MaxBody.
	MinBody, MaxBody int
	// ChangeEvery makes a fraction ChangingPages of the pages change every
	// ChangeEvery, counted from New: their 200 responses end with a
	// revision paragraph (their links stay the same). Default 0: no page
	// ever changes. Valid 0..24h, whole seconds (Last-Modified has second
	// resolution).
	ChangeEvery time.Duration
	// ChangingPages is the fraction of pages (chosen by page id) that
	// change every ChangeEvery. Default 0, valid 0..1.
	ChangingPages float64
	// Validators makes the 200 responses of pages carry an ETag and a
	// Last-Modified, and a request whose If-None-Match or
	// If-Modified-Since shows the current revision get 304 Not Modified
	// without a body. Default false.
	Validators bool
}

// DefaultConfig returns the default synthetic web: 600 hosts, 24,000
// content pages, which gives more than 20,000 pages over more than 500
// hosts reachable from the seeds.
func DefaultConfig() Config {
	return Config{
		Seed:               1,
		Hosts:              600,
		Pages:              24000,
		ZipfS:              1.0,
		MaxSitePages:       400,
		Domain:             "synth.test",
		Seeds:              5,
		CrossLinks:         3,
		UnlinkedHosts:      0.02,
		RobotsMissing:      0.3,
		RobotsDisallow:     0.45,
		CrawlDelayHosts:    0.03,
		CrawlDelayMaxPages: 50,
		SlowHosts:          0.03,
		SlowMin:            20 * time.Millisecond,
		SlowMax:            50 * time.Millisecond,
		SlowMaxPages:       100,
		GzipHosts:          0.3,
		TrapHosts:          1,
		MinBody:            2048,
		MaxBody:            8192,
	}
}

// Validate reports the first invalid field, naming the key and its allowed
// range.
func (c Config) Validate() error {
	frac := func(key string, v float64, max float64) error {
		if !(v >= 0 && v <= max) { // also rejects NaN
			return fmt.Errorf("synthweb: %s=%g: must be in 0..%g", key, v, max)
		}
		return nil
	}
	switch {
	case c.Hosts < 1 || c.Hosts > 99999:
		return fmt.Errorf("synthweb: hosts=%d: must be in 1..99999", c.Hosts)
	case c.MaxSitePages < 1 || c.MaxSitePages > 100000:
		return fmt.Errorf("synthweb: max_site_pages=%d: must be in 1..100000", c.MaxSitePages)
	case c.Pages < c.Hosts || c.Pages > c.Hosts*c.MaxSitePages:
		return fmt.Errorf("synthweb: pages=%d: must be in hosts..hosts*max_site_pages (%d..%d)", c.Pages, c.Hosts, c.Hosts*c.MaxSitePages)
	case !(c.ZipfS >= 0 && c.ZipfS <= 4):
		return fmt.Errorf("synthweb: zipf_s=%g: must be in 0..4", c.ZipfS)
	case !validDomain(c.Domain):
		return fmt.Errorf("synthweb: domain=%q: must be a lower-case DNS name with at least two labels, not under .invalid", c.Domain)
	case c.Seeds < 1 || c.Seeds > c.Hosts:
		return fmt.Errorf("synthweb: seeds=%d: must be in 1..hosts (%d)", c.Seeds, c.Hosts)
	case c.CrawlDelayMaxPages < 1 || c.CrawlDelayMaxPages > 100000:
		return fmt.Errorf("synthweb: crawl_delay_max_pages=%d: must be in 1..100000", c.CrawlDelayMaxPages)
	case c.SlowMaxPages < 1 || c.SlowMaxPages > 100000:
		return fmt.Errorf("synthweb: slow_max_pages=%d: must be in 1..100000", c.SlowMaxPages)
	case c.SlowMin < 0 || c.SlowMin > 10*time.Second:
		return fmt.Errorf("synthweb: slow_min=%s: must be in 0..10s", c.SlowMin)
	case c.SlowMax < c.SlowMin || c.SlowMax > 10*time.Second:
		return fmt.Errorf("synthweb: slow_max=%s: must be in slow_min..10s", c.SlowMax)
	case c.TrapHosts < 0 || c.TrapHosts > 99:
		return fmt.Errorf("synthweb: trap_hosts=%d: must be in 0..99", c.TrapHosts)
	case c.MinBody < 256 || c.MinBody > 1<<20:
		return fmt.Errorf("synthweb: min_body=%d: must be in 256..1048576", c.MinBody)
	case c.MaxBody < c.MinBody || c.MaxBody > 1<<20:
		return fmt.Errorf("synthweb: max_body=%d: must be in min_body..1048576", c.MaxBody)
	case c.ChangeEvery < 0 || c.ChangeEvery > 24*time.Hour || c.ChangeEvery%time.Second != 0:
		return fmt.Errorf("synthweb: change_every=%s: must be in 0..24h, whole seconds", c.ChangeEvery)
	}
	for _, f := range []struct {
		key string
		v   float64
		max float64
	}{
		{"cross_links", c.CrossLinks, 100},
		{"unlinked_hosts", c.UnlinkedHosts, 0.5},
		{"robots_missing", c.RobotsMissing, 1},
		{"robots_disallow", c.RobotsDisallow, 1},
		{"crawl_delay_hosts", c.CrawlDelayHosts, 1},
		{"slow_hosts", c.SlowHosts, 1},
		{"gzip_hosts", c.GzipHosts, 1},
		{"changing_pages", c.ChangingPages, 1},
	} {
		if err := frac(f.key, f.v, f.max); err != nil {
			return err
		}
	}
	if c.RobotsMissing+c.RobotsDisallow > 1 {
		return fmt.Errorf("synthweb: robots_missing+robots_disallow=%g: must be in 0..1", c.RobotsMissing+c.RobotsDisallow)
	}
	if c.Hosts-fracCount(c.UnlinkedHosts, c.Hosts) < c.Seeds {
		return fmt.Errorf("synthweb: unlinked_hosts=%g: leaves fewer linked hosts than seeds (%d)", c.UnlinkedHosts, c.Seeds)
	}
	return nil
}

func validDomain(d string) bool {
	if len(d) < 3 || len(d) > 200 || !strings.Contains(d, ".") || strings.HasSuffix(d, ".invalid") || d == "invalid" {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			ch := label[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
				return false
			}
		}
	}
	return true
}

// fracCount is round(f*n), at least 1 when f > 0 and n > 0.
func fracCount(f float64, n int) int {
	k := int(f*float64(n) + 0.5)
	if k == 0 && f > 0 && n > 0 {
		k = 1
	}
	if k > n {
		k = n
	}
	return k
}
