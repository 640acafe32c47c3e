package cluster

import (
	"context"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// errLeaving answers batches that arrive while this node hands its records
// off: the sender keeps them and re-files them once the node is gone.
var errLeaving = exchange.ErrLeaving

// directory is the exchange's view of the members (exchange.Directory,
// ReplicaDirectory and OutcomeDirectory): the owners by the current ring,
// the addresses from the members' metadata.
type directory struct{ c *Cluster }

// OwnerOf is u's owner by the current ring.
func (d directory) OwnerOf(u frontier.NewURL) string {
	return d.c.ring.Load().Owner(frontier.Fingerprint(u.URL))
}

// ReplicaOf is the member that holds u's replica by the current ring.
func (d directory) ReplicaOf(u frontier.NewURL) string {
	return d.c.replicaOf(d.c.ring.Load(), frontier.Fingerprint(u.URL))
}

// OutcomeOf is where the outcome of u, lent to this node by peer and
// filed for it, goes now (outcomeTo; peer itself keeps it there).
func (d directory) OutcomeOf(peer string, u frontier.NewURL) string {
	return d.c.outcomeTo(peer, frontier.Fingerprint(u.URL))
}

// AddrOf is the exchange address of an alive member.
func (d directory) AddrOf(peer string) (string, bool) {
	a, ok := (*d.c.addrs.Load())[peer]
	return a, ok
}

// localStore is the exchange's Receiver: it stores the discovered URLs
// this node owns and forwards (through the outbox) those another member
// owns, which happens when a sender's view of the membership is behind;
// records moved by a rebalance (KindMoved, KindDone) and replicas
// (KindReplica) are kept here, where their sender chose to put them, and a
// rebalance moves them on if this node's ring says another member owns
// them.
type localStore struct{ c *Cluster }

// Receive implements Receiver.
func (l localStore) Receive(ctx context.Context, kind exchange.Kind, urls []frontier.NewURL) (int, error) {
	return l.c.store(ctx, kind, urls)
}

func (c *Cluster) store(ctx context.Context, kind exchange.Kind, urls []frontier.NewURL) (int, error) {
	return c.storeURLs(ctx, kind, urls, nil)
}

// storeURLs is store; added, when not nil, gets the URLs of a KindNew or
// KindMoved batch that were new in the frontier.
func (c *Cluster) storeURLs(ctx context.Context, kind exchange.Kind, urls []frontier.NewURL, added *[]frontier.NewURL) (int, error) {
	if len(urls) == 0 {
		return 0, nil
	}
	switch kind {
	case exchange.KindScope:
		return c.addSeedHosts(urls)
	case exchange.KindRobots:
		return c.importRobots(urls), nil
	case exchange.KindFacets:
		return c.importFacets(urls), nil
	case exchange.KindLend:
		return c.takeLends(ctx, urls), nil
	}
	ring := c.ring.Load()
	if c.leaving.Load() && ring.Len() > 0 {
		if kind == exchange.KindOutcome {
			// Settled here if the record has not left yet (it then leaves
			// as a completed one), forwarded to the next owner otherwise.
			return c.settleLent(ctx, urls)
		}
		return 0, errLeaving
	}
	if kind == exchange.KindMoved {
		u := time.Duration(0)
		if c.clock != nil {
			u = c.clock.Uncertainty()
		}
		urls = c.lends.TakeMoved(urls, u) // marks set before the records are stored
	}
	if c.cfg.Redirects != nil && (kind == exchange.KindNew || kind == exchange.KindMoved) {
		c.cfg.Redirects.RememberRedirects(urls)
	}
	var local []frontier.NewURL
	var fwd map[string][]frontier.NewURL
	foreign := false
	for _, u := range urls {
		o := ring.Owner(frontier.Fingerprint(u.URL))
		if o == "" || o == c.cfg.Name || kind != exchange.KindNew {
			local = append(local, u)
			foreign = foreign || c.movable(o)
			continue
		}
		if fwd == nil {
			fwd = map[string][]frontier.NewURL{}
		}
		fwd[o] = append(fwd[o], u)
	}
	for peer, us := range fwd {
		if err := c.outbox.PutKind(ctx, peer, kind, us); err != nil {
			return 0, err
		}
	}
	if len(local) == 0 {
		return 0, nil
	}
	var n int
	var err error
	switch kind {
	case exchange.KindDone:
		n, err = c.front.AddDone(ctx, local)
	case exchange.KindCopied:
		n, err = c.front.AddCopied(ctx, local)
	case exchange.KindOutcome:
		n, err = c.settleLent(ctx, local)
		foreign = false
	case exchange.KindReplica:
		// Kept here whoever owns them: a rebalance leaves a replica where
		// this node ranks second for its URL, and moves it otherwise.
		n, err = c.front.AddReplicas(ctx, local)
		foreign = false
	default:
		switch {
		case added != nil:
			*added, err = c.front.AddNew(ctx, local)
			n = len(*added)
		case kind == exchange.KindMoved:
			// A record this node claimed to move away and owns again
			// (its outbox gave it back) is queued here again.
			n, err = c.front.AddMoved(ctx, local, func(fp uint64) bool { return ring.Owner(fp) == c.cfg.Name })
		default:
			n, err = c.front.Add(ctx, local)
		}
		if err == nil && kind == exchange.KindMoved {
			// Outcomes that came before their records settle them now.
			if early := c.lends.TakeEarly(local, time.Now()); len(early) > 0 {
				if _, err := c.settleLent(ctx, early); err != nil {
					c.log.Warn("settle lent outcomes that came before their records", "error", err, "urls", len(early))
				}
			}
		}
	}
	if err == nil && (foreign || c.ring.Load() != ring) {
		// Moved here by a member whose view differs, or stored under a
		// ring that changed meanwhile (a rebalance may have scanned the
		// frontier before they were stored): move them on.
		signal(c.rebKick)
	}
	if n > 0 && (kind == exchange.KindNew || kind == exchange.KindMoved) {
		if c.cfg.Wake != nil {
			c.cfg.Wake()
		}
		signal(c.lendKick)
	}
	return n, err
}

// movable reports whether a record owned by owner should be moved there:
// owner is another member, and not one that is leaving.
func (c *Cluster) movable(owner string) bool {
	return owner != "" && owner != c.cfg.Name && !(*c.peersLeaving.Load())[owner]
}

// replicaOf is the member that keeps the second copy of the COMPLETED
// record fp that this node holds: the member ranked second for fp, or the
// owner when that is this node ("" with no other member).
func (c *Cluster) replicaOf(ring *ring.Ring, fp uint64) string {
	first, second := ring.Top2(fp)
	if second == c.cfg.Name {
		return first
	}
	return second
}

// Replicate implements node.Replicator: the URLs of pages this node
// completed go, durably through the outbox, to the member ranked second
// for them (KindReplica). Should this node fail, that member owns them and
// does not crawl them again when it rediscovers them.
func (c *Cluster) Replicate(ctx context.Context, done []frontier.NewURL) error {
	ring := c.ring.Load()
	_, err := c.fileFor(ctx, exchange.KindReplica, done, func(fp uint64) string { return c.replicaOf(ring, fp) })
	return err
}

// QueueReplicas implements node.Replicator: Replicate without the wait.
// The write is queued for the outbox and a failure is logged: a replica
// lost with a crash in the moment before its write costs a page fetched
// again only should this node never come back, and the page's trip does
// not wait for the outbox's fsync.
func (c *Cluster) QueueReplicas(ctx context.Context, done []frontier.NewURL) error {
	ring := c.ring.Load()
	files := map[string][]exchange.Entry{}
	for _, u := range done {
		if o := c.replicaOf(ring, frontier.Fingerprint(u.URL)); o != "" && o != c.cfg.Name {
			files[o] = append(files[o], exchange.Entry{Kind: exchange.KindReplica, NewURL: u})
		}
	}
	_, err := c.outbox.QueueEntries(ctx, files, nil, func(err error) {
		c.log.Warn("replicate completed URLs", "error", err, "urls", len(done))
	})
	return err
}

// RouteForeign implements node.LocalSplitter: the discovered URLs another
// member owns go to the outbox; the others are returned, for the node to
// record with its fetch results in one frontier transaction.
func (c *Cluster) RouteForeign(ctx context.Context, urls []frontier.NewURL) ([]frontier.NewURL, error) {
	ring := c.ring.Load()
	urls = c.unsent(ring, urls)
	var filed []uint64
	local, err := c.fileFor(ctx, exchange.KindNew, urls, func(fp uint64) string {
		o := ring.Owner(fp)
		if o != "" && o != c.cfg.Name {
			filed = append(filed, fp)
		}
		return o
	})
	if err == nil {
		c.markSent(ring, filed)
	}
	return local, err
}

// FileForeign implements node.LocalSplitter: RouteForeign without the
// wait. The discovered URLs another member owns are queued for the outbox
// in one write (all their owners together), and filed reports whether it
// is durable; its answer is final once a Sync called after FileForeign
// returned has returned. The node's frontier calls Sync before each
// commit, so the page they were found on is recorded as fetched only once
// they are durable (filed is its frontier.Result.Durable): a page's trip
// does not wait for the outbox's fsync, and no discovered URL is lost.
// The URLs are marked filed (sentFilter) once the write committed.
func (c *Cluster) FileForeign(ctx context.Context, urls []frontier.NewURL) (local []frontier.NewURL, filed func() bool, err error) {
	ring := c.ring.Load()
	local, files, fps := c.byOwner(ring, c.unsent(ring, urls))
	if len(fps) == 0 {
		return local, nil, nil
	}
	f, err := c.outbox.QueueEntries(ctx, files, func() { c.markSent(ring, fps) }, nil)
	if err != nil {
		return nil, nil, err
	}
	return local, f.Durable, nil
}

// Sync implements node.LocalSplitter: it returns once every write
// FileForeign queued before the call is committed or failed.
func (c *Cluster) Sync() { c.outbox.Sync() }

// unsent returns urls without the plain ones filed already for their
// owner under ring (sentFilter); urls itself is left as it is.
func (c *Cluster) unsent(ring *ring.Ring, urls []frontier.NewURL) []frontier.NewURL {
	var out []frontier.NewURL
	skipped := false
	for i, u := range urls {
		if plain(u) && c.sent.seen(ring, frontier.Fingerprint(u.URL)) {
			if !skipped {
				out, skipped = append(make([]frontier.NewURL, 0, len(urls)-1), urls[:i]...), true
			}
			continue
		}
		if skipped {
			out = append(out, u)
		}
	}
	if !skipped {
		return urls
	}
	return out
}

// markSent remembers the fingerprints fps, of URLs filed for other members
// under ring (nothing once the members changed: the filter is another
// ring's). A URL filed with more than its address is marked too: a later
// plain mention of it adds nothing, and a later one with more is sent.
func (c *Cluster) markSent(ring *ring.Ring, fps []uint64) {
	for _, fp := range fps {
		c.sent.mark(ring, fp)
	}
}

// fileFor files each URL, as kind, in the outbox of the member peerOf names
// for its fingerprint, and returns the URLs it names no other member for
// ("" or this node).
func (c *Cluster) fileFor(ctx context.Context, kind exchange.Kind, urls []frontier.NewURL, peerOf func(fp uint64) string) ([]frontier.NewURL, error) {
	var local []frontier.NewURL
	files := map[string][]exchange.Entry{}
	for _, u := range urls {
		o := peerOf(frontier.Fingerprint(u.URL))
		if o == "" || o == c.cfg.Name {
			local = append(local, u)
			continue
		}
		files[o] = append(files[o], exchange.Entry{Kind: kind, NewURL: u})
	}
	// One write for every peer: one commit to wait for, not one a peer.
	if err := c.outbox.PutEntries(ctx, files); err != nil {
		return nil, err
	}
	return local, nil
}

// byOwner splits urls by their owner in ring: those this node owns (or
// that have no owner) in local, the others as KindNew entries per owner in
// files, with their fingerprints in fps.
func (c *Cluster) byOwner(ring *ring.Ring, urls []frontier.NewURL) (local []frontier.NewURL, files map[string][]exchange.Entry, fps []uint64) {
	files = map[string][]exchange.Entry{}
	for _, u := range urls {
		fp := frontier.Fingerprint(u.URL)
		o := ring.Owner(fp)
		if o == "" || o == c.cfg.Name {
			local = append(local, u)
			continue
		}
		files[o] = append(files[o], exchange.Entry{Kind: exchange.KindNew, NewURL: u})
		fps = append(fps, fp)
	}
	return local, files, fps
}
