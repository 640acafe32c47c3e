package urlscope

import (
	"fmt"
	"hash/fnv"
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

// crawlRuns follows a site the way a crawl does, breadth first from "/",
// with the run each URL was first found with (what its frontier record
// keeps): links(path?query) gives a page's links. It returns the pages
// admitted and the reasons of the refusals.
func crawlRuns(c TrapConfig, links func(page string) []string, limit int) (admitted map[string]int, refused map[string]int) {
	admitted, refused = map[string]int{"/": 0}, map[string]int{}
	queue := []string{"/"}
	for len(queue) > 0 && len(admitted) < limit {
		page := queue[0]
		queue = queue[1:]
		fromPath, fromQuery, _ := strings.Cut(page, "?")
		for _, l := range links(page) {
			if _, ok := admitted[l]; ok {
				continue
			}
			path, query, _ := strings.Cut(l, "?")
			run, reason := c.Run(path, query, fromPath, fromQuery, admitted[page])
			if reason != "" {
				refused[reason]++
				continue
			}
			admitted[l] = run
			queue = append(queue, l)
		}
	}
	return admitted, refused
}

// TestTrapRun follows a calendar, a catalogue, listings and an article
// archive breadth first, each URL with the run it was first found with,
// and counts what the pattern rule admits.
func TestTrapRun(t *testing.T) {
	month := func(k int) string { // k months after 2026-01 (k may be negative)
		y, m := 2026+(k+1200)/12-100, (k+1200)%12+1
		return fmt.Sprintf("/calendar/%04d-%02d/", y, m)
	}
	var monthOf = map[string]int{}
	for k := -300; k <= 300; k++ {
		monthOf[month(k)] = k
	}
	tests := []struct {
		name     string
		links    func(page string) []string
		admitted int // besides "/"
		refused  bool
	}{
		// The first month, then ten steps either way, each with its days
		// (which are no steps of the month: they keep its run; the day
		// after the last one is a step, into the next month's days).
		{"calendar", func(page string) []string {
			if page == "/" {
				return []string{month(0)}
			}
			k, ok := monthOf[page]
			if !ok {
				return nil
			}
			l := []string{month(k - 1), month(k + 1)}
			for d := 1; d <= 28; d++ {
				l = append(l, fmt.Sprintf("%s%02d/", page, d))
			}
			return l
		}, 21 * 29, true},
		// Products linked from their category pages, each also to the next
		// product: a step, but from a run of 0.
		{"catalogue", func(page string) []string {
			if page == "/" {
				var l []string
				for c := 0; c < 50; c++ {
					l = append(l, fmt.Sprintf("/category/%d/", c))
				}
				return l
			}
			var c, p int
			if _, err := fmt.Sscanf(page, "/category/%d/", &c); err == nil && strings.HasSuffix(page, "/") {
				var l []string
				for p := c * 40; p < (c+1)*40; p++ {
					l = append(l, fmt.Sprintf("/product/%d.html", p))
				}
				return l
			}
			if _, err := fmt.Sscanf(page, "/product/%d.html", &p); err == nil && p < 1999 {
				return []string{fmt.Sprintf("/product/%d.html", p+1), fmt.Sprintf("/category/%d/", p/40)}
			}
			return nil
		}, 50 + 2000, false},
		// A listing whose every page links the first, the next and the
		// previous one: ten next-links from the first, and no more.
		{"listing reached by next links alone", func(page string) []string {
			if page == "/" {
				return []string{"/list?page=1"}
			}
			var k int
			if _, err := fmt.Sscanf(page, "/list?page=%d", &k); err != nil {
				return nil
			}
			return []string{"/list?page=1", fmt.Sprintf("/list?page=%d", k+1), fmt.Sprintf("/list?page=%d", max(k-1, 1))}
		}, 11, true},
		// The same listing, its first page linking pages 2 to 300.
		{"listing reached from its first page", func(page string) []string {
			if page == "/" {
				return []string{"/list?page=1"}
			}
			var k int
			if _, err := fmt.Sscanf(page, "/list?page=%d", &k); err != nil {
				return nil
			}
			l := []string{fmt.Sprintf("/list?page=%d", min(k+1, 300))}
			if k == 1 {
				for j := 2; j <= 300; j++ {
					l = append(l, fmt.Sprintf("/list?page=%d", j))
				}
			}
			return l
		}, 300, false},
		// Articles that link the next one and a page of the latest ones
		// (no pattern), which links them all: found there first, each
		// starts a run again.
		{"articles", func(page string) []string {
			var l []string
			switch page {
			case "/":
				return []string{"/news/0/", "/latest/"}
			case "/latest/":
				for k := 0; k < 400; k++ {
					l = append(l, fmt.Sprintf("/news/%d/", k))
				}
				return l
			}
			var k int
			if _, err := fmt.Sscanf(page, "/news/%d/", &k); err == nil && k < 399 {
				l = append(l, fmt.Sprintf("/news/%d/", k+1), "/latest/")
			}
			return l
		}, 401, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admitted, refused := crawlRuns(depth10(), tt.links, 100000)
			if len(admitted)-1 != tt.admitted || (refused[ReasonURLPattern] > 0) != tt.refused || len(refused) > 1 {
				t.Errorf("admitted %d, refused %v; want %d (refusals: %v)", len(admitted)-1, refused, tt.admitted, tt.refused)
			}
			for u, run := range admitted {
				if run > 10 {
					t.Errorf("%s admitted with run %d", u, run)
				}
			}
		})
	}
}

