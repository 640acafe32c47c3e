package cluster

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// NodeConfig configures Start: the cluster layer of one node.
type NodeConfig struct {
	// Name is the member name (--name). Required.
	Name string
	// Gossip is the gossip address HOST:PORT (--gossip). Required.
	Gossip string
	// Join lists gossip addresses of existing members (--join).
	Join []string
	// Key is the cluster key (--cluster-key-file). Required.
	Key []byte
	// TLS runs the URL exchange over mutual TLS as well (ExchangeConfig.TLS;
	// config cluster.tls_*, config.Cluster.ClusterTLS). Default nil: no TLS.
	TLS *tls.Config
	// Exchange is the URL exchange listen address HOST:PORT (--exchange). Required.
	Exchange string
	// API is the node's HTTP API address, gossiped in the member metadata.
	API string
	// Outbox is the path of the outbox bbolt file (e.g. <data>/outbox.db). Required.
	Outbox string
	// Phases, PhaseDuration, Guard and Columns configure the Schedule (see ScheduleConfig).
	Phases        int
	PhaseDuration time.Duration
	Guard         time.Duration
	Columns       int
	// NTP lists NTP servers; empty: the local clock (zero offset and uncertainty).
	NTP []string
	// Wake is called when URLs owned here arrived from a peer (the node's scheduler wake-up). Optional.
	Wake func()
	// Tune adjusts memberlist's configuration (tests: FastTimings). Optional.
	Tune func(*memberlist.Config)
	// NoSync skips fsync on the outbox (tests only).
	NoSync bool
	// LeaveTimeout bounds the leave broadcast at Close. Default 5s.
	LeaveTimeout time.Duration
	// HandoffTimeout bounds the hand-off at Close: moving every record to
	// its new owner and waiting for the outbox to drain. Default 60s.
	HandoffTimeout time.Duration
	// BatchDelay is the exchange's MaxDelay: the longest a partial batch
	// waits. 0: the exchange's default (DefaultExchangeConfig, 10ms).
	BatchDelay time.Duration
	// TakeoverAfter is how long the URLs owned by a member declared dead
	// wait (Held) before this node crawls those that reach it; 0: at once.
	TakeoverAfter time.Duration
	// Scope is the node's seed-host set, the crawl's scope when no
	// allow_hosts or allow_domains are configured: the cluster gives every
	// member the same set (KindScope). nil: the configuration alone is
	// the scope.
	Scope ScopeDelegate
	// MaxPagesPerHost is scope.max_pages_per_host, the cluster's per-host
	// admission cap (0 = unlimited): the node's frontier admits ShareCap
	// of it for its share of each host.
	MaxPagesPerHost int
	// Redirects remembers the redirect chain lengths that discovered URLs
	// carry (NewURL.Redirects) for the node's fetch.max_redirects. nil:
	// chains are counted per member.
	Redirects RedirectMemory
	// Robots takes the robots.txt records the other members fetched. nil:
	// they are dropped.
	Robots RobotsCache
	// ScopeDigest identifies the node's scope settings (ScopeDigestOf); a
	// node refuses to join members whose digest differs.
	ScopeDigest string
	// Unit is the politeness unit a host's phase is hashed from
	// (politeness.key; nil: the host). Every member must use the same:
	// NodeConfigFrom puts it in ScopeDigest.
	Unit frontier.Unit
	// JoinTimeout bounds how long a starting node waits, before it
	// fetches, for every member to have moved the records it owns to it
	// (see Cluster). Default 2m.
	JoinTimeout time.Duration
	// FenceAfter: a node that has not heard from a majority of its agreed
	// member view for this long starts no request (quorum.go). Default 5s.
	FenceAfter time.Duration
	// ReconnectInterval is how often the node tries to join the members
	// declared dead and the Join addresses again (reconnect.go). Default 10s.
	ReconnectInterval time.Duration
	// Lend lends the URLs waiting for this node's turn on their host's
	// phase to the member that works on that phase now (cluster.lend,
	// lend.go).
	Lend bool
	// Guests takes the URLs other members lend this node (the node's
	// guest pool). nil: lends are dropped.
	Guests GuestPool
	// Revisit is this node's revisit schedule of a host (recrawl.interval,
	// a site's revisit): the outcome of a URL lent to another member makes
	// the record due again as this node's own fetch does. nil: lent pages
	// are not revisited.
	Revisit func(host string) frontier.Schedule
	// ReconnectTimeout is how long after a member was declared dead the
	// node keeps trying to reach it; 0: forever. Default 24h.
	ReconnectTimeout time.Duration
}

