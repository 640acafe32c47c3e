package node

import (
	"net/url"
	"sync"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// traps applies the trap limits (scope.max_segment_repeats,
// scope.max_path_depth, scope.max_query_params, scope.max_pattern_depth,
// scope.max_query_sets) to discovered URLs, and logs the first refusal
// of each host. See docs/design/traps.md.
type traps struct {
	cfg     urlscope.TrapConfig
	tracker *urlscope.TrapTracker

	// sharing: the facet sets admitted here are kept in shared for the
	// other members (Node.shareFacets); set before the node runs.
	sharing bool

	mu     sync.Mutex
	logged map[string]bool     // hosts whose first refusal was logged
	shared []urlscope.FacetSet // facet sets admitted since the last takeShared
}

// maxTrapShared bounds traps.shared: the sets admitted past it before the
// node hands them on are not told to the other members (each page hands
// them on as it is recorded, which keeps the list short).
const maxTrapShared = 1 << 12

// maxTrapLogged bounds the hosts traps remembers having logged; when
// full, it forgets them (a host may then be logged once more).
const maxTrapLogged = 1 << 16

// trapConfig is the trap part of the scope section.
func trapConfig(s config.Scope) urlscope.TrapConfig {
	return urlscope.TrapConfig{MaxSegmentRepeats: s.MaxSegmentRepeats, MaxPathDepth: s.MaxPathDepth,
		MaxQueryParams: s.MaxQueryParams, MaxPatternDepth: s.MaxPatternDepth, MaxQuerySets: s.MaxQuerySets}
}

func newTraps(s config.Scope) (*traps, error) {
	c := trapConfig(s)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &traps{cfg: c, tracker: urlscope.NewTrapTracker(c), logged: map[string]bool{}}, nil
}

// check returns the reason a trap limit refuses u (normalized, found on
// the page from, whose run is fromRun; from is nil when u was not found on
// a page), or "", and u's run (urlscope.TrapConfig.Run), which goes with u to
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
	reason, set, added := t.tracker.Admit(u.Host, path, u.RawQuery)
	if added && t.sharing {
		t.mu.Lock()
		if len(t.shared) < maxTrapShared {
			t.shared = append(t.shared, set)
		}
		t.mu.Unlock()
	}
	return reason, run
}

// takeShared returns the facet sets admitted since its last call, for the
// other members.
func (t *traps) takeShared() []urlscope.FacetSet {
	if t == nil || !t.sharing {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.shared
	t.shared = nil
	return s
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

// shareFacets hands the facet sets admitted since its last call to the
// other members (ClusterDelegates.Facets): called as each page's links are filed,
// so the sets reach them within moments of the page's fetch.
func (n *Node) shareFacets() {
	if n.facets == nil {
		return
	}
	if sets := n.traps.takeShared(); len(sets) > 0 {
		n.facets.ShareFacets(sets)
	}
}