// TestTrapRunRules: what starts, keeps and grows a run.
func TestTrapRunRules(t *testing.T) {
	c := depth10()
	for _, tt := range []struct {
		name            string
		path, query     string
		fromPath, fromQ string
		fromRun         int
		wantRun         int
		wantReason      string
	}{
		{"a step grows its page's run", "/cal/2026-12/", "", "/cal/2026-11/", "", 4, 5, ""},
		{"a step back too", "/cal/2026-10/", "", "/cal/2026-11/", "", 4, 5, ""},
		{"a day of the month keeps its run", "/cal/2026-11/03/", "", "/cal/2026-11/", "", 4, 4, ""},
		{"a query step", "/list", "page=8", "/list", "page=7", 2, 3, ""},
		{"the tenth step", "/cal/2027-01/", "", "/cal/2026-12/", "", 9, 10, ""},
		{"the eleventh step", "/cal/2027-01/", "", "/cal/2026-12/", "", 10, 11, ReasonURLPattern},
		{"no step: admitted whatever the run", "/cal/2027-03/", "", "/cal/2027-01/", "", 10, 10, ""},
		{"a URL without a pattern starts a run", "/about/", "", "/cal/2026-12/", "", 9, 0, ""},
		{"a link from another host starts one", "/cal/2027-01/", "", "", "", 10, 0, ""},
		{"a negative run counts as 0", "/cal/2027-01/", "", "/cal/2026-12/", "", -3, 1, ""},
	} {
		run, reason := c.Run(tt.path, tt.query, tt.fromPath, tt.fromQ, tt.fromRun)
		if run != tt.wantRun || reason != tt.wantReason {
			t.Errorf("%s: Run = %d, %q; want %d, %q", tt.name, run, reason, tt.wantRun, tt.wantReason)
		}
	}
	off := c
	off.MaxPatternDepth = 0
	if run, reason := off.Run("/cal/2027-01/", "", "/cal/2026-12/", "", 500); run != 0 || reason != "" {
		t.Errorf("rule off: %d, %q", run, reason)
	}
}

// TestTrapTrackerFacets: the distinct parameter-name sets of a path
// pattern, per host.
func TestTrapTrackerFacets(t *testing.T) {
	tr := NewTrapTracker(depth10())
	names := []string{"brand", "color", "size", "price", "rating", "stock", "shipping", "sale"}
	admitted, refused := 0, 0
	for mask := 1; mask < 1<<len(names); mask++ {
		var q []string
		for i, name := range names {
			if mask&(1<<i) != 0 {
				q = append(q, name+"=x")
			}
		}
		switch r := tr.Check("h.example", "/shop/shoes", strings.Join(q, "&")); r {
		case "":
			admitted++
		case ReasonFacets:
			refused++
		default:
			t.Fatalf("reason %q", r)
		}
		// other hosts have their own sets
		if r := tr.Check("other.example", "/shop/shoes", strings.Join(q, "&")); r != "" && mask <= 32 {
			t.Fatalf("other host refused set %d: %q", mask, r)
		}
	}
	if admitted != 32 || refused != 255-32 {
		t.Errorf("admitted %d, refused %d; want 32, %d", admitted, refused, 255-32)
	}
	for _, c := range []struct{ path, query, want string }{
		{"/shop/shoes", "brand=y", ""},                          // a set seen, other values
		{"/shop/shoes", "color=x&brand=x", ""},                  // the same set in another order
		{"/shop/shoes", "brand=x&sale=x&stock=x", ReasonFacets}, // a new set
		{"/shop/shoes", "", ""},                                 // no query
		{"/shop/hats", "brand=x&sale=x&stock=x", ""},            // another path
	} {
		if r := tr.Check("h.example", c.path, c.query); r != c.want {
			t.Errorf("Check(%s?%s) = %q, want %q", c.path, c.query, r, c.want)
		}
	}
	// Searches: one set, many values.
	for k := 0; k < 5000; k++ {
		if r := tr.Check("s.example", "/search", fmt.Sprintf("q=term%d", k)); r != "" {
			t.Fatalf("search %d: %q", k, r)
		}
	}
	var nilTracker *TrapTracker
	if r := nilTracker.Check("h", "/p/1", "a=1"); r != "" {
		t.Errorf("nil tracker: %q", r)
	}
}

