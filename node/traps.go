package node

import (
	"net/url"
	"sync"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch"
)

// traps applies the trap limits (scope.max_segment_repeats,
// scope.max_path_depth, scope.max_query_params, scope.max_pattern_depth,
// scope.max_query_sets) to discovered URLs, and logs the first refusal
// of each host. See docs/design/traps.md.
type traps struct {
	cfg     fetch.TrapConfig
	tracker *fetch.TrapTracker

	mu     sync.Mutex
	logged map[string]bool // hosts whose first refusal was logged
}

// maxTrapLogged bounds the hosts traps remembers having logged; when
// full, it forgets them (a host may then be logged once more).
const maxTrapLogged = 1 << 16

// trapConfig is the trap part of the scope section.
func trapConfig(s config.Scope) fetch.TrapConfig {
	return fetch.TrapConfig{MaxSegmentRepeats: s.MaxSegmentRepeats, MaxPathDepth: s.MaxPathDepth,
		MaxQueryParams: s.MaxQueryParams, MaxPatternDepth: s.MaxPatternDepth, MaxQuerySets: s.MaxQuerySets}
}

func newTraps(s config.Scope) (*traps, error) {
	c := trapConfig(s)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &traps{cfg: c, tracker: fetch.NewTrapTracker(c), logged: map[string]bool{}}, nil
}

// check returns the reason a trap limit refuses u (normalized, found on
// the page from, whose run is fromRun; from is nil when u was not found on
// a page), or "", and u's run (fetch.TrapConfig.Run), which goes with u to
// its frontier record.
func (t *traps) check(u *url.URL, from *url.URL, fromRun int) (reason string, run int) {
	if t == nil {
		return "", 0
	}
	path := u.EscapedPath()
	if r := t.cfg.CheckPath(path, u.RawQuery); r != "" {
		return r, 0
	}
	fromPath, fromQuery := "", ""
	if from != nil && from.Host == u.Host {
		fromPath, fromQuery = from.EscapedPath(), from.RawQuery
	}
	if run, reason = t.cfg.Run(path, u.RawQuery, fromPath, fromQuery, fromRun); reason != "" {
		return reason, run
	}
	return t.tracker.Check(u.Host, path, u.RawQuery), run
}

// firstRefusal reports whether host had no refusal logged yet, and
// remembers it.
func (t *traps) firstRefusal(host string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.logged[host] {
		return false
	}
	if len(t.logged) >= maxTrapLogged {
		clear(t.logged)
	}
	t.logged[host] = true
	return true
}
