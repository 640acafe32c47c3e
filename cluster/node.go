package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/lend"
	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/cluster/phase"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
)

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
	cfg    NodeConfig
	log    *slog.Logger
	front  RecordWriter
	outbox *exchange.Outbox
	x      *exchange.Stream
	// members is the gossip membership; clock is nil when no NTP server
	// is configured.
	members *membership.Members
	clock   *phase.Clock
	sched   *phase.Schedule
	lead    time.Duration // announceLeadOf the gossip timings
	sent    *sentFilter   // URLs filed for their owners (KindNew)
	q       *quorum       // heartbeats heard and the fence (quorum.go)

	memberView // the membership as update applied it last
	joinState  // joining, the join gate, the hand-off
	shared     // the seed hosts shared and the metadata gossiped
	lendState  // URLs lent to other members (lend.go)
	rebState   // the rebalance and its counters
	stopper    // the goroutines' cancels, their waits and Close's result
}

// memberView is the membership as update applied it last: the owners'
// ring, the members away, the exchange addresses and the member list this
// node scheduled (gossiped by announceView).
type memberView struct {
	ring atomic.Pointer[ring.Ring]
	// ringPhases is the frontier's phase count when ring was stored: a
	// count changed since, the scheduler swapped under this ring.
	ringPhases atomic.Int64
	away       atomic.Pointer[membership.Away]   // members declared dead whose share waits (Held); nil: none
	addrs      atomic.Pointer[map[string]string] // member name -> exchange address
	alive      atomic.Int64                      // members seen alive, this one included
	updMu      sync.Mutex                        // serializes update
	// updKick asks follow to apply the membership again (quorum.go).
	updKick chan struct{}

	peersLeaving atomic.Pointer[map[string]bool] // other members handing off before they leave
	// stayRing is the ring without the members handing off (nil when none
	// is): the owners their records go to, and their lent URLs' outcomes.
	stayRing atomic.Pointer[ring.Ring]
	// known is every member this process has heard of, failed and gone
	// ones included (update).
	known    atomic.Pointer[map[string]bool]
	viewKick chan struct{}                       // the schedule's latest list or its epoch changed: gossip them (announceView)
	view     atomic.Pointer[membership.NodeMeta] // View and ViewFrom to gossip
}

// joinState is where this node is between its start and its leave.
type joinState struct {
	leaving   atomic.Bool  // Close runs the hand-off: nothing is owned here any more
	joining   atomic.Bool  // started, and not every member is settled for us yet
	startHold atomic.Bool  // started, not settled yet: this node's own URLs are held (Held), its phase is not
	gateSince atomic.Int64 // after a freeze: members' states received before this (unix ns) do not count (gate)
	started   time.Time    // when the process started
	swaps     atomic.Uint64
	pauses    atomic.Uint64 // times the process was found frozen (watchPhases)
}

// shared is what this node tells the members: its seed hosts (scope.go)
// and its gossiped metadata.
type shared struct {
	scopeMu   sync.Mutex       // guards scopeSent
	scopeSent map[string]int64 // members alive at the last update (name -> Started): they have our seed hosts

	metaMu sync.Mutex // guards meta and serializes its updates
	meta   membership.NodeMeta
}

// lendState is the lending's state (lend.go).
type lendState struct {
	lends    lend.Ledger   // URLs lent to other members
	lendKick chan struct{} // URLs arrived: lend now
	// awayAtGate is, from the opening of the join gate, the members that
	// were away then and have not come back settled since; lendHeld is
	// set while there are any (lendHoldUpdate).
	awayAtGate atomic.Pointer[map[string]bool]
	lendHeld   atomic.Bool
}

// rebState is the rebalance's kick and counters (rebalance.go).
type rebState struct {
	rebalancing atomic.Bool
	rebKick     chan struct{}
	movedURLs   atomic.Uint64
	movedFPs    atomic.Uint64
}