// TestFacetSetFixed: a URL's FacetSet is FNV-1a 64 of the host, a zero
// byte and the path pattern (Path), continued with '?' and the sorted
// names (Set), in every process: two trackers, and an independent
// computation, agree.
func TestFacetSetFixed(t *testing.T) {
	sum := func(s string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(s))
		return h.Sum64()
	}
	for _, c := range []struct{ host, path, query, key string }{
		{"h.example", "/shop/", "color=red&brand=acme", "h.example\x00/shop/?brand&color"},
		{"h.example:8080", "/p/17/list", "b=1&a=2&b=3", "h.example:8080\x00/p/#/list?a&b"},
		{"h.example", "/shop/", "x", "h.example\x00/shop/?x"},
	} {
		_, a, added := NewTrapTracker(DefaultTraps()).Admit(c.host, c.path, c.query)
		_, b, _ := NewTrapTracker(DefaultTraps()).Admit(c.host, c.path, c.query)
		path, _, _ := strings.Cut(c.key, "?")
		want := FacetSet{Path: sum(path), Set: sum(c.key)}
		if !added || a != want || b != want {
			t.Errorf("Admit(%s, %s?%s) = %x, %x (added %v), want %x", c.host, c.path, c.query, a, b, added, want)
		}
	}
}

// TestTrapTrackerMerge: the sets another tracker admitted (another
// member) count here as if admitted here.
func TestTrapTrackerMerge(t *testing.T) {
	set := func(i int) string { return fmt.Sprintf("f%d=1", i) }
	for _, c := range []struct {
		name                 string
		max                  int
		there, from, here    int // sets admitted by the other tracker (from set `from` on), then sets 0.. by this one before the merge
		wantMerged           int // Merge's count
		wantAdmitted, refuse int // of sets 0..59 tried here after the merge: admitted new, refused
	}{
		{"nothing shared", 32, 0, 0, 0, 0, 32, 28},
		{"some shared", 32, 10, 0, 0, 10, 22, 28},
		{"all shared", 32, 32, 0, 0, 32, 0, 28},
		{"shared sets seen here already", 32, 10, 0, 10, 0, 22, 28},
		{"admitted at once on both: the count goes over", 32, 20, 32, 32, 20, 0, 8},
		{"rule off", 0, 32, 0, 0, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultTraps()
			cfg.MaxQuerySets = c.max
			there, here := NewTrapTracker(cfg), NewTrapTracker(cfg)
			var told []FacetSet
			for i := c.from; i < c.from+c.there; i++ {
				r, s, added := there.Admit("h.example", "/shop/", set(i))
				if r != "" || added != (c.max > 0) {
					t.Fatalf("there: set %d: reason %q, added %v", i, r, added)
				}
				if added {
					told = append(told, s)
				}
			}
			for i := 0; i < c.here; i++ {
				if r := here.Check("h.example", "/shop/", set(i)); r != "" {
					t.Fatalf("here: set %d refused (%q)", i, r)
				}
			}
			if n := here.Merge(told); n != c.wantMerged {
				t.Errorf("Merge = %d, want %d", n, c.wantMerged)
			}
			if n := here.Merge(told); n != 0 {
				t.Errorf("Merge again = %d, want 0", n)
			}
			admitted, refused := 0, 0
			for i := 0; i < 60; i++ {
				r, _, added := here.Admit("h.example", "/shop/", set(i))
				if added {
					admitted++
				}
				if r == ReasonFacets {
					refused++
				}
			}
			if admitted != c.wantAdmitted || refused != c.refuse {
				t.Errorf("after the merge: %d admitted, %d refused; want %d, %d", admitted, refused, c.wantAdmitted, c.refuse)
			}
			// Another host, or another path, has its own count.
			if r := here.Check("other.example", "/shop/", set(59)); r != "" {
				t.Errorf("another host refused: %q", r)
			}
		})
	}
	var nilTracker *TrapTracker
	if n := nilTracker.Merge([]FacetSet{{1, 2}}); n != 0 {
		t.Errorf("nil tracker merged %d", n)
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
