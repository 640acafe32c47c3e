package fetch

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
)

// Reasons of the trap limits, as counted in urls_out_of_scope_total.
const (
	ReasonPathRepeats = "path_repeats" // a path segment or a sequence of segments repeated
	ReasonPathDepth   = "path_depth"   // more path segments than scope.max_path_depth
	ReasonQueryParams = "query_params" // more query parameters than scope.max_query_params
	ReasonURLPattern  = "url_pattern"  // a URL pattern grown deeper than scope.max_pattern_depth
	ReasonFacets      = "facets"       // more parameter combinations on one path than scope.max_query_sets
)

// TrapConfig holds the limits that stop a crawl from following crawler
// traps: URL spaces a site generates without end (calendars, paths that
// grow, facet combinations). A zero field turns its rule off.
// docs/design/traps.md describes each rule and its default.
type TrapConfig struct {
	// MaxSegmentRepeats: the most times a sequence of path segments may
	// repeat in a row (/a/a/a/, /a/b/a/b/a/b/ have three copies), and,
	// plus one, the most times one segment may occur in the whole path.
	MaxSegmentRepeats int
	// MaxPathDepth: the most path segments.
	MaxPathDepth int
	// MaxQueryParams: the most query parameters (after canonicalization).
	MaxQueryParams int
	// MaxPatternDepth: how many links deeper than the shallowest URL of
	// its pattern on its host a URL may be found (see Pattern).
	MaxPatternDepth int
	// MaxQuerySets: the most distinct sets of query parameter names
	// admitted on one path pattern of a host (facet combinations).
	MaxQuerySets int
}

// DefaultTraps are the trap limits a node uses unless configured.
func DefaultTraps() TrapConfig {
	return TrapConfig{MaxSegmentRepeats: 2, MaxPathDepth: 20, MaxQueryParams: 16, MaxPatternDepth: 10, MaxQuerySets: 32}
}

// Validate checks the ranges; errors name the configuration key.
func (c TrapConfig) Validate() error {
	for _, f := range []struct {
		key    string
		v, max int
	}{{"scope.max_segment_repeats", c.MaxSegmentRepeats, 1000}, {"scope.max_path_depth", c.MaxPathDepth, 1000},
		{"scope.max_query_params", c.MaxQueryParams, 1000}, {"scope.max_pattern_depth", c.MaxPatternDepth, 100000},
		{"scope.max_query_sets", c.MaxQuerySets, 100000}} {
		if f.v < 0 || f.v > f.max {
			return fmt.Errorf("%s=%d: must be in 0..%d (0 = off)", f.key, f.v, f.max)
		}
	}
	return nil
}

// CheckPath applies the rules that need no state to a normalized URL's
// escaped path and raw query: the reason when one refuses it, else "".
func (c TrapConfig) CheckPath(path, rawQuery string) string {
	if c.MaxPathDepth > 0 || c.MaxSegmentRepeats > 0 {
		segs := pathSegments(path)
		if c.MaxPathDepth > 0 && len(segs) > c.MaxPathDepth {
			return ReasonPathDepth
		}
		if c.MaxSegmentRepeats > 0 && repeatsSegments(segs, c.MaxSegmentRepeats) {
			return ReasonPathRepeats
		}
	}
	if c.MaxQueryParams > 0 && rawQuery != "" && strings.Count(rawQuery, "&")+1 > c.MaxQueryParams {
		return ReasonQueryParams
	}
	return ""
}

// pathSegments returns the non-empty segments of path.
func pathSegments(path string) []string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		return nil
	}
	return slices.DeleteFunc(segs, func(s string) bool { return s == "" })
}

// maxRepeatedSequence is the longest sequence of segments whose repetition
// repeatsSegments looks for (bounds its work on long paths).
const maxRepeatedSequence = 16

