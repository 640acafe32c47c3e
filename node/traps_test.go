package node

import (
	"net/url"
	"testing"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// facetSink is a FacetSharer that keeps what it is told.
type facetSink struct{ sets []urlscope.FacetSet }

func (s *facetSink) ShareFacets(sets []urlscope.FacetSet) { s.sets = append(s.sets, sets...) }

// TestTrapsShareFacets: in a cluster, the facet sets the node admits, and
// those alone, are handed to the other members once each; a node alone
// keeps none.
func TestTrapsShareFacets(t *testing.T) {
	sc := config.Default().Scope
	sc.MaxQuerySets = 2
	links := []string{
		"http://shop.test/shop/?color=red",
		"http://shop.test/shop/?color=blue",          // the same set
		"http://shop.test/shop/?size=m",              // a second set
		"http://shop.test/shop/?size=m&color=red",    // a third: refused
		"http://shop.test/shop/",                     // no query
		"http://shop.test/cal/2026-11/?page=1",       // another path
		"http://shop.test/a/a/a/a/?x=1",              // refused by a path rule first
		"http://other.test/shop/?size=m&color=red&x", // another host
	}
	for _, tc := range []struct {
		name   string
		sharer FacetSharer
		want   int // sets shared
	}{
		{"in a cluster", &facetSink{}, 4},
		{"alone", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := newTraps(sc)
			if err != nil {
				t.Fatal(err)
			}
			n := &Node{traps: tr}
			n.takeCluster(ClusterDelegates{Router: Standalone{}, Facets: tc.sharer})
			refused := 0
			for _, l := range links {
				u, err := url.Parse(l)
				if err != nil {
					t.Fatal(err)
				}
				if r, _ := tr.check(u, nil, 0); r != "" {
					refused++
				}
			}
			if refused != 2 {
				t.Errorf("%d links refused, want 2", refused)
			}
			n.shareFacets()
			n.shareFacets() // nothing new: nothing told twice
			got := 0
			if s, ok := tc.sharer.(*facetSink); ok {
				got = len(s.sets)
				seen := map[urlscope.FacetSet]bool{}
				for _, set := range s.sets {
					if seen[set] {
						t.Errorf("set %x told twice", set)
					}
					seen[set] = true
				}
			}
			if got != tc.want || len(tr.shared) != 0 {
				t.Errorf("%d sets told, %d kept; want %d, 0", got, len(tr.shared), tc.want)
			}
		})
	}
}
