package fetch

import (
	"fmt"
	"strings"
	"testing"
)

func TestTrapCheckPath(t *testing.T) {
	c := DefaultTraps()
	deep := "/" + strings.Repeat("d/", 10) + strings.Repeat("e/", 0)
	for i := 0; i < 10; i++ {
		deep += fmt.Sprintf("s%d/", i)
	}
	tests := []struct {
		path, query string
		want        string
	}{
		{"/", "", ""},
		{"/a/a/", "", ""},
		{"/a/a/a/", "", ReasonPathRepeats},
		{"/x/a/b/a/b/", "", ""},
		{"/x/a/b/a/b/a/b/", "", ReasonPathRepeats},
		{"/deep/a/b/a/c/a/", "", ""},
		{"/deep/a/b/a/c/a/d/a/", "", ReasonPathRepeats}, // "a" four times
		{"/2024/01/01/", "", ""},                        // "01" twice in a row
		{"/en/docs/en/guide/en/", "", ""},
		{"/a/b/c/a/b/c/a/b/c/", "", ReasonPathRepeats},
		{"/a//a//a/", "", ReasonPathRepeats}, // empty segments do not separate
		{"/" + strings.Repeat("s/", 1) + "1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/", "", ""},
		{"/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/20/21", "", ReasonPathDepth},
		{deep, "", ReasonPathRepeats},
		{"/p", strings.Repeat("a=1&", 15) + "b=2", ""},
		{"/p", strings.Repeat("a=1&", 16) + "b=2", ReasonQueryParams},
	}
	for _, tt := range tests {
		if got := c.CheckPath(tt.path, tt.query); got != tt.want {
			t.Errorf("CheckPath(%q, %q) = %q, want %q", tt.path, tt.query, got, tt.want)
		}
	}
	if got := (TrapConfig{}).CheckPath("/a/a/a/a/a/", strings.Repeat("a=1&", 40)); got != "" {
		t.Errorf("rules off: %q", got)
	}
}

func TestTrapConfigValidate(t *testing.T) {
	if err := DefaultTraps().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultTraps()
	c.MaxPatternDepth = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "scope.max_pattern_depth=-1") {
		t.Errorf("error %v does not name the key", err)
	}
}

