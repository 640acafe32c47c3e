package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// The facet rule (scope.max_query_sets) counts, per host and path
// pattern, the sets of query parameter names admitted: a set a member
// admits is told to every other member (KindFacets, sent without waiting
// for a batch to fill), which counts it as its own, so that a shop's
// facets cost the cluster what they cost a node alone. The sets travel as
// their fixed hashes (urlscope.FacetSet), never as host names.
// docs/design/traps.md ("In a cluster") gives the reasons and the bounds.

// FacetMerger takes the facet sets other members admitted
// (*urlscope.TrapTracker implements it).
type FacetMerger interface {
	Merge([]urlscope.FacetSet) int
}

// maxFacetsPerEntry is the most sets one KindFacets entry carries.
const maxFacetsPerEntry = exchange.MaxEntryURL / exchange.FacetSize

// encodeFacets packs sets into the URLs of KindFacets entries (Host
// empty), maxFacetsPerEntry sets at most in each.
func encodeFacets(sets []urlscope.FacetSet) []frontier.NewURL {
	var us []frontier.NewURL
	for len(sets) > 0 {
		n := min(len(sets), maxFacetsPerEntry)
		b := make([]byte, 0, n*exchange.FacetSize)
		for _, s := range sets[:n] {
			b = binary.BigEndian.AppendUint64(b, s.Path)
			b = binary.BigEndian.AppendUint64(b, s.Set)
		}
		us = append(us, frontier.NewURL{URL: string(b)})
		sets = sets[n:]
	}
	return us
}

// decodeFacets unpacks the sets of a KindFacets entry's URL.
func decodeFacets(u string) ([]urlscope.FacetSet, error) {
	if len(u) == 0 || len(u)%exchange.FacetSize != 0 {
		return nil, fmt.Errorf("facets of %d bytes: want a positive multiple of %d", len(u), exchange.FacetSize)
	}
	b := []byte(u)
	sets := make([]urlscope.FacetSet, 0, len(b)/exchange.FacetSize)
	for ; len(b) > 0; b = b[exchange.FacetSize:] {
		sets = append(sets, urlscope.FacetSet{Path: binary.BigEndian.Uint64(b), Set: binary.BigEndian.Uint64(b[8:])})
	}
	return sets, nil
}

// ShareFacets implements node.FacetSharer: it files sets, facet sets this
// node admitted, under every other member and sends them at once, without
// waiting for the write (queued with the node's other outbox writes, it
// goes with the next commit). Failures are logged: a member without the
// sets may admit up to scope.max_query_sets more on those paths.
func (c *Cluster) ShareFacets(sets []urlscope.FacetSet) {
	if len(sets) == 0 {
		return
	}
	es := encodeFacets(sets)
	files := map[string][]exchange.Entry{}
	for peer := range *c.addrs.Load() {
		if peer == c.cfg.Name {
			continue
		}
		for _, u := range es {
			files[peer] = append(files[peer], exchange.Entry{Kind: exchange.KindFacets, NewURL: u})
		}
	}
	if len(files) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	flush := func() {
		for peer := range files {
			c.x.Flush(peer)
		}
	}
	if _, err := c.outbox.QueueEntries(ctx, files, flush, nil); err != nil {
		c.log.Warn("cannot share facet sets with the members: they count them apart", "sets", len(sets), "error", err)
	}
}

// importFacets merges the facet sets another member admitted.
func (c *Cluster) importFacets(urls []frontier.NewURL) int {
	if c.cfg.Facets == nil {
		return 0
	}
	n := 0
	for _, u := range urls {
		sets, err := decodeFacets(u.URL)
		if err != nil {
			c.log.Warn("dropping malformed facet sets from a member", "error", err)
			continue
		}
		n += c.cfg.Facets.Merge(sets)
	}
	return n
}
