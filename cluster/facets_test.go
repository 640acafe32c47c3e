package cluster

import (
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

func facetSets(n int) []urlscope.FacetSet {
	sets := make([]urlscope.FacetSet, n)
	for i := range sets {
		sets[i] = urlscope.FacetSet{Path: uint64(i) * 0x9e3779b97f4a7c15, Set: ^uint64(i)}
	}
	return sets
}

// TestFacetsCodec: facet sets travel packed in KindFacets entries, 16
// bytes a set and at most maxFacetsPerEntry an entry, with no host name,
// through the outbox's and the exchange's encoding and back.
func TestFacetsCodec(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sets    int
		entries int
	}{
		{"none", 0, 0},
		{"one", 1, 1},
		{"a shop's", 32, 1},
		{"a full entry", maxFacetsPerEntry, 1},
		{"one more", maxFacetsPerEntry + 1, 2},
		{"three entries", 2*maxFacetsPerEntry + 7, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets := facetSets(tc.sets)
			us := encodeFacets(sets)
			if len(us) != tc.entries {
				t.Fatalf("%d entries, want %d", len(us), tc.entries)
			}
			b := exchange.Batch{ID: 9}
			for _, u := range us {
				b.Entries = append(b.Entries, exchange.Entry{Kind: exchange.KindFacets, NewURL: u})
			}
			got, err := exchange.DecodeBatch(exchange.EncodeBatch(b))
			if err != nil || got.ID != b.ID || len(got.Entries) != len(b.Entries) || (len(b.Entries) > 0 && !reflect.DeepEqual(got, b)) {
				t.Fatalf("batch round trip: %v", err)
			}
			var back []urlscope.FacetSet
			for _, e := range got.Entries {
				if e.Host != "" || len(e.URL) > exchange.MaxEntryURL {
					t.Fatalf("entry with host %q, %d bytes", e.Host, len(e.URL))
				}
				s, err := decodeFacets(e.URL)
				if err != nil {
					t.Fatal(err)
				}
				back = append(back, s...)
			}
			if len(back) != len(sets) || (len(sets) > 0 && !reflect.DeepEqual(back, sets)) {
				t.Fatalf("%d sets back, want %d", len(back), len(sets))
			}
		})
	}
	// Big-endian Path then Set.
	if u := encodeFacets([]urlscope.FacetSet{{Path: 0x0102030405060708, Set: 0x1112131415161718}})[0].URL; u != "\x01\x02\x03\x04\x05\x06\x07\x08\x11\x12\x13\x14\x15\x16\x17\x18" {
		t.Errorf("encoded % x", u)
	}
	for _, u := range []string{"", "x", strings.Repeat("x", 17)} {
		if _, err := decodeFacets(u); err == nil {
			t.Errorf("decodeFacets(%d bytes): no error", len(u))
		}
	}
}

// TestFacetsShared: the facet sets a member admits reach every other
// member's tracker, which then refuses a new set on the path as if it
// had admitted them; a member alone files nothing.
func TestFacetsShared(t *testing.T) {
	cfg := urlscope.DefaultTraps()
	cfg.MaxQuerySets = 4
	trackers := map[string]*urlscope.TrapTracker{}
	merged := map[string]*countMerger{}
	with := func(name string) func(*NodeConfig) {
		trackers[name] = urlscope.NewTrapTracker(cfg)
		merged[name] = &countMerger{FacetMerger: trackers[name]}
		return func(c *NodeConfig) { c.Facets = merged[name] }
	}
	a := startTestClusterWith(t, "a", with("a"))
	a.fetching(t)
	tra := trackers["a"]
	_, alone, _ := tra.Admit("shop.test", "/alone/", "x=1")
	a.c.ShareFacets([]urlscope.FacetSet{alone})
	if n := a.c.outbox.Len(); n != 0 {
		t.Fatalf("a member alone filed %d entries", n)
	}

	b := startTestClusterWith(t, "b", with("b"), a.c.members.Addr())
	b.fetching(t)
	c := startTestClusterWith(t, "c", with("c"), a.c.members.Addr())
	c.fetching(t)
	wait.For(t, 20*time.Second, "a sees three members", func() bool { return len(*a.c.addrs.Load()) == 3 })

	var admitted []urlscope.FacetSet
	for _, q := range []string{"color=red", "size=m", "color=red&size=m", "brand=acme"} {
		r, s, added := tra.Admit("shop.test", "/shop/", q)
		if r != "" || !added {
			t.Fatalf("a: %s refused (%q)", q, r)
		}
		admitted = append(admitted, s)
	}
	a.c.ShareFacets(admitted)
	for _, name := range []string{"b", "c"} {
		tr := trackers[name]
		wait.For(t, 20*time.Second, name+" merges a's sets", func() bool { return merged[name].n.Load() == int64(len(admitted)) })
		if r := tr.Check("shop.test", "/shop/", "sale=yes"); r != urlscope.ReasonFacets {
			t.Errorf("%s admitted a fifth set on a path with four admitted by a: %q", name, r)
		}
		// The sets a admitted stay admitted; another path has its own count.
		if r := tr.Check("shop.test", "/shop/", "size=s&color=blue"); r != "" {
			t.Errorf("%s refused a set a admitted: %q", name, r)
		}
		if r := tr.Check("shop.test", "/other/", "sale=yes"); r != "" {
			t.Errorf("%s refused a set of another path: %q", name, r)
		}
	}
	for _, tc := range []*testCluster{a, b, c} {
		wait.For(t, 20*time.Second, tc.c.cfg.Name+"'s outbox empties", func() bool { return tc.c.outbox.Len() == 0 })
	}
}

// countMerger counts the sets merged.
type countMerger struct {
	FacetMerger
	n atomic.Int64
}

func (m *countMerger) Merge(sets []urlscope.FacetSet) int {
	n := m.FacetMerger.Merge(sets)
	m.n.Add(int64(n))
	return n
}

// TestImportFacets: malformed entries are dropped, the others merged.
func TestImportFacets(t *testing.T) {
	cfg := urlscope.DefaultTraps()
	tr := urlscope.NewTrapTracker(cfg)
	c := &Cluster{cfg: NodeConfig{Facets: tr}, log: quietLogger()}
	good := encodeFacets(facetSets(3))
	for _, tc := range []struct {
		name string
		urls []frontier.NewURL
		want int
	}{
		{"three sets", good, 3},
		{"the same again", good, 0},
		{"malformed", []frontier.NewURL{{URL: "short"}}, 0},
		{"malformed and new", []frontier.NewURL{{URL: "short"}, encodeFacets(facetSets(5))[0]}, 2},
	} {
		if n := c.importFacets(tc.urls); n != tc.want {
			t.Errorf("%s: %d merged, want %d", tc.name, n, tc.want)
		}
	}
	if n := (&Cluster{log: quietLogger()}).importFacets(good); n != 0 {
		t.Errorf("without a tracker: %d merged", n)
	}
}