// NodeConfigFrom builds the cluster layer's configuration from a node's
// configuration (its cluster section), the cluster key, the API address to
// gossip and the scheduler's wake-up.
func NodeConfigFrom(cfg config.Config, key []byte, api string, wake func()) NodeConfig {
	k := cfg.Cluster
	// node.New refused a bad politeness.key or private suffix already.
	u, unitName, _ := fetch.PolitenessUnit(cfg.Politeness.Key, cfg.Scope.PrivateSuffixes)
	var unit frontier.Unit
	if u != nil {
		unit = u
	}
	digest := ScopeDigestOf(cfg.Scope)
	if unitName != "host" {
		digest = scopeDigest(cfg.Scope, "politeness.key="+unitName)
	}
	var tune func(*memberlist.Config)
	if k.FastGossip {
		tune = FastTimings
	}
	return NodeConfig{
		Name: cfg.Name, Gossip: k.Gossip, Join: k.Join, Key: key, Exchange: k.ExchangeAddr(), API: api,
		Outbox: filepath.Join(cfg.Data, "outbox.db"), Phases: k.Phases, PhaseDuration: k.PhaseDuration,
		Guard: k.PhaseGuard(), Columns: cfg.Bucket.Columns, NTP: k.NTP, Wake: wake,
		HandoffTimeout: k.HandoffTimeout, JoinTimeout: k.JoinTimeout, BatchDelay: k.BatchDelay, Tune: tune,
		TakeoverAfter: k.TakeoverAfter, ScopeDigest: digest, MaxPagesPerHost: cfg.Scope.MaxPagesPerHost,
		FenceAfter: k.FenceAfter, ReconnectInterval: k.ReconnectInterval, ReconnectTimeout: k.ReconnectTimeout,
		Lend: k.Lend, Revisit: RevisitSchedule(cfg), Unit: unit,
	}
}

// RevisitSchedule is the revisit schedule cfg gives a host: its
// recrawl.interval or its site's revisit, adaptive as recrawl says; the
// zero Schedule when the host's pages are fetched once.
func RevisitSchedule(cfg config.Config) func(host string) frontier.Schedule {
	r := cfg.Recrawl
	return func(host string) frontier.Schedule {
		iv := cfg.RevisitFor(host)
		if iv <= 0 {
			return frontier.Schedule{}
		}
		return frontier.Schedule{Interval: iv, Adaptive: r.Adaptive, Min: r.MinInterval, Max: r.MaxInterval}
	}
}

// RedirectMemory keeps the redirect chain lengths of URLs this node will
// fetch, so that a chain is limited however many members it crosses.
type RedirectMemory interface {
	RememberRedirects(urls []frontier.NewURL)
}

// GuestPool takes the URLs other members lend this node (lend.go) and
// returns those it cannot take now, for their owners to have back at once.
type GuestPool interface {
	AddGuests([]frontier.Guest) []frontier.Guest
}

// ScopeDelegate keeps the node's seed hosts for the cluster. The node's
// scope is its configuration plus, when no allow_hosts or allow_domains is
// set, the hosts of the seeds posted to any member.
type ScopeDelegate interface {
	// SeedHosts returns every seed host known to the node.
	SeedHosts() []string
	// AddSeedHosts durably adds hosts (learned from another member) and
	// returns those that were new.
	AddSeedHosts(hosts []string) ([]string, error)
}

// ScopeDigestOf is a short digest of the scope settings that must be the
// same on every member: allowed hosts and domains, include and exclude
// patterns, the depth and per-host page limits, the canonicalization
// (the normalized URL is a URL's identity between members) and the trap
// limits.
func ScopeDigestOf(s config.Scope) string { return scopeDigest(s) }