// stopper stops the cluster layer's goroutines (Close).
type stopper struct {
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	rebCancel context.CancelFunc // stops the rebalance loop and the join gate (hand-off)
	rebWG     sync.WaitGroup
	recCancel context.CancelFunc // stops the reconnect loop (before the leave)
	recWG     sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Start opens the outbox, starts the exchange listener, the clock and
// gossip (joining cfg.Join), and follows membership until Close.
func Start(cfg NodeConfig, f Records, logger *slog.Logger) (*Cluster, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.Name == "" || cfg.Gossip == "" || cfg.Exchange == "" || cfg.Outbox == "" || f == nil {
		return nil, errors.New("cluster: start: name, gossip, exchange, outbox and frontier are required")
	}
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	c := &Cluster{cfg: cfg, log: logger.With("component", "cluster"), front: RecordWriter{Records: f}, q: newQuorum(cfg.Name, cfg.FenceAfter)}
	c.started = time.Now()
	c.rebKick, c.viewKick, c.lendKick, c.updKick = make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	if cfg.Lend {
		// Before the exchange and the rebalance start: both read them.
		c.lends.Enable()
	}
	// No owner is known until update applies the membership: the
	// exchange, started before the join, keeps the URLs a previous process
	// left in the outbox for their owners instead of taking them as this
	// node's own.
	c.ringPhases.Store(int64(c.front.Phases()))
	c.ring.Store(ring.New(nil))
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

	oc := exchange.DefaultOutboxConfig(cfg.Outbox)
	oc.NoSync, oc.Logger = cfg.NoSync, logger
	var err error
	if c.outbox, err = exchange.OpenOutbox(oc); err != nil {
		return nil, err
	}
	var ts phase.TimeSource = phase.LocalClock{}
	if len(cfg.NTP) > 0 {
		cc := phase.DefaultClockConfig(cfg.NTP...)
		cc.Logger = logger
		if c.clock, err = phase.NewClock(cc); err != nil {
			return nil, err
		}
		_ = c.clock.Sync(ctx) // a first measurement before the schedule is used; failures are logged
		ts = c.clock
		c.wg.Go(func() { _ = c.clock.Run(ctx) })
	} else {
		c.log.Warn("no NTP server configured (--ntp): cluster time is the local clock")
	}
	c.lead = announceLeadOf(cfg.Tune)
	sc := phase.ScheduleConfig{Self: cfg.Name, Phases: cfg.Phases, PhaseDuration: cfg.PhaseDuration, Guard: cfg.Guard, Columns: cfg.Columns, Clock: ts}
	if c.sched, err = phase.NewSchedule(sc); err != nil {
		return nil, err
	}
	// Until the members moved our records to us (gate), none of them is
	// fetched here; the phase itself is taken at the instant announced,
	// and the URLs the others lend for it are fetched meanwhile.
	c.startHold.Store(true)
	c.joining.Store(true)
	xc := exchange.DefaultConfig()
	xc.Name, xc.Listen, xc.Key, xc.Logger = cfg.Name, cfg.Exchange, cfg.Key, logger
	xc.TLS = cfg.TLS
	if cfg.BatchDelay > 0 {
		xc.MaxDelay = cfg.BatchDelay
	}
	xc.Outbox = c.outbox
	xc.Local = localStore{c}
	xc.Directory = directory{c}
	if cfg.Lend {
		xc.Lender = localStore{c}
	}
	if c.x, err = exchange.New(xc); err != nil {
		return nil, err
	}
	// FromAt is announced once the gossip is joined (below): until then
	// the members leave this node out of their phase schedule.
	meta := membership.NodeMeta{API: cfg.API, Exchange: c.x.Addr(), Started: time.Now().UnixNano(), Scope: cfg.ScopeDigest}
	c.members, err = membership.StartMembers(membership.MembersConfig{
		Name: cfg.Name, BindAddr: cfg.Gossip, Join: cfg.Join, SecretKey: cfg.Key,
		Meta: meta, Logger: logger, Tune: cfg.Tune,
		OnMessage: func(b []byte) { c.q.Hear(b, time.Now()) },
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
		}
	}
	at := c.joinAt(time.Now())
	meta.FromAt = at.UnixNano()
	if err := c.members.SetMeta(meta, 5*time.Second); err != nil {
		c.log.Warn("cannot gossip this node's join", "error", err)
	}
	c.meta = meta
	c.update()
	signal(c.rebKick) // settle for the first member set even if it is just us
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

// Route implements node.Router: URLs owned here are added to the local
// frontier, the others go to the durable outbox of their owner.
func (c *Cluster) Route(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return c.x.Route(ctx, urls)
}

// PhaseClock returns the phase schedule; it implements node.PhaseClock and
// node.PhaseDeadline.
func (c *Cluster) PhaseClock() *phase.Schedule { return c.sched }

// Members returns the membership.
func (c *Cluster) Members() *membership.Members { return c.members }

// Outbox returns the outbox (URLs waiting for their owners).
func (c *Cluster) Outbox() *exchange.Outbox { return c.outbox }

// Exchange returns the URL exchange.
func (c *Cluster) Exchange() *exchange.Stream { return c.x }

// Ring returns the current ownership ring.
func (c *Cluster) Ring() *ring.Ring { return c.ring.Load() }

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
				c.setMeta(func(m *membership.NodeMeta) { m.From, m.FromAt = c.sched.AnnounceEpoch(time.Now(), c.lead), 0 })
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
		c.wg.Wait()
		if c.outbox != nil {
			errs = append(errs, c.outbox.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}
