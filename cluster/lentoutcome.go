package cluster

import (
	"context"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/lend"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// SplitLinks implements node.GuestSettler: the links this node owns, and the others.
func (c *Cluster) SplitLinks(found []frontier.NewURL) (local, foreign []frontier.NewURL) {
	ring := c.ring.Load()
	for _, u := range found {
		if o := ring.Owner(frontier.Fingerprint(u.URL)); o == "" || o == c.cfg.Name {
			local = append(local, u)
		} else {
			foreign = append(foreign, u)
		}
	}
	return local, foreign
}

// ReportLent implements node.GuestSettler: one durable outbox write files the
// links found on a lent page that other members own for them (KindNew),
// the outcome for the URL's owner (KindOutcome), who acknowledges the
// batch once both the links and the outcome are stored, and a fetched
// page's replica (lend.ReplicaTarget); the node has made its own links
// durable before. A link or an outcome this
// node owns now (the members changed) is recorded here.
func (c *Cluster) ReportLent(ctx context.Context, out frontier.LentOutcome, foreign []frontier.NewURL) error {
	ring := c.ring.Load()
	local, files, filed := c.byOwner(ring, c.unsent(ring, foreign))
	if len(local) > 0 {
		if _, err := c.front.Add(ctx, local); err != nil {
			return err
		}
	}
	oc := frontier.NewURL{URL: out.URL, Host: lend.OutcomeHost(out.Result), Depth: out.Depth}
	owner := c.outcomeTo(out.Lender, out.FP)
	if owner != "" && owner != c.cfg.Name {
		files[owner] = append(files[owner], exchange.Entry{Kind: exchange.KindOutcome, NewURL: oc})
	}
	// The page's only replica goes from here, in the same write as the
	// outcome, to the member the owner would choose (lend.ReplicaTarget):
	// the owner files none for a record it settles, and should the owner
	// be cut off or fail, that member (the URL's owner without it) still
	// knows the page was fetched.
	var keep []frontier.NewURL
	if out.State == frontier.Completed {
		rep := frontier.NewURL{URL: out.URL, Host: out.Host, Depth: out.Depth}
		if c.cfg.Revisit != nil {
			if iv := c.cfg.Revisit(out.Host).Interval; iv > 0 {
				rep.Due = time.Now().Add(iv)
			}
		}
		switch second := lend.ReplicaTarget(ring, owner, out.FP); second {
		case "", owner:
		case c.cfg.Name:
			keep = append(keep, rep)
		default:
			files[second] = append(files[second], exchange.Entry{Kind: exchange.KindReplica, NewURL: rep})
		}
	}
	if err := c.outbox.PutEntries(ctx, files); err != nil {
		return err
	}
	c.markSent(ring, filed)
	if len(keep) > 0 {
		if _, err := c.front.AddReplicas(ctx, keep); err != nil {
			return err
		}
	}
	if owner == "" || owner == c.cfg.Name {
		_, err := c.settleLent(ctx, []frontier.NewURL{oc})
		return err
	}
	return nil
}

// ReturnLent implements node.GuestSettler: the guests this node will not fetch
// go back to their owners (KindOutcome entries in state IN_LIST, naming
// this node and the slot of the lend), which forget the lend's mark and
// may lend or fetch the URLs at once. They travel behind this node's
// earlier outcomes for the same owners (the outbox is ordered).
func (c *Cluster) ReturnLent(ctx context.Context, gs []frontier.Guest) error {
	urls := make([]frontier.NewURL, len(gs))
	for i, g := range gs {
		r := frontier.Result{Host: g.Host, State: frontier.InList, Reason: lend.ReturnReason(c.cfg.Name, g.Slot)}
		urls[i] = frontier.NewURL{URL: g.URL, Host: lend.OutcomeHost(r), Depth: g.Depth}
	}
	to := make(map[uint64]string, len(gs))
	for _, g := range gs {
		fp := frontier.Fingerprint(g.URL)
		to[fp] = c.outcomeTo(g.Lender, fp)
	}
	local, err := c.fileFor(ctx, exchange.KindOutcome, urls, func(fp uint64) string { return to[fp] })
	if err != nil {
		return err
	}
	owners := map[string]bool{}
	for _, o := range to {
		if o != "" && o != c.cfg.Name && !owners[o] {
			owners[o] = true
			c.x.Flush(o) // the next holder may have them at once
		}
	}
	_, err = c.settleLent(ctx, local)
	return err
}

// keepFor reports whether peer, a lender, is alive or away: the outcomes
// of what it lent wait for it, since it keeps their records.
func (c *Cluster) keepFor(peer string) bool {
	if _, ok := (*c.addrs.Load())[peer]; ok {
		return true
	}
	if a := c.away.Load(); a != nil {
		if until, ok := a.Until[peer]; ok && time.Now().Before(until) {
			return true
		}
	}
	// A member this process has not heard of yet, in its first
	// takeover_after: after a restart the outbox may hold outcomes for a
	// lender that is on its way back (it restarted too); it keeps their
	// records and would otherwise fetch them again.
	if k := c.known.Load(); (k == nil || !(*k)[peer]) && time.Since(c.started) < c.cfg.TakeoverAfter {
		return true
	}
	return false
}

// outcomeTo is the member an outcome for the URL fp lent by lender goes
// to: the lender, which keeps the record, while it is alive or away; its
// owner otherwise (outcomeOwner).
func (c *Cluster) outcomeTo(lender string, fp uint64) string {
	if lender != "" && lender != c.cfg.Name && (*c.peersLeaving.Load())[lender] {
		// A lender handing off refuses batches; the record goes to the
		// URL's owner among the members that stay, and so does the outcome
		// (kept there if it comes first, with the lend's mark if later).
		return c.stayOwner(fp)
	}
	if lender != "" && (lender == c.cfg.Name || c.keepFor(lender)) {
		return lender
	}
	return c.outcomeOwner(fp)
}

// outcomeOwner is the member an outcome for the URL fp goes to: its
// owner, counting the members away (declared dead less than
// takeover_after ago). The records of an away member's share are in its
// frontier, not at the member that owns them while it is away: its
// outcomes wait for it (in the outbox) like its share's URLs wait for it
// (Held); after takeover_after they go to the current owner.
func (c *Cluster) outcomeOwner(fp uint64) string {
	if a := c.away.Load(); a != nil {
		if o := a.Ring.Owner(fp); o != "" {
			if until, ok := a.Until[o]; ok && time.Now().Before(until) {
				return o
			}
		}
	}
	return c.ring.Load().Owner(fp)
}

// stayOwner is the owner of fp among the members that are not handing
// off (outcomeOwner while none is).
func (c *Cluster) stayOwner(fp uint64) string {
	if r := c.stayRing.Load(); r != nil {
		return r.Owner(fp)
	}
	return c.outcomeOwner(fp)
}

// settleLent records the outcomes of URLs this node lent (KindOutcome
// entries that reached it) and forgets their marks. It files no replica
// for a record it settles: the holder filed the page's replica in the
// same outbox write as the outcome (ReportLent), so the replica is
// durable wherever the outcome is, and a second copy from here would cost
// every lent page another outbox write, message and frontier write. It
// does file one for an outcome it keeps as a completed record, having no
// record to settle (below). An outcome whose record is not here in a
// state it can settle (the record moved to a new owner, or was never
// here: the sender's view was behind) goes on to the URL's owner, at most
// lend.MaxOutcomeHops times.
func (c *Cluster) settleLent(ctx context.Context, urls []frontier.NewURL) (int, error) {
	if len(urls) == 0 {
		return 0, nil
	}
	rs := make([]frontier.Result, 0, len(urls))
	us := make([]frontier.NewURL, 0, len(urls))
	for _, u := range urls {
		r, ok := lend.ParseOutcome(u)
		if !ok {
			c.log.Warn("dropped a malformed lent outcome", "host_len", len(u.Host))
			continue
		}
		if r.State == frontier.InList { // returned unfetched (ReturnLent)
			if holder, slot, ok := lend.ParseReturn(r.Reason); ok {
				c.lends.Returned(frontier.Ref{FP: r.FP, Host: r.Host}, holder, slot)
			}
			continue
		}
		rs = append(rs, r)
		us = append(us, u)
	}
	if len(rs) == 0 {
		// Returned: lend them to the next holder, or fetch them here.
		if c.cfg.Lend {
			signal(c.lendKick)
		}
		if c.cfg.Wake != nil {
			c.cfg.Wake()
		}
		return 0, nil
	}
	if c.cfg.Revisit != nil {
		// Due again as after this node's own fetch: its schedule for the
		// host (a STALLED result whose tries are used up completes too).
		for i := range rs {
			rs[i].Revisit = c.cfg.Revisit(rs[i].Host)
		}
	}
	settled, err := c.front.SettleLent(ctx, rs)
	if err != nil {
		return 0, err
	}
	fps := make([]uint64, 0, len(rs))
	fwd := map[string][]exchange.Entry{}
	var early, fetched []frontier.NewURL
	n := 0
	for i, r := range rs {
		fps = append(fps, r.FP)
		if settled[i] {
			n++
			continue
		}
		switch o := c.stayOwner(r.FP); {
		case (o == "" || o == c.cfg.Name) && r.State == frontier.Completed:
			// This node owns it and has no record it could settle: the
			// record is on its way here (moved), or with a member that
			// is away or cut off (this node crawls its share now), or
			// was fetched here again meanwhile. The page was fetched:
			// its fingerprint is kept as a completed record, so that
			// neither the record when it comes nor the URL discovered
			// again is fetched, and a member that owns the URL later
			// gets it with this node's records (rebalance).
			var due time.Time
			if r.Revisit.Interval > 0 {
				due = time.Now().Add(r.Revisit.Interval)
			}
			fetched = append(fetched, frontier.NewURL{URL: us[i].URL, Host: r.Host, Depth: us[i].Depth, Due: due})
		case o == "" || o == c.cfg.Name:
			// Not fetched (a retry later): kept until the record comes.
			early = append(early, us[i])
		case us[i].Redirects < lend.MaxOutcomeHops:
			u := us[i]
			u.Redirects++
			fwd[o] = append(fwd[o], exchange.Entry{Kind: exchange.KindOutcome, NewURL: u})
		}
	}
	c.lends.Settle(fps)
	if len(fetched) > 0 {
		k, err := c.front.AddDone(ctx, fetched)
		if err != nil {
			return n, err
		}
		n += k
		// The holder filed the page's replica for the owner it knew; this
		// node has taken the URL over (that owner is away, or the record
		// moved), so its replica goes elsewhere: to the member ranked
		// first when that one is away, which learns, once back, that the
		// page was fetched. This write is rare and made here, on the
		// receive path.
		if err := c.Replicate(ctx, fetched); err != nil {
			c.log.Warn("replicate lent pages kept here", "error", err, "urls", len(fetched))
		}
	}
	if len(early) > 0 && !c.leaving.Load() {
		c.lends.KeepEarly(early, time.Now())
	}
	if len(fwd) > 0 {
		if err := c.outbox.PutEntries(ctx, fwd); err != nil {
			return n, err
		}
	}
	if c.cfg.Wake != nil {
		c.cfg.Wake() // a stalled one may be due, and the scan's window moved
	}
	return n, nil
}