// repeatsSegments reports whether a sequence of segments (at most
// maxRepeatedSequence long) occurs more than n times in a row, or one
// segment more than n+1 times in all.
func repeatsSegments(segs []string, n int) bool {
	if len(segs) <= n {
		return false
	}
	count := make(map[string]int, len(segs))
	for _, s := range segs {
		count[s]++
		if count[s] > n+1 {
			return true
		}
	}
	for l := 1; l <= maxRepeatedSequence && l*(n+1) <= len(segs); l++ {
		for i := 0; i+l*(n+1) <= len(segs); i++ {
			copies := 1
			for j := i + l; j+l <= len(segs) && slices.Equal(segs[i:i+l], segs[j:j+l]); j += l {
				copies++
			}
			if copies > n {
				return true
			}
		}
	}
	return false
}

// Pattern is the shape of a URL's path that its variants share: every run
// of digits replaced by "#" ("/calendar/2024-05/17/" ->
// "/calendar/#-#/#/"). ok is false when the path has no digit: such a
// path is a single page, no pattern.
func Pattern(path string) (pattern string, ok bool) {
	if strings.IndexAny(path, "0123456789") < 0 {
		return path, false
	}
	var b strings.Builder
	b.Grow(len(path))
	digits := false
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c >= '0' && c <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteByte(c)
	}
	return b.String(), true
}

// queryNames returns the sorted, distinct parameter names of a raw query,
// joined by "&".
func queryNames(rawQuery string) string {
	params := strings.Split(rawQuery, "&")
	names := make([]string, 0, len(params))
	for _, p := range params {
		n, _, _ := strings.Cut(p, "=")
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), "&")
}

// MaxTrapPatterns is the most URL patterns a TrapTracker keeps; when it
// has as many, it forgets them all and starts over.
const MaxTrapPatterns = 1 << 18

// TrapTracker applies the per-host rules, which keep state: the pattern
// depth (MaxPatternDepth) and the facet combinations (MaxQuerySets). It
// is safe for concurrent use. Its memory is bounded by MaxTrapPatterns
// patterns and MaxTrapPatterns parameter-name sets.
type TrapTracker struct {
	cfg  TrapConfig
	seed maphash.Seed

	mu       sync.Mutex
	patterns map[uint64]patternState // hash(host, pattern, names) -> state
	paths    map[uint64]int32        // hash(host, path pattern) -> distinct name sets seen
	sets     map[uint64]struct{}     // hash(host, path pattern, names): name sets seen
	// runs holds, for the URLs with a pattern found here, the steps on the
	// way they were found (see Check); a URL not in it was found elsewhere
	// (another member, before a restart) or forgotten.
	runs map[uint64]uint8 // hash(host, path, query) -> steps
	// hosts holds the shallowest depth of a page of each host whose links
	// were checked here: no pattern of the host is shallower than one
	// below it.
	hosts map[uint64]int32 // hash(host) -> depth
}

// unknownSteps is how many steps deeper than maxDepth below their
// pattern's shallowest, their runs unknown, a tracker admits for one
// pattern: half the pattern depth, at least one.
func unknownSteps(maxDepth int) int { return max(1, maxDepth/2) }

type patternState struct {
	minDepth int32
	// steps counts the steps of the pattern admitted here deeper than
	// MaxPatternDepth below its shallowest whose run was not known (found
	// on a page another member found): the depth alone would refuse the
	// pages of a real site that a cluster's crawl reaches deep, so such a
	// step is refused only once unknownSteps of them were admitted (a
	// site's pages link to the next number by chance, a few times a
	// pattern; an endless sequence does at every page).
	steps int32
}

// NewTrapTracker returns a tracker of c's per-host rules.
func NewTrapTracker(c TrapConfig) *TrapTracker {
	return &TrapTracker{cfg: c, seed: maphash.MakeSeed(), patterns: map[uint64]patternState{}, paths: map[uint64]int32{}, sets: map[uint64]struct{}{},
		runs: map[uint64]uint8{}, hosts: map[uint64]int32{}}
}

