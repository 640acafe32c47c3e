package synthweb

import (
	"fmt"
	"strings"
	"time"
)

// robotsRule is one Allow or Disallow line (plain path prefix, no wildcards).
type robotsRule struct {
	path  string
	allow bool
}

// robotsGroup is one group of a robots.txt file.
type robotsGroup struct {
	agents []string // lower-case product tokens, or "*"
	rules  []robotsRule
	delay  time.Duration // Crawl-delay, 0 = none
}

// robotsFile is the model of a host's /robots.txt; the served text is
// rendered from it, so the oracle and the server cannot disagree.
type robotsFile struct {
	status  int // 200 or 404
	comment string
	groups  []robotsGroup
}

// group returns the group that applies to userAgent: the longest group name
// that is a case-insensitive prefix of the user agent (so "phasecrawl"
// matches "phasecrawl/1.0 (+url)"), else "*", else nil. Group names are
// chosen so that RFC 9309 product-token matching gives the same answer.
func (f *robotsFile) group(userAgent string) *robotsGroup {
	if f.status != 200 {
		return nil
	}
	ua := strings.ToLower(userAgent)
	var best *robotsGroup
	bestLen := 0
	for i := range f.groups {
		g := &f.groups[i]
		for _, a := range g.agents {
			switch {
			case a == "*":
				if bestLen < 1 {
					best, bestLen = g, 1
				}
			case strings.HasPrefix(ua, a) && len(a) > bestLen:
				best, bestLen = g, len(a)
			}
		}
	}
	return best
}

// allowed reports whether userAgent may fetch the request URI (path and
// query): the longest matching rule wins, no rule means allowed.
func (f *robotsFile) allowed(userAgent, uri string) bool {
	g := f.group(userAgent)
	if g == nil {
		return true
	}
	allow, best := true, -1
	for _, r := range g.rules {
		if r.path == "" || !strings.HasPrefix(uri, r.path) {
			continue
		}
		if len(r.path) > best || len(r.path) == best && r.allow {
			allow, best = r.allow, len(r.path)
		}
	}
	return allow
}

// delay returns the Crawl-delay that applies to userAgent.
func (f *robotsFile) delay(userAgent string) time.Duration {
	if g := f.group(userAgent); g != nil {
		return g.delay
	}
	return 0
}

// text renders the robots.txt body.
func (f *robotsFile) text() string {
	var b strings.Builder
	if f.comment != "" {
		fmt.Fprintf(&b, "# %s\n", f.comment)
	}
	for i, g := range f.groups {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, a := range g.agents {
			fmt.Fprintf(&b, "User-agent: %s\n", a)
		}
		if g.delay > 0 {
			fmt.Fprintf(&b, "Crawl-delay: %.2f\n", g.delay.Seconds())
		}
		for _, r := range g.rules {
			if r.allow {
				fmt.Fprintf(&b, "Allow: %s\n", r.path)
			} else if r.path == "" {
				b.WriteString("Disallow:\n")
			} else {
				fmt.Fprintf(&b, "Disallow: %s\n", r.path)
			}
		}
	}
	return b.String()
}