// scopeDigest is ScopeDigestOf with extra settings that must match too
// (the politeness unit). The private suffixes and the host cap count only
// when set, so that the digest of a scope without them is unchanged.
func scopeDigest(s config.Scope, extra ...string) string {
	h := sha256.New()
	parts := [][]string{s.AllowHosts, s.AllowDomains, s.Include, s.Exclude,
		{strconv.Itoa(s.MaxDepth), strconv.Itoa(s.MaxPagesPerHost)}, s.Canonical.StripParams,
		{strconv.FormatBool(s.Canonical.SortQuery), strconv.Itoa(s.MaxSegmentRepeats), strconv.Itoa(s.MaxPathDepth),
			strconv.Itoa(s.MaxQueryParams), strconv.Itoa(s.MaxPatternDepth), strconv.Itoa(s.MaxQuerySets)}}
	if len(s.PrivateSuffixes) > 0 || len(extra) > 0 {
		parts = append(parts, s.PrivateSuffixes, extra)
	}
	for _, part := range parts {
		for _, v := range part {
			h.Write([]byte(v))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Cluster is the cluster layer of one node: membership, the durable outbox
// and the URL exchange, the cluster clock and the phase schedule. It gives
// the node its Router (Route) and PhaseClock (PhaseClock) and follows
// membership changes: the ownership ring and the exchange addresses are
// replaced at once, the schedule's member list at the next epoch boundary.
//
// Rebalance: after every change of the ring, a background scan moves the
// records another member now owns to it through the outbox (IN_LIST and
// STALLED URLs to be crawled there, the fingerprints of COMPLETED ones so
// they are not crawled again) and deletes them locally; when the outbox
// has delivered them the node gossips that it is settled for that member
// set. A starting node (a new one, or one restarted after a crash) does not
// fetch until every member is settled for the member set it sees, so it
// never crawls what another member fetched while it was away. Close is the
// graceful leave: stop receiving, hand every record to the owners without
// this node, wait for the outbox to drain, then leave the gossip (Serf's
// recipe). URLs received for a URL owned by another member are forwarded.
type Cluster struct {
	cfg     NodeConfig
	log     *slog.Logger
	front   Records
	outbox  *Outbox
	x       *Exchange
	members *Members
	clock   *Clock // nil when no NTP server is configured
	sched   *Schedule
	lead    time.Duration // announceLeadOf the gossip timings
	sent    *sentFilter   // URLs filed for their owners (KindNew)

	ring  atomic.Pointer[Ring]
	away  atomic.Pointer[away]              // members declared dead whose share waits (Held); nil: none
	addrs atomic.Pointer[map[string]string] // member name -> exchange address
	alive atomic.Int64                      // members seen alive, this one included
	q     *quorum                           // heartbeats heard and the fence (quorum.go)
	updMu sync.Mutex                        // serializes update
	// updKick asks follow to apply the membership again (quorum.go).
	updKick chan struct{}

	peersLeaving atomic.Pointer[map[string]bool] // other members handing off before they leave
	// stayRing is the ring without the members handing off (nil when none
	// is): the owners their records go to, and their lent URLs' outcomes.
	stayRing atomic.Pointer[Ring]

	scopeMu   sync.Mutex       // guards scopeSent
	scopeSent map[string]int64 // members alive at the last update (name -> Started): they have our seed hosts

	metaMu sync.Mutex // guards meta and serializes its updates
	meta   NodeMeta

	leaving     atomic.Bool  // Close runs the hand-off: nothing is owned here any more
	joining     atomic.Bool  // started, and not every member is settled for us yet
	gateSince   atomic.Int64 // after a freeze: members' states received before this (unix ns) do not count (gate)
	rebalancing atomic.Bool
	rebKick     chan struct{}
	viewKick    chan struct{}            // the schedule's latest list or its epoch changed: gossip them (announceView)
	view        atomic.Pointer[NodeMeta] // View and ViewFrom to gossip
	swaps       atomic.Uint64
	pauses      atomic.Uint64 // times the process was found frozen (watchPhases)
	lends       lending       // URLs lent to other members (lend.go)
	lendKick    chan struct{} // URLs arrived: lend now
	repl        lentReplicas  // replicas of settled lent pages, filed off the receive path (lend.go)
	// awayAtGate is, from the opening of the join gate, the members that
	// were away then and have not come back settled since; lendHeld is
	// set while there are any (lend.go, lendHoldUpdate).
	awayAtGate atomic.Pointer[map[string]bool]
	// known is every member this process has heard of, failed and gone
	// ones included (update); started is when the process started.
	known     atomic.Pointer[map[string]bool]
	started   time.Time
	lendHeld  atomic.Bool
	movedURLs atomic.Uint64
	movedFPs  atomic.Uint64

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	rebCancel context.CancelFunc // stops the rebalance loop and the join gate (hand-off)
	rebWG     sync.WaitGroup
	recCancel context.CancelFunc // stops the reconnect loop (before the leave)
	recWG     sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// errLeaving answers batches that arrive while this node hands its records
// off: the sender keeps them and re-files them once the node is gone.
var errLeaving = errors.New("cluster: this node is leaving the cluster")

// localStore is the exchange's Receiver: it stores the discovered URLs
// this node owns and forwards (through the outbox) those another member
// owns, which happens when a sender's view of the membership is behind;
// records moved by a rebalance (KindMoved, KindDone) and replicas
// (KindReplica) are kept here, where their sender chose to put them, and a
// rebalance moves them on if this node's ring says another member owns
// them.
type localStore struct{ c *Cluster }

// Receive implements Receiver.
func (l localStore) Receive(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	return l.c.store(ctx, kind, urls)
}

func (c *Cluster) store(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	return c.storeURLs(ctx, kind, urls, nil)
}

// storeURLs is store; added, when not nil, gets the URLs of a KindNew or
// KindMoved batch that were new in the frontier.
func (c *Cluster) storeURLs(ctx context.Context, kind Kind, urls []frontier.NewURL, added *[]frontier.NewURL) (int, error) {
	if len(urls) == 0 {
		return 0, nil
	}
	switch kind {
	case KindScope:
		return c.addSeedHosts(urls)
	case KindRobots:
		return c.importRobots(urls), nil
	case KindLend:
		return c.takeLends(ctx, urls), nil
	}
	ring := c.ring.Load()
	if c.leaving.Load() && ring.Len() > 0 {
		if kind == KindOutcome {
			// Settled here if the record has not left yet (it then leaves
			// as a completed one), forwarded to the next owner otherwise.
			return c.settleLent(ctx, urls)
		}
		return 0, errLeaving
	}
	if kind == KindMoved {
		u := time.Duration(0)
		if c.clock != nil {
			u = c.clock.Uncertainty()
		}
		urls = c.takeMoved(urls, u) // marks set before the records are stored
	}
	if c.cfg.Redirects != nil && (kind == KindNew || kind == KindMoved) {
		c.cfg.Redirects.RememberRedirects(urls)
	}
	var local []frontier.NewURL
	var fwd map[string][]frontier.NewURL
	foreign := false
	for _, u := range urls {
		o := ring.Owner(frontier.Fingerprint(u.URL))
		if o == "" || o == c.cfg.Name || kind != KindNew {
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
		if err := c.outbox.put(ctx, peer, kind, us); err != nil {
			return 0, err
		}
	}
	if len(local) == 0 {
		return 0, nil
	}
	var n int
	var err error
	switch kind {
	case KindDone:
		n, err = c.front.AddDone(ctx, local)
	case KindOutcome:
		n, err = c.settleLent(ctx, local)
		foreign = false
	case KindReplica:
		// Kept here whoever owns them: a rebalance leaves a replica where
		// this node ranks second for its URL, and moves it otherwise.
		n, err = c.front.AddReplicas(ctx, local)
		foreign = false
	default:
		if added != nil {
			*added, err = c.front.AddNew(ctx, local)
			n = len(*added)
		} else {
			n, err = c.front.Add(ctx, local)
		}
		if err == nil && kind == KindMoved {
			// Outcomes that came before their records settle them now.
			if early := c.lends.takeEarly(local, time.Now()); len(early) > 0 {
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
	if n > 0 && (kind == KindNew || kind == KindMoved) {
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
func (c *Cluster) replicaOf(ring *Ring, fp uint64) string {
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
	_, err := c.fileFor(ctx, KindReplica, done, func(fp uint64) string { return c.replicaOf(ring, fp) })
	return err
}

// QueueReplicas implements node.Replicator: Replicate without the wait.
// The write is queued for the outbox and a failure is logged: a replica
// lost with a crash in the moment before its write costs a page fetched
// again only should this node never come back, and the page's trip does
// not wait for the outbox's fsync.
func (c *Cluster) QueueReplicas(ctx context.Context, done []frontier.NewURL) error {
	ring := c.ring.Load()
	files := map[string][]Entry{}
	for _, u := range done {
		if o := c.replicaOf(ring, frontier.Fingerprint(u.URL)); o != "" && o != c.cfg.Name {
			files[o] = append(files[o], Entry{Kind: KindReplica, NewURL: u})
		}
	}
	_, err := c.outbox.queueEntries(ctx, files, nil, func(err error) {
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
	local, err := c.fileFor(ctx, KindNew, urls, func(fp uint64) string {
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
	urls = c.unsent(ring, urls)
	files := map[string][]Entry{}
	var fps []uint64
	for _, u := range urls {
		fp := frontier.Fingerprint(u.URL)
		o := ring.Owner(fp)
		if o == "" || o == c.cfg.Name {
			local = append(local, u)
			continue
		}
		files[o] = append(files[o], Entry{Kind: KindNew, NewURL: u})
		fps = append(fps, fp)
	}
	if len(fps) == 0 {
		return local, nil, nil
	}
	f, err := c.outbox.queueEntries(ctx, files, func() { c.markSent(ring, fps) }, nil)
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
func (c *Cluster) unsent(ring *Ring, urls []frontier.NewURL) []frontier.NewURL {
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
func (c *Cluster) markSent(ring *Ring, fps []uint64) {
	for _, fp := range fps {
		c.sent.mark(ring, fp)
	}
}

// fileFor files each URL, as kind, in the outbox of the member peerOf names
// for its fingerprint, and returns the URLs it names no other member for
// ("" or this node).
func (c *Cluster) fileFor(ctx context.Context, kind Kind, urls []frontier.NewURL, peerOf func(fp uint64) string) ([]frontier.NewURL, error) {
	var local []frontier.NewURL
	files := map[string][]Entry{}
	for _, u := range urls {
		o := peerOf(frontier.Fingerprint(u.URL))
		if o == "" || o == c.cfg.Name {
			local = append(local, u)
			continue
		}
		files[o] = append(files[o], Entry{Kind: kind, NewURL: u})
	}
	// One write for every peer: one commit to wait for, not one a peer.
	if err := c.outbox.putEntries(ctx, files); err != nil {
		return nil, err
	}
	return local, nil
}

// Start opens the outbox, starts the exchange listener, the clock and
// gossip (joining cfg.Join), and follows membership until Close.
func Start(cfg NodeConfig, f *frontier.Frontier, logger *slog.Logger) (*Cluster, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.Name == "" || cfg.Gossip == "" || cfg.Exchange == "" || cfg.Outbox == "" || f == nil {
		return nil, errors.New("cluster: start: name, gossip, exchange, outbox and frontier are required")
	}
	if cfg.LeaveTimeout <= 0 {
		cfg.LeaveTimeout = 5 * time.Second
	}
	if cfg.HandoffTimeout <= 0 {
		cfg.HandoffTimeout = time.Minute
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 2 * time.Minute
	}
	if cfg.FenceAfter <= 0 {
		cfg.FenceAfter = 5 * time.Second
	}
	if cfg.ReconnectInterval <= 0 {
		cfg.ReconnectInterval = 10 * time.Second
	}
	c := &Cluster{cfg: cfg, log: logger.With("component", "cluster"), front: Records{Frontier: f}, started: time.Now(), rebKick: make(chan struct{}, 1), viewKick: make(chan struct{}, 1), lendKick: make(chan struct{}, 1),
		updKick: make(chan struct{}, 1), q: newQuorum(cfg.Name, cfg.FenceAfter)}
	if cfg.Lend {
		// Before the exchange and the rebalance start: both read them.
		c.lends.marks, c.lends.out, c.lends.cursors = map[uint64]lendMark{}, map[string]int{}, map[string]lendCursor{}
		c.lends.again = map[uint64]frontier.Ref{}
	}
	// No owner is known until update applies the membership: the
	// exchange, started before the join, keeps the URLs a previous process
	// left in the outbox for their owners instead of taking them as this
	// node's own.
	c.ring.Store(NewRing(nil))
	c.sent = newSentFilter(c.ring.Load())
	c.peersLeaving.Store(&map[string]bool{})
	c.addrs.Store(&map[string]string{})
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel

	oc := DefaultOutboxConfig(cfg.Outbox)
	oc.NoSync, oc.Logger = cfg.NoSync, logger
	var err error
	if c.outbox, err = OpenOutbox(oc); err != nil {
		return nil, err
	}
	var ts TimeSource = LocalClock{}
	if len(cfg.NTP) > 0 {
		cc := DefaultClockConfig(cfg.NTP...)
		cc.Logger = logger
		if c.clock, err = NewClock(cc); err != nil {
			return nil, err
		}
		_ = c.clock.Sync(ctx) // a first measurement before the schedule is used; failures are logged
		ts = c.clock
		c.wg.Go(func() { _ = c.clock.Run(ctx) })
	} else {
		c.log.Warn("no NTP server configured (--ntp): cluster time is the local clock")
	}
	c.lead = announceLeadOf(cfg.Tune)
	sc := DefaultScheduleConfig(cfg.Name)
	sc.Phases, sc.PhaseDuration, sc.Guard, sc.Columns, sc.Clock = cfg.Phases, cfg.PhaseDuration, cfg.Guard, cfg.Columns, ts
	if c.sched, err = NewSchedule(sc); err != nil {
		return nil, err
	}
	c.sched.SetHold(true) // until the members moved our records to us (gate)
	c.joining.Store(true)
	xc := DefaultExchangeConfig()
	xc.Name, xc.Listen, xc.Key, xc.Logger = cfg.Name, cfg.Exchange, cfg.Key, logger
	xc.TLS = cfg.TLS
	if cfg.BatchDelay > 0 {
		xc.MaxDelay = cfg.BatchDelay
	}
	xc.Outbox = c.outbox
	xc.Local = localStore{c}
	xc.OwnerOf = func(u frontier.NewURL) string { return c.ring.Load().Owner(frontier.Fingerprint(u.URL)) }
	xc.ReplicaOf = func(u frontier.NewURL) string { return c.replicaOf(c.ring.Load(), frontier.Fingerprint(u.URL)) }
	xc.OutcomeOf = func(peer string, u frontier.NewURL) string {
		if (*c.peersLeaving.Load())[peer] {
			return c.stayOwner(frontier.Fingerprint(u.URL)) // it refuses them: its records go there
		}
		if c.keepFor(peer) {
			return "" // the lender keeps the record
		}
		return c.outcomeOwner(frontier.Fingerprint(u.URL))
	}
	if cfg.Lend {
		xc.Lender = localStore{c}
	}
	xc.AddrOf = func(peer string) (string, bool) {
		a, ok := (*c.addrs.Load())[peer]
		return a, ok
	}
	if c.x, err = NewExchange(xc); err != nil {
		return nil, err
	}
	meta := NodeMeta{API: cfg.API, Exchange: c.x.Addr(), From: c.sched.AnnounceEpoch(time.Now(), c.lead), Started: time.Now().UnixNano(),
		Scope: cfg.ScopeDigest}
	c.members, err = StartMembers(MembersConfig{
		Name: cfg.Name, BindAddr: cfg.Gossip, Join: cfg.Join, SecretKey: cfg.Key,
		Meta: meta, Logger: logger, Tune: cfg.Tune,
		OnMessage: func(b []byte) { c.q.hear(b, time.Now()) },
	})
	if err != nil {
		return nil, err
	}
	if err := checkScope(cfg.Name, cfg.ScopeDigest, c.members.Alive()); err != nil {
		return nil, err
	}
	if h, p, err := net.SplitHostPort(meta.Exchange); err == nil {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			// Listening on all addresses: advertise the gossip address's host.
			gh, _, _ := net.SplitHostPort(c.members.Addr())
			meta.Exchange = net.JoinHostPort(gh, p)
			if err := c.members.SetMeta(meta, 5*time.Second); err != nil {
				c.log.Warn("cannot gossip the exchange address", "error", err)
			}
		}
	}
	c.meta = meta
	c.update()
	signal(c.rebKick) // settle for the first member set even if it is just us
	c.repl.start()
	c.wg.Go(c.replicateLoop)
	c.wg.Go(func() { c.follow(ctx) })
	c.wg.Go(func() { c.announceView(ctx) })
	c.wg.Go(func() { c.watchPhases(ctx) })
	c.wg.Go(func() { c.watchQuorum(ctx) })
	recCtx, recCancel := context.WithCancel(ctx)
	c.recCancel = recCancel
	c.recWG.Go(func() { c.reconnect(recCtx) })
	rctx, rcancel := context.WithCancel(ctx)
	c.rebCancel = rcancel
	c.rebWG.Go(func() { c.rebalanceLoop(rctx) })
	c.rebWG.Go(func() { c.gate(rctx) })
	if cfg.Lend {
		c.rebWG.Go(func() { c.lendLoop(rctx) })
	}
	c.log.Info("cluster layer started", "gossip", c.members.Addr(), "exchange", meta.Exchange, "members", c.ring.Load().Len())
	ok = true
	return c, nil
}

// follow applies membership changes until ctx is done.
func (c *Cluster) follow(ctx context.Context) {
	for {
		var expire <-chan time.Time
		var timer *time.Timer
		if a := c.away.Load(); a != nil {
			timer = time.NewTimer(time.Until(a.next))
			expire = timer.C
		}
		stop := func() {
			if timer != nil {
				timer.Stop()
			}
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-c.members.Changes():
			stop()
			c.update()
		case <-c.updKick:
			stop()
			c.update()
		case <-expire:
			// A member's wait ended: its share is crawled here from now
			// (update logs it).
			c.update()
		}
	}
}

// update applies the current membership: the ownership ring and exchange
// addresses now, the schedule's member list from the next epoch boundary; a
// change of the ring starts a rebalance.
func (c *Cluster) update() {
	c.updMu.Lock()
	defer c.updMu.Unlock()
	alive := c.members.Alive()
	names := make([]string, 0, len(alive))
	addrs := make(map[string]string, len(alive))
	for _, m := range alive {
		names = append(names, m.Name)
		if m.Exchange != "" {
			addrs[m.Name] = m.Exchange
		}
	}
	c.addrs.Store(&addrs)
	c.alive.Store(int64(len(names)))
	// Before anything else is filed for them (a rebalance's records):
	// members come alive get this node's seed hosts first.
	c.shareScopeWith(c.newlyAlive(alive))
	// A member handing its records off before it leaves keeps its share
	// until it is gone (URLs discovered for it wait in the outboxes, and
	// what it hands off stays where it arrives); the leaving node itself
	// hands off to the members that stay.
	leaving := c.leaving.Load()
	owners := make([]string, 0, len(alive))
	procs := make([]string, 0, len(alive)) // name/started of each owner: the ring's ID
	peersLeaving := map[string]bool{}
	for _, m := range alive {
		if m.Leaving && m.Name != c.cfg.Name {
			peersLeaving[m.Name] = true
		}
		if !leaving || (m.Name != c.cfg.Name && !m.Leaving) {
			owners = append(owners, m.Name)
			procs = append(procs, fmt.Sprintf("%s/%d", m.Name, m.Started))
		}
	}
	c.peersLeaving.Store(&peersLeaving)
	if len(peersLeaving) > 0 {
		stay := make([]string, 0, len(owners))
		for _, o := range owners {
			if !peersLeaving[o] {
				stay = append(stay, o)
			}
		}
		c.stayRing.Store(NewRing(stay))
	} else {
		c.stayRing.Store(nil)
	}
	var from int64
	if !leaving {
		// A member declared dead stays in the schedule for a while, and
		// while this node does not see a majority (quorum.go).
		names, dropped := c.scheduleNames(names, time.Now())
		announced, agreed := c.announced(names), c.agreed(names)
		notBefore := max(announced, agreed)
		if latest := c.sched.Latest(); (announced == 0 || dropped) && agreed == 0 && latest != nil && !equalStrings(latest, NewRing(names).Members()) {
			// A failure: nobody announced the epoch, and no member
			// scheduled this list yet. Choose one far enough ahead for
			// the members' choices (gossiped as NodeMeta.ViewFrom) to
			// meet before its guard starts; a member that comes to the
			// same list later takes the epoch gossiped.
			notBefore = max(notBefore, c.sched.AnnounceEpoch(time.Now(), c.lead))
		}
		from = c.sched.SetMembersAfter(names, notBefore)
		if dropped {
			c.log.Info("phase schedule without the members declared dead", "schedule", names, "from_epoch", from,
				"after", c.excludeAfter())
		}
		v := &NodeMeta{View: RingHash(names), ViewFrom: from, ViewSize: len(names)}
		if old := c.view.Swap(v); old == nil || *old != *v {
			signal(c.viewKick)
		}
	}
	known := map[string]bool{}
	for _, m := range c.members.All() {
		known[m.Name] = true
		if m.State == StateDead {
			c.x.Reset(m.Name) // an ack it owes may never come (a cut)
		}
	}
	c.known.Store(&known)
	now := time.Now()
	prevAway := c.away.Load()
	c.away.Store(c.computeAway(owners, now))
	if over := prevAway.over(c.away.Load(), owners, now); len(over) > 0 {
		// Whichever event brought this update (the takeover timer, or
		// another that came at the same moment), the wait of these
		// members ended: their URLs are crawled here now.
		c.log.Info("members away too long: crawling their share", "members", over, "away", c.Away(), "takeover_after", c.cfg.TakeoverAfter)
		if c.cfg.Wake != nil {
			c.cfg.Wake()
		}
	}
	ring := NewRing(owners)
	ring.id = RingHash(procs)
	if old := c.ring.Load(); !equalStrings(old.Members(), ring.Members()) || old.ID() != ring.ID() {
		c.ring.Store(ring)
		c.sent.reset(ring) // owners may have changed
		if c.cfg.MaxPagesPerHost > 0 {
			c.front.SetMaxPerHost(ShareCap(c.cfg.MaxPagesPerHost, ring.Len()))
		}
		if !leaving {
			c.log.Info("membership changed", "members", names, "schedule_from_epoch", from)
			signal(c.rebKick)
		}
	}
	c.x.Kick()
}

// announceLeadGossips is how far ahead, in gossip intervals, a joining or
// leaving node announces the epoch its change applies from (NodeMeta.From):
// time for the news to reach every member by gossip. memberlist's LAN
// timings gossip every 200ms (a lead of 2s); FastTimings every 50ms (0.5s).
const announceLeadGossips = 10

// announceLeadOf is the announce lead of a member whose memberlist
// configuration tune changes (nil: the LAN timings).
func announceLeadOf(tune func(*memberlist.Config)) time.Duration {
	mc := memberlist.DefaultLANConfig()
	if tune != nil {
		tune(mc)
	}
	return announceLeadGossips * mc.GossipInterval
}

// announced returns the latest epoch announced (NodeMeta.From) by the
// members that join or leave in the change from the schedule's latest list
// to names; 0 when none announced one (a failure).
func (c *Cluster) announced(names []string) int64 {
	latest := c.sched.Latest()
	var from int64
	for _, m := range c.members.All() {
		if m.From != 0 && slices.Contains(names, m.Name) != slices.Contains(latest, m.Name) {
			from = max(from, m.From)
		}
	}
	return from
}

// agreed returns the latest epoch any member gossiped (NodeMeta.ViewFrom)
// for the member list names; 0 when none did.
func (c *Cluster) agreed(names []string) int64 {
	h := RingHash(names)
	var from int64
	for _, m := range c.members.All() {
		if m.View == h {
			from = max(from, m.ViewFrom)
		}
	}
	return from
}

// announceView gossips the member list this node scheduled last and its
// epoch (NodeMeta.View, ViewFrom) whenever update changes them, until ctx
// is done. It runs apart from update because gossiping metadata waits for
// the broadcast.
func (c *Cluster) announceView(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.viewKick:
			if v := c.view.Load(); v != nil {
				c.setMeta(func(m *NodeMeta) { m.View, m.ViewFrom, m.ViewSize = v.View, v.ViewFrom, v.ViewSize })
			}
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Route implements node.Router: URLs owned here are added to the local
// frontier, the others go to the durable outbox of their owner.
func (c *Cluster) Route(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return c.x.Route(ctx, urls)
}

// PhaseClock returns the phase schedule; it implements node.PhaseClock and
// node.PhaseDeadline.
func (c *Cluster) PhaseClock() *Schedule { return c.sched }

// Members returns the membership.
func (c *Cluster) Members() *Members { return c.members }

// Outbox returns the outbox (URLs waiting for their owners).
func (c *Cluster) Outbox() *Outbox { return c.outbox }

// Exchange returns the URL exchange.
func (c *Cluster) Exchange() *Exchange { return c.x }

// Ring returns the current ownership ring.
func (c *Cluster) Ring() *Ring { return c.ring.Load() }

// Close leaves the cluster gracefully: it hands every record to its owner
// among the other members and waits (at most HandoffTimeout) for the outbox
// to drain, then leaves the gossip (leave broadcast, wait, shutdown), stops
// the exchange and the clock and closes the outbox. The node calls it after
// its workers stopped and before it closes its frontier.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var errs []error
		if c.recCancel != nil {
			c.recCancel() // no join after the leave
			c.recWG.Wait()
		}
		if c.members != nil {
			errs = append(errs, c.handoff())
			if c.ring.Load().Len() == 0 && c.alive.Load() > 1 {
				// Every other member is leaving too (a whole cluster
				// stopped at once): nobody is left to tell.
				_ = c.members.Leave(500 * time.Millisecond)
			} else {
				// Announce the epoch from which the others drop this node
				// from the phase schedule, so they all switch together.
				c.setMeta(func(m *NodeMeta) { m.From = c.sched.AnnounceEpoch(time.Now(), c.lead) })
				errs = append(errs, c.members.Leave(c.cfg.LeaveTimeout))
			}
		}
		if c.rebCancel != nil {
			c.rebCancel()
		}
		if c.cancel != nil {
			c.cancel()
		}
		if c.x != nil {
			errs = append(errs, c.x.Close())
		}
		c.rebWG.Wait()
		c.repl.stop() // nothing settles any more: replicateLoop files the rest and returns
		c.wg.Wait()
		if c.outbox != nil {
			errs = append(errs, c.outbox.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Deadline implements node.PhaseDeadline: the local time by which a request
// started at now must end so that it does not outlive this node's phase.
func (s *Schedule) Deadline(now time.Time) time.Time { return s.At(now).RequestDeadline }

// Handover implements node.PhaseDeadline: the latest local time at which the
// member that had this node's current phase in the previous epoch may have
// started a request (its guard start; its clock may be 2×uncertainty ahead
// of ours).
func (s *Schedule) Handover(now time.Time) time.Time {
	cnow, u := s.clusterNow(now)
	g, _ := s.guard(u)
	start := EpochStart(Epoch(cnow, s.cfg.PhaseDuration), s.cfg.PhaseDuration)
	return now.Add(start.Add(-g + 2*max(u, 0)).Sub(cnow))
}