// Check applies the per-host rules to a URL of host with the escaped path
// and raw query, found at link depth depth on the page fromPath?fromQuery
// of the same host ("" when it was not found on a page of its host: a
// seed, a redirect, a sitemap, a link from another host): the reason when
// one refuses it, else "". A URL it admits is remembered.
//
// The pattern of a URL is its path's Pattern with the names of its query
// parameters. The shallowest depth at which a URL of a pattern was found
// on a page of its host is remembered (a link from another host may lead
// deep into a site, to a page shallower than the site's own); a URL found
// on a page of another pattern counts as found one link below that
// pattern's shallowest (the day pages of a calendar's month are as deep
// as the month, for a member of a cluster that fetched only later months
// too). A URL that is a step of the page it was found on (the
// same pattern, and the first number in which the two differ differs by
// one: the next month, day or page) is refused when it lies more than
// MaxPatternDepth links deeper than that: an endless sequence grows one
// link deeper at each step, while a site's pages of one pattern link to
// each other at about the same depth, and a page refused as a step is
// still admitted when another link leads to it. When the tracker found
// the page on the way from a page without a pattern itself (one node
// alone), it also knows the run of the URL, the steps on that way (a
// link that is not a step keeps its page's run): a URL is then refused
// only if its run, too, is over MaxPatternDepth, so a page of a real site
// that lies deep only because the crawl happened to find it late is not
// refused. The distinct sets of
// parameter names on one path pattern are counted; past MaxQuerySets, a
// URL with a new set is refused (facets combined without end).
func (t *TrapTracker) Check(host, path, rawQuery string, depth int, fromPath, fromQuery string) string {
	if t == nil || (t.cfg.MaxPatternDepth <= 0 && t.cfg.MaxQuerySets <= 0) {
		return ""
	}
	pat, digits := Pattern(path)
	if !digits && rawQuery == "" {
		return ""
	}
	names := ""
	if rawQuery != "" {
		names = queryNames(rawQuery)
	}
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(host)
	hostKey := h.Sum64()
	h.WriteByte(0)
	h.WriteString(pat)
	pathKey := h.Sum64()
	h.WriteByte('?')
	h.WriteString(names)
	key := h.Sum64()
	step := fromPath != "" && isStep(fromPath+"?"+fromQuery, path+"?"+rawQuery)
	urlKey := t.urlKey(host, path, rawQuery)
	var fromURLKey uint64
	fromPlain := true // the page has no pattern: no step leads to it, its run is 0
	if fromPath != "" {
		if _, ok := Pattern(fromPath); ok || fromQuery != "" {
			fromURLKey, fromPlain = t.urlKey(host, fromPath, fromQuery), false
		}
	}
	var fromKey uint64
	fromPat := false
	if fromPath != "" && !step {
		if fp, ok := Pattern(fromPath); ok || fromQuery != "" {
			h.Reset()
			h.WriteString(host)
			h.WriteByte(0)
			h.WriteString(fp)
			h.WriteByte('?')
			if fromQuery != "" {
				h.WriteString(queryNames(fromQuery))
			}
			fromKey, fromPat = h.Sum64(), true
		}
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.patterns) >= MaxTrapPatterns || len(t.sets) >= MaxTrapPatterns {
		clear(t.patterns)
		clear(t.paths)
		clear(t.sets)
	}
	if len(t.runs) >= maxTrapRuns {
		clear(t.runs)
	}
	if len(t.hosts) >= MaxTrapPatterns {
		clear(t.hosts)
	}
	d := int32(min(depth, 1<<30))
	hostMin, hostSeen := t.hosts[hostKey]
	if fromPath != "" && (!hostSeen || d-1 < hostMin) {
		hostMin, hostSeen = d-1, true // the page the URL was found on
		t.hosts[hostKey] = hostMin
	}
	// The run of u: the steps on the way it was found, when this tracker
	// saw the whole way (its page's run is known). A URL not found on a
	// page of its host (a seed, a redirect, a link from another host)
	// starts a way: its run is 0.
	run, runKnown := 0, fromPath == ""
	if fromPath != "" {
		if fromPlain {
			runKnown = true
		} else if r, ok := t.runs[fromURLKey]; ok {
			run, runKnown = int(r), true
		} else if depth == 1 {
			runKnown = true // its page is a seed (depth 0): the way starts there
		}
		if step {
			run++
		}
	}
	newSet := false
	if t.cfg.MaxQuerySets > 0 && rawQuery != "" {
		if _, seen := t.sets[key]; !seen {
			if int(t.paths[pathKey]) >= t.cfg.MaxQuerySets {
				return ReasonFacets
			}
			newSet = true
		}
	}
	st, seen := t.patterns[key]
	if step && seen && t.cfg.MaxPatternDepth > 0 && d > st.minDepth && int(d-st.minDepth) > t.cfg.MaxPatternDepth {
		switch {
		case runKnown && run > t.cfg.MaxPatternDepth:
			return ReasonURLPattern
		case !runKnown && int(st.steps) >= unknownSteps(t.cfg.MaxPatternDepth):
			return ReasonURLPattern
		case !runKnown && st.steps < math.MaxInt32:
			st.steps++
			t.patterns[key] = st
		}
	}
	if runKnown {
		if r, ok := t.runs[urlKey]; !ok || int(r) > run {
			t.runs[urlKey] = uint8(min(run, 255))
		}
	}
	if fromPath != "" {
		base := d
		if fromPat { // found on a page of another pattern: no deeper than one below that pattern's shallowest
			if fs, ok := t.patterns[fromKey]; ok && fs.minDepth+1 < base {
				base = fs.minDepth + 1
			}
		}
		if hostSeen && hostMin+1 < base {
			// A pattern counts from no deeper than one below the host's
			// shallowest page here: a member that meets a sequence in its
			// middle, before its start, knows where the host begins.
			base = hostMin + 1
		}
		if !seen {
			t.patterns[key] = patternState{minDepth: base}
		} else if base < st.minDepth {
			st.minDepth = base
			t.patterns[key] = st
		}
	}
	if newSet {
		t.sets[key] = struct{}{}
		t.paths[pathKey]++
	}
	return ""
}