func TestPattern(t *testing.T) {
	for in, want := range map[string]string{
		"/calendar/2024-05/":   "/calendar/#-#/",
		"/calendar/2024-05/17": "/calendar/#-#/#",
		"/docs/page-12.html":   "/docs/page-#.html",
		"/about":               "",
	} {
		got, ok := Pattern(in)
		if ok != (want != "") || (ok && got != want) {
			t.Errorf("Pattern(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// depth10 is the default trap limits with a pattern depth of 10.
func depth10() TrapConfig {
	c := DefaultTraps()
	c.MaxPatternDepth = 10
	return c
}

// TestTrapTracker feeds the tracker the URLs of a calendar (a chain of
// months), a facet shop, a large flat catalogue and a listing, each in
// the order a crawl finds them, and counts what it admits.
func TestTrapTracker(t *testing.T) {
	type url struct {
		path, query string
		depth       int
		from        string // path?query of the page it was found on
	}
	calendar := func(yield func(url) bool) {
		for k := 0; k < 500; k++ { // month k steps after the first, found one link deeper each
			from := "/" // the site's home
			if k > 0 {
				from = fmt.Sprintf("/calendar/%04d-%02d/", 2024+(k-1)/12, 1+(k-1)%12)
			}
			if !yield(url{fmt.Sprintf("/calendar/%04d-%02d/", 2024+k/12, 1+k%12), "", 2 + k, from}) {
				return
			}
		}
	}
	catalogue := func(yield func(url) bool) {
		for k := 0; k < 20000; k++ { // products linked from category pages, 2 to 6 links deep
			if !yield(url{fmt.Sprintf("/product/%d.html", k), "", 2 + k%5, fmt.Sprintf("/product/%d.html", k+1)}) {
				return
			}
		}
	}
	facets := func(yield func(url) bool) {
		names := []string{"brand", "color", "size", "price", "rating", "stock", "shipping", "sale"}
		for mask := 1; mask < 1<<len(names); mask++ {
			var q []string
			n := 0
			for i, name := range names {
				if mask&(1<<i) != 0 {
					q = append(q, name+"=x")
					n++
				}
			}
			if !yield(url{"/shop/shoes", strings.Join(q, "&"), 1 + n, ""}) {
				return
			}
		}
	}
	listing := func(yield func(url) bool) { // a listing's pages linked from the first, and each from the previous one
		for k := 2; k < 300; k++ {
			if !yield(url{"/list", fmt.Sprintf("page=%d", k), 1, "/list?page=1"}) {
				return
			}
			if !yield(url{"/list", fmt.Sprintf("page=%d", k), k, fmt.Sprintf("/list?page=%d", k-1)}) {
				return
			}
		}
	}
	search := func(yield func(url) bool) {
		for k := 0; k < 5000; k++ { // one parameter set, many values, shallow
			if !yield(url{"/search", fmt.Sprintf("q=term%d", k), 1 + k%3, ""}) {
				return
			}
		}
	}
	tests := []struct {
		name      string
		urls      func(func(url) bool)
		admitted  int
		reasonFor string
	}{
		// 11 months with their runs known, then (the generator goes on from
		// the refused months, as if another member had fetched them: their
		// runs unknown here) five steps more before the depth decides.
		{"calendar", calendar, 11 + 5, ReasonURLPattern},
		{"catalogue", catalogue, 20000, ""},
		{"facets", facets, 32, ReasonFacets},
		{"search", search, 5000, ""},
		// Its first page is a seed (depth 0): every page is one link from it,
		// so each run is short and every page is admitted, each time.
		{"listing reached from its first page", listing, 2 * 298, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTrapTracker(depth10())
			admitted, reason, i := 0, "", 0
			for u := range tt.urls {
				i++
				fromPath, fromQuery, _ := strings.Cut(u.from, "?")
				if r := tr.Check("h.example", u.path, u.query, u.depth, fromPath, fromQuery); r == "" {
					admitted++
				} else {
					reason = r
				}
				// other hosts have their own state
				if r := tr.Check("other.example", u.path, u.query, 0, "", ""); r != "" && i <= 10 {
					t.Fatalf("other host refused: %s", r)
				}
			}
			if admitted != tt.admitted || reason != tt.reasonFor {
				t.Errorf("admitted %d (refused as %q), want %d (%q)", admitted, reason, tt.admitted, tt.reasonFor)
			}
		})
	}
}

// TestTrapTrackerShallowerLater: a pattern's depth is the shallowest seen;
// only a step is refused.
func TestTrapTrackerShallowerLater(t *testing.T) {
	tr := NewTrapTracker(depth10())
	for _, c := range []struct {
		path  string
		depth int
		from  string
		want  string
	}{
		{"/p/1", 30, "/a", ""},
		{"/p/2", 5, "/b", ""},
		{"/p/3", 16, "/p/2", ""}, // a step 11 links below the pattern's shallowest, but one step from /b
		{"/p/5", 16, "/p/4", ""}, // 11 links below, the way to /p/4 unknown: one of the five such steps admitted
		{"/p/5", 16, "/p/9", ""}, // not a step
		{"/p/5", 16, "", ""},     // not found on a page of its host
		{"/p/5", 15, "/p/4", ""}, // 10 links below
		{"/q/3", 16, "/p/2", ""}, // another pattern
		{"/r/1", 2, "", ""},      // from another host: no baseline
		{"/r/2", 20, "/s", ""},   // the baseline
		{"/r/3", 30, "/r/2", ""}, // 10 links below it
		{"/r/4", 31, "/r/3", ""}, // 11 links below, but two steps from /s
	} {
		if r := tr.Check("h", c.path, "", c.depth, c.from, ""); r != c.want {
			t.Errorf("Check(%s, depth %d, from %q) = %q, want %q", c.path, c.depth, c.from, r, c.want)
		}
	}
	// Days found on a month page count from one below the months' shallowest:
	// a day step 11 links below that is refused, though it is the first day seen.
	if r := tr.Check("h", "/cal/2026-01/", "", 2, "/", ""); r != "" {
		t.Fatal(r)
	}
	if r := tr.Check("h", "/cal/2026-08/28/", "", 10, "/cal/2026-08/", ""); r != "" {
		t.Fatal(r)
	}
	// Steps whose way is unknown here, deeper than 10 links below: four
	// more are admitted (five in all, with /p/5's), the next one is
	// refused.
	for k := 1; k <= 6; k++ {
		want := ""
		if k == 6 {
			want = ReasonURLPattern
		}
		from, day := fmt.Sprintf("/cal/2026-%02d/28/", k), fmt.Sprintf("/cal/2026-%02d/29/", k)
		if r := tr.Check("h", day, "", 14, from, ""); r != want {
			t.Errorf("day step %d, 11 links below the months' shallowest + 1, way unknown: %q, want %q", k, r, want)
		}
	}
	var nilTracker *TrapTracker
	if r := nilTracker.Check("h", "/p/1", "", 1000, "/p/2", ""); r != "" {
		t.Errorf("nil tracker: %q", r)
	}
}

func TestIsStep(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"/cal/2026-11/?", "/cal/2026-12/?", true},
		{"/cal/2026-12/?", "/cal/2027-01/?", true},
		{"/cal/2027-01/?", "/cal/2026-12/?", true},
		{"/cal/2026-11/30/?", "/cal/2026-12/01/?", true},
		{"/cal/2026-11/?", "/cal/2026-11/01/?", false},
		{"/cal/2026-11/?", "/cal/2026-11/?", false},
		{"/p/7?", "/p/9?", false},
		{"/list?page=7", "/list?page=6", true},
		{"/a/page-12.html?", "/b/page-13.html?", false},
		{"/x/99999999999999999999?", "/x/99999999999999999998?", false},
	} {
		if got := isStep(c.a, c.b); got != c.want {
			t.Errorf("isStep(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// BenchmarkCheckPathLong: the stateless rules on a 1,000-segment path with
// the depth limit off.
func BenchmarkCheckPathLong(b *testing.B) {
	c := DefaultTraps()
	c.MaxPathDepth = 0
	var p strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&p, "/s%d", i%400)
	}
	path := p.String()
	for b.Loop() {
		c.CheckPath(path, "")
	}
}

// TestTrapTrackerMiddleOfSequence: a member of a cluster that meets a
// sequence in its middle (its first page of the pattern found deep, by
// another member) counts the pattern from one below the host's shallowest
// page it fetched, not from that first page.
func TestTrapTrackerMiddleOfSequence(t *testing.T) {
	tr := NewTrapTracker(depth10())
	if r := tr.Check("h", "/page/1.html", "", 2, "/about/", ""); r != "" { // a page of the host at depth 1
		t.Fatal(r)
	}
	if r := tr.Check("h", "/cal/2026-06/", "", 21, "/cal/2026-05/", "x=1"); r != "" { // the way to it unknown here
		t.Fatalf("first month seen: %q", r)
	}
	// Its steps' ways unknown here too: five are admitted, then the depth
	// (20 links below the host's shallowest page) decides.
	for k := 7; k <= 12; k++ {
		want := ""
		if k == 12 {
			want = ReasonURLPattern
		}
		from := fmt.Sprintf("/cal/2026-%02d/", k-1)
		if r := tr.Check("h", fmt.Sprintf("/cal/2026-%02d/", k), "", 22, from, ""); r != want {
			t.Errorf("month %d, 20 links below the host's shallowest page: %q, want %q", k, r, want)
		}
	}
	// Without a shallow page of the host, the first month seen (21 links
	// deep, 20 for its page) is the baseline: 10 steps more are admitted.
	tr = NewTrapTracker(depth10())
	for k := 6; k <= 16; k++ {
		from := fmt.Sprintf("/cal/2026-%02d/", k-1)
		if r := tr.Check("h", fmt.Sprintf("/cal/2026-%02d/", k), "", 15+k, from, ""); r != "" {
			t.Errorf("month %d: %q", k, r)
		}
	}
	// Deeper, the runs unknown: five more, then refused.
	for k := 17; k <= 22; k++ {
		want := ""
		if k == 22 {
			want = ReasonURLPattern
		}
		from := fmt.Sprintf("/cal/2026-%02d/", k-1)
		if r := tr.Check("h", fmt.Sprintf("/cal/2026-%02d/", k), "", 15+k, from, ""); r != want {
			t.Errorf("month %d, %d steps below: %q, want %q", k, k-6, r, want)
		}
	}
}
