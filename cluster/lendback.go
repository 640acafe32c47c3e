package cluster

import (
	"context"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/lend"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// ReceiveNew implements Lender (the exchange's): the URLs peer found and
// this node owns are stored, and those new here whose host is in the phase
// peer works on now are lent back to it in the batch's ack. Without this a
// link found on a host goes to its owner and comes back with the owner's
// next lend round, a second batch: a round trip during which the host
// waits, on small crawls most of the time.
func (l localStore) ReceiveNew(ctx context.Context, peer string, urls []frontier.NewURL, maxBytes int) (int, []frontier.NewURL, error) {
	return l.c.receiveNew(ctx, peer, urls, maxBytes)
}

func (c *Cluster) receiveNew(ctx context.Context, peer string, urls []frontier.NewURL, maxBytes int) (int, []frontier.NewURL, error) {
	offer := c.offerBack(peer, urls)
	if len(offer.fps) == 0 {
		n, err := c.store(ctx, exchange.KindNew, urls)
		return n, nil, err
	}
	// What is marked and not lent in the end (stored meanwhile by another
	// batch, no room in the ack, or the store failed) is unmarked and kept
	// to be lent again in this slot, as a URL given back is: a lend
	// round's scan may have passed it while it was marked.
	unlend := func(is []int) {
		for _, i := range is {
			c.lends.Returned(frontier.Ref{FP: offer.fps[i], Host: offer.hosts[i]}, peer, offer.slot)
		}
		if len(is) > 0 {
			signal(c.lendKick)
		}
	}
	var added []frontier.NewURL
	n, err := c.storeURLs(ctx, exchange.KindNew, urls, &added)
	if err != nil {
		unlend(offer.all())
		return n, nil, err
	}
	isNew := make(map[uint64]bool, len(added))
	for _, u := range added {
		isNew[frontier.Fingerprint(u.URL)] = true
	}
	var lent []frontier.NewURL
	var back []int
	size := 0
	for i, fp := range offer.fps {
		u := urls[offer.idx[i]]
		e := frontier.NewURL{URL: u.URL, Host: lend.EntryHost(offer.hosts[i], offer.slot, 0, c.cfg.Name), Depth: u.Depth, Run: u.Run, Redirects: u.Redirects}
		es := exchange.EntrySize(exchange.Entry{Kind: exchange.KindLend, NewURL: e}) // as the ack encodes it
		if !isNew[fp] || size+es > maxBytes {
			back = append(back, i)
			continue
		}
		size += es
		lent = append(lent, e)
	}
	unlend(back)
	return n, lent, nil
}

// lendOffer is the URLs of a batch this node marked lent to its sender
// before storing them: their fingerprints, indexes in the batch and hosts.
type lendOffer struct {
	slot  int64
	fps   []uint64
	idx   []int
	hosts []string
}

// all returns the indexes of every URL of o.
func (o lendOffer) all() []int {
	is := make([]int, len(o.fps))
	for i := range is {
		is[i] = i
	}
	return is
}

// offerBack marks lent to peer, before they are stored, the URLs of urls
// this node owns and may lend it now (lendWindow, lendPhase): those of
// the hosts of the phase peer works on, not lent or held already, up to
// what peer may still hold (lend.MaxLentPerMember).
func (c *Cluster) offerBack(peer string, urls []frontier.NewURL) lendOffer {
	var o lendOffer
	if !c.cfg.Lend {
		return o
	}
	st, until, ok := c.lendWindow(time.Now())
	if !ok {
		return o
	}
	q, ok := c.lendPhase(st, peer)
	if !ok {
		return o
	}
	ring := c.ring.Load()
	hold := until.Add(c.lendSlack())
	o.slot = st.Slot
	for i, u := range urls {
		host := u.Host
		if host == "" {
			host = frontier.RefOf(u.URL).Host
		}
		host = strings.ToLower(host)
		if host == "" || frontier.PhaseOf(c.cfg.Unit.Hash(host), st.NPhase) != q {
			continue
		}
		fp := frontier.Fingerprint(u.URL)
		if ring.Owner(fp) != c.cfg.Name || c.Held(fp) {
			continue
		}
		o.fps, o.idx, o.hosts = append(o.fps, fp), append(o.idx, i), append(o.hosts, host)
	}
	if len(o.fps) == 0 {
		return o
	}
	// Only URLs new here: a known one is lent, if at all, by the lend
	// rounds, whose scan must not find it marked for a moment (it would
	// pass it by until the next slot).
	refs := make([]frontier.Ref, len(o.fps))
	for i, fp := range o.fps {
		refs[i] = frontier.Ref{FP: fp, Host: o.hosts[i]}
	}
	known, err := c.front.Known(refs)
	if err != nil {
		c.log.Warn("lend back: read the frontier", "error", err)
		return lendOffer{}
	}
	// Marked before they are stored: the scheduler must not pick them
	// between the two.
	// Up to what peer may still hold; not those known here, lent
	// meanwhile, or twice in this batch.
	marked := c.lends.Offer(peer, o.fps, known, lend.Mark{Holder: peer, Slot: st.Slot, Until: until, Hold: hold})
	for k, i := range marked {
		o.fps[k], o.idx[k], o.hosts[k] = o.fps[i], o.idx[i], o.hosts[i]
	}
	k := len(marked)
	o.fps, o.idx, o.hosts = o.fps[:k], o.idx[:k], o.hosts[:k]
	return o
}

// takeLends passes the URLs another member lent this node to the node,
// those lent for the slot and phase this node works on now; the others,
// and those the node refuses, go back to their owners at once.
func (c *Cluster) takeLends(ctx context.Context, urls []frontier.NewURL) int {
	now := time.Now()
	st := c.sched.At(now)
	// A starting node not settled yet takes them (its own URLs wait, not
	// its phase); one held off its phase (a freeze, a fence) does not.
	open := c.cfg.Guests != nil && !c.leaving.Load() && st.Phase >= 0 && !st.Held && st.Open
	var gs, back []frontier.Guest
	for _, u := range urls {
		g, ok := lend.ParseEntry(u)
		if !ok {
			continue
		}
		g.Until = st.RequestDeadline
		if !open || g.Slot != st.Slot || frontier.PhaseOf(c.cfg.Unit.Hash(g.Host), st.NPhase) != st.Phase {
			back = append(back, g)
			continue
		}
		gs = append(gs, g)
	}
	if len(gs) > 0 {
		back = append(back, c.cfg.Guests.AddGuests(gs)...)
	}
	if len(back) > 0 {
		if err := c.ReturnLent(ctx, back); err != nil {
			c.log.Warn("return lent URLs", "error", err, "urls", len(back))
		}
	}
	return len(gs)
}