// maxTrapRuns bounds the runs a TrapTracker keeps (about 20 MB); when
// full, it forgets them, and the pattern depth alone decides.
const maxTrapRuns = 1 << 20

func (t *TrapTracker) urlKey(host, path, rawQuery string) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(host)
	h.WriteByte(0)
	h.WriteString(path)
	h.WriteByte('?')
	h.WriteString(rawQuery)
	return h.Sum64()
}

// isStep reports whether the URL b (path?query) is a step from a: both
// the same once every run of digits is replaced, and the first number in
// which they differ differs by one (/cal/2026-12/ -> /cal/2027-01/,
// /day/30 -> /day/31, ?page=7 -> ?page=6).
func isStep(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		da, db := isDigit(ca), isDigit(cb)
		if da != db {
			return false
		}
		if !da {
			if ca != cb {
				return false
			}
			i++
			j++
			continue
		}
		si, sj := i, j
		for i < len(a) && isDigit(a[i]) {
			i++
		}
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		na, nb := a[si:i], b[sj:j]
		if na == nb {
			continue
		}
		va, ok1 := smallNumber(na)
		vb, ok2 := smallNumber(nb)
		if !ok1 || !ok2 || (va-vb != 1 && vb-va != 1) {
			return false
		}
		// the rest must have the same shape (digits may differ: a rollover)
		pa, _ := Pattern(a[i:])
		pb, _ := Pattern(b[j:])
		return pa == pb
	}
	return false // equal, or one ends first
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func smallNumber(s string) (int64, bool) {
	if len(s) > 18 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		v = v*10 + int64(s[i]-'0')
	}
	return v, true
}

// Len is the number of patterns the tracker remembers.
func (t *TrapTracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.patterns)
}
