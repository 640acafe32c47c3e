package urlscope

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Reasons of the trap limits, as counted in urls_out_of_scope_total.
const (
	ReasonPathRepeats = "path_repeats" // a path segment or a sequence of segments repeated
	ReasonPathDepth   = "path_depth"   // more path segments than scope.max_path_depth
	ReasonQueryParams = "query_params" // more query parameters than scope.max_query_params
	ReasonURLPattern  = "url_pattern"  // a step whose run is over scope.max_pattern_depth
	ReasonFacets      = "facets"       // more parameter combinations on one path than scope.max_query_sets
)

// TrapConfig holds the limits that stop a crawl from following crawler
// traps: URL spaces a site generates without end (calendars, paths that
// grow, facet combinations). A zero field turns its rule off. CheckPath and
// Run apply the rules that need no state beside the URL's own run;
// TrapTracker the one that counts per host.
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
	// MaxPatternDepth: the most steps (the next month, day or page: see
	// Run) on the way a URL was found.
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

// Run applies the pattern rule (MaxPatternDepth) to a URL with the
// escaped path and raw query found on the page fromPath?fromQuery of its
// host, whose run is fromRun: it returns the URL's run and, when the rule
// refuses it, the reason.
//
// The run of a URL is the number of steps on the way it was found: a URL
// that is a step of the page it was found on (the same Pattern and query
// names, and the first number in which the two differ differs by one: the
// next month, day or page) has its page's run plus one; any other link has
// its page's run; a URL without a pattern (no digit, no query), and a URL
// not found on a page of its host (fromPath "": a seed, a link from
// another host, a sitemap's entry of another host), start a run: 0. A step
// whose run is over MaxPatternDepth is refused: an endless sequence
// (a calendar's next month) steps at every link, while a site's pages that
// share a pattern are found, most of them, from pages that are not their
// neighbours. Only steps are refused: a page refused as a step is admitted
// when any other link leads to it.
//
// The run depends on the URL's way alone, not on what the node checked
// before: the caller keeps it with the URL (in its frontier record, and in
// the exchange when another member owns it), so every member of a cluster,
// and a crawl resumed on the same data, decides with the run a node alone
// would have. With the rule off (MaxPatternDepth 0) every run is 0.
func (c TrapConfig) Run(path, rawQuery, fromPath, fromQuery string, fromRun int) (run int, reason string) {
	if c.MaxPatternDepth <= 0 || fromPath == "" {
		return 0, ""
	}
	if _, digits := Pattern(path); !digits && rawQuery == "" {
		return 0, ""
	}
	run = max(fromRun, 0)
	if isStep(fromPath+"?"+fromQuery, path+"?"+rawQuery) {
		run++
		if run > c.MaxPatternDepth {
			return run, ReasonURLPattern
		}
	}
	return run, ""
}

// MaxTrapPatterns is the most parameter-name sets a TrapTracker keeps;
// when it has as many, it forgets them all and starts over.
const MaxTrapPatterns = 1 << 18

// TrapTracker applies the rule that keeps state per host: the facet
// combinations (MaxQuerySets). It is safe for concurrent use. Its memory
// is bounded by MaxTrapPatterns path patterns and MaxTrapPatterns
// parameter-name sets.
type TrapTracker struct {
	cfg TrapConfig

	mu    sync.Mutex
	paths map[uint64]int32    // FacetSet.Path -> distinct name sets seen
	sets  map[uint64]struct{} // FacetSet.Set: name sets seen
}

// FacetSet identifies a set of query parameter names admitted on a path
// pattern of a host: Path is the FNV-1a 64 hash of the host, a zero byte
// and the pattern (Pattern), Set the same hash continued with '?' and the
// sorted, distinct names joined by '&'. The definition is fixed, the same
// in every process, so that the members of a cluster can tell each other
// the sets they admit (TrapTracker.Merge) without the host names.
type FacetSet struct{ Path, Set uint64 }

// NewTrapTracker returns a tracker of c's per-host rules.
func NewTrapTracker(c TrapConfig) *TrapTracker {
	return &TrapTracker{cfg: c, paths: map[uint64]int32{}, sets: map[uint64]struct{}{}}
}

// Check applies the per-host rule to a URL of host with the escaped path
// and raw query: the reason when it refuses it, else "". The distinct sets
// of parameter names on one path pattern (Pattern) of a host are counted;
// past MaxQuerySets, a URL with a new set is refused (facets combined
// without end). A set it admits is remembered.
func (t *TrapTracker) Check(host, path, rawQuery string) string {
	reason, _, _ := t.Admit(host, path, rawQuery)
	return reason
}

// Admit is Check that also returns the URL's set and whether it was
// admitted here for the first time (added), the sets a member tells the
// others (Merge).
func (t *TrapTracker) Admit(host, path, rawQuery string) (reason string, set FacetSet, added bool) {
	if t == nil || t.cfg.MaxQuerySets <= 0 || rawQuery == "" {
		return "", set, false
	}
	pat, _ := Pattern(path)
	set.Path = fnv64a(fnv64a(fnv64a(fnvOffset, host), "\x00"), pat)
	set.Set = fnv64a(fnv64a(set.Path, "?"), queryNames(rawQuery))

	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.sets[set.Set]; seen {
		return "", set, false
	}
	if int(t.paths[set.Path]) >= t.cfg.MaxQuerySets {
		return ReasonFacets, set, false
	}
	t.add(set)
	return "", set, true
}

// Merge adds the sets other members admitted, as if admitted here, and
// returns how many were new: a set admitted anywhere counts everywhere.
// A path may then count more than MaxQuerySets sets (members that
// admitted sets at once); it admits no new one.
func (t *TrapTracker) Merge(sets []FacetSet) int {
	if t == nil || t.cfg.MaxQuerySets <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range sets {
		if _, seen := t.sets[s.Set]; !seen {
			t.add(s)
			n++
		}
	}
	return n
}

// add remembers s, forgetting every set first when the tables are full.
// t.mu is held.
func (t *TrapTracker) add(s FacetSet) {
	if len(t.paths) >= MaxTrapPatterns || len(t.sets) >= MaxTrapPatterns {
		clear(t.paths)
		clear(t.sets)
	}
	t.sets[s.Set] = struct{}{}
	t.paths[s.Path]++
}

// fnvOffset is FNV-1a 64's offset basis.
const fnvOffset = 14695981039346656037

// fnv64a continues the FNV-1a 64 hash h with s.
func fnv64a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
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
