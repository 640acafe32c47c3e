// Package node wires one phasecrawl node: the scheduler loop that moves URLs
// from the bbolt frontier into the prime-column bucket (KSpider §3.4), the
// workers that fetch a dispatched element's list over one connection to its
// host, the retry lane for STALLED URLs and the outputs (WARC, crawl log;
// output.go). Its HTTP API is package api, on the node's side api.go.
//
// Data flows one way: config -> node -> (frontier <-> bucket) -> fetch ->
// Router (the local frontier, or in a cluster the owner's frontier). The
// node takes its cluster layer as one ClusterDelegates of named delegates
// (cluster.go); launch.New wires the two.
package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/bandwidth"
	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/dnscache"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/clock"
	"github.com/phasecrawl/phasecrawl/robots"
	"github.com/phasecrawl/phasecrawl/urlscope"
	"github.com/prometheus/client_golang/prometheus"
)

// Options are the parts of a node that launch.New and the tests set.
type Options struct {
	Logger *slog.Logger
	// Listener, if set, serves the API instead of listening on cfg.HTTP.
	Listener net.Listener
	// Cluster starts the node's cluster layer right after the frontier
	// opens (the layer stores the URLs it receives there) and returns its
	// delegates, one per capability (see ClusterDelegates for each one's
	// default). nil is a node alone (Standalone); Delegates gives fixed
	// delegates. launch.New sets it when the configuration has a cluster
	// section.
	Cluster ClusterHook
	// Clock is the time the scheduler and the workers read: the pacing of
	// a host's requests, its back-off pauses, the retry times, the
	// elements' waits. nil is the real clock; the tests pass a
	// clock.Fake.
	Clock clock.Clock
}

// Node is one running crawler. Its state is in owned parts, each with
// the state of one job: the cluster layer's delegates, the per-host state,
// the outputs, the scheduler's channels and the counters.
type Node struct {
	spare  atomic.Pointer[float64] // the revisit plan's spare time, seconds (plan.go)
	cfg    config.Config
	log    *slog.Logger
	clock  clock.Clock // the scheduler's and the trips' time (Options.Clock)
	front  *frontier.Frontier
	bkt    *bucket.Bucket
	client *fetch.Client
	robots *robots.Cache
	scope  *urlscope.Scope
	traps  *traps      // trap limits on discovered URLs (traps.go)
	facets FacetSharer // tells the other members the facet sets admitted here; nil: nobody
	guests *guestPool  // URLs other members lent this node (guest.go)
	ctl    *control    // pause, resume and the crawl budget (control.go)
	disk   *diskGuard  // pauses the node while its data directory is short of space (storage.go)
	// hard is the memory of redirect chain lengths (hardening.go): set in
	// New, where the cluster layer, receiving already, may read it.
	hard atomic.Pointer[hardening]
	dns  *dnscache.Cache // the fetcher's DNS cache; nil: the system resolver (netops.go)

	delegates
	hostState
	outputs
	sched
	counters

	persistCtx    context.Context // for frontier writes; cancelled only after workers stop
	persistCancel context.CancelFunc
	ready         atomic.Bool
	closeOnce     sync.Once
}

// delegates are the node's cluster layer (ClusterDelegates, cluster.go).
type delegates struct {
	router        Router
	split         LocalSplitter
	repl          Replicator    // nil: no second copies
	holder        Holder        // nil: no URL waits for an absent owner
	lender        GuestSettler  // nil: no URL is lent to this node
	deadlines     PhaseDeadline // nil: phases never end
	status        StatusReporter
	clusterSeries []prometheus.Collector
	closer        io.Closer // closed before the frontier
	phases        PhaseClock
	// storageHold is the cluster's phase clock when it can hold this
	// member off its phase while the disk guard pauses it (nil alone).
	storageHold storageHolder
}

// hostState is what the node knows of each host: its pacing, back-offs,
// response times, politeness unit and scope.
type hostState struct {
	lat     *latencies // per-host response times, for the phase deadline (trip_pace.go)
	bw      *bandwidth.Budget
	bwOn    bool       // sites are paced or have deadlines (bandwidth.go)
	backoff *backoffs  // per-host server back-off (backoff.go)
	times   *hostTimes // per-host response times, for adaptive timeouts (adaptive.go)

	seedHosts *SeedHostSet      // scope when no allow_hosts/allow_domains: the seeds' hosts
	unit      frontier.Unit     // politeness.key: the unit a host's phase is hashed from (nil: the host)
	gates     *unitGates        // politeness.key domain: one request at a time per unit on this node (nil: host)
	hostCap   *urlscope.HostCap // scope.max_hosts_per_domain
	capLog    sync.Once         // the first refusal by hostCap is logged
	// inactive: the hosts the dead-link lane serves (deadlane.go).
	inactive *inactiveHosts
}

// outputs are what the node writes and serves: WARC files and crawl log,
// the API, the reports and the metrics.
type outputs struct {
	out *output     // WARC files and crawl log (output.go)
	api *api.Server // the HTTP API (api.go)
	rep *reports    // hosts, MIME-type and status-code reports (reports.go)
	m   *Metrics
}

// sched is the scheduler's channels to and from the workers, and what it
// publishes.
type sched struct {
	wake chan struct{}     // new URLs or retries: the scheduler should scan
	done chan finished     // workers -> scheduler: an element's list is done
	jobs chan bucket.Batch // scheduler -> workers
	// refills: running trips -> scheduler, requests for more URLs of their
	// host (trip.go refillAsk, scheduler.refill).
	refills chan *refillAsk
	// schedDone is closed once the scheduler has stopped and answered
	// every refill it took: a trip waiting for an answer stops waiting.
	schedDone chan struct{}
	// recording holds a token per guest whose page is being handled or
	// recorded (guest.go), at most one per worker.
	recording chan struct{}
	// deadJobs: scheduler -> the dead-link lane's workers (nil: no lane,
	// deadlane.go).
	deadJobs chan bucket.Batch
	// handBacks: the scheduler's requeue writes, written again by
	// handBackLoop should they fail (handback.go).
	handBacks *handBacks
	snap      atomic.Pointer[schedSnapshot]
	// backlogged is set by the scheduler while a dispatched element waits
	// for a worker (every live-lane worker is busy): the node is bound by
	// its workers or its CPU, not by the latency of one host, so a trip
	// waiting for its page writes does not hurry the frontier's writer
	// (smaller write transactions would cost every trip more CPU).
	backlogged atomic.Bool
}

// counters are the node's running totals.
type counters struct {
	started time.Time
	pages   atomic.Int64
	bytes   atomic.Int64
	errs    atomic.Int64
}

type finished struct {
	id   bucket.ElementID
	wait time.Duration // TIMEWAIT: what is left of the host's delay after the trip's last request
	host string
	// inactive: the trip ran in the dead-link lane.
	inactive bool
	// perPage is the trip's time per request: the host's delay plus its
	// mean response time (0 when no request was sent; see scheduler.slow).
	perPage time.Duration
}

// schedSnapshot is what the scheduler publishes for status and metrics.
type schedSnapshot struct {
	bucket  bucket.Counts
	phase   int
	nphase  int
	pending int
}

// New opens the node's data directory and builds its parts; Run starts it.
func New(cfg config.Config, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return nil, fmt.Errorf("node: data directory %s: %w", cfg.Data, err)
	}
	clk := clock.Or(opts.Clock)
	n := &Node{
		cfg:    cfg,
		log:    log.With("node", cfg.Name),
		clock:  clk,
		guests: newGuestPool(),
		hostState: hostState{
			lat:      newLatencies(),
			times:    newHostTimes(),
			backoff:  newBackoffs(cfg.Fetch.BackoffMax, cfg.Fetch.ParkAfter, cfg.Fetch.ParkDuration),
			inactive: newInactiveHosts(),
		},
		sched: sched{
			wake:      make(chan struct{}, 1),
			done:      make(chan finished, cfg.Workers*2),
			refills:   make(chan *refillAsk, cfg.Workers),
			schedDone: make(chan struct{}),
			recording: make(chan struct{}, max(cfg.Workers, 1)),
			jobs:      make(chan bucket.Batch),
			handBacks: newHandBacks(),
		},
		counters: counters{started: clk.Now()},
	}
	if cfg.Fetch.InactiveLane(cfg.Workers) > 0 {
		n.deadJobs = make(chan bucket.Batch)
	}
	n.phases = Standalone{}
	_, nphase, _ := n.phases.Active(n.clock.Now())
	n.snap.Store(&schedSnapshot{nphase: nphase})
	ok := false
	defer func() {
		if !ok {
			n.closeResources()
		}
	}()
	fo := frontier.DefaultOptions(filepath.Join(cfg.Data, "frontier.db"))
	unit, unitName, err := urlscope.PolitenessUnit(cfg.Politeness.Key, cfg.Scope.PrivateSuffixes)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if unit != nil {
		n.unit, n.gates = unit, newUnitGates(n.clock)
	}
	n.guests.unit = n.unit
	fo.Unit, fo.UnitName = n.unit, unitName
	doms, err := urlscope.NewDomains(cfg.Scope.PrivateSuffixes)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.hostCap = urlscope.NewHostCap(doms, cfg.Scope.MaxHostsPerDomain)
	for _, h := range cfg.Scope.AllowHosts {
		n.hostCap.Exempt(strings.ToLower(strings.TrimSpace(h)))
	}
	if opts.Cluster != nil {
		// The cluster's PhaseClock is built after the frontier opens; start
		// from the configured count, the scheduler re-keys when it differs.
		nphase = max(cfg.Cluster.Phases, 1)
	}
	fo.Phases = nphase
	fo.MaxPerHost = cfg.Scope.MaxPagesPerHost
	n.rep = newReports(cfg.Data)
	fo.OnSkipped = func(host string) { n.rep.tally.AddRefused(host, "cap", 1) }
	fo.MaxTries = cfg.Fetch.MaxTries
	fo.BatchSize = cfg.Frontier.BatchSize
	fo.BatchDelay = cfg.Frontier.BatchDelay
	if n.front, err = frontier.Open(fo); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.persistCtx, n.persistCancel = context.WithCancel(context.Background())
	n.robots = robots.NewCache(robots.Config{
		UserAgent:     cfg.UserAgent,
		TTL:           cfg.Robots.TTL,
		ErrorTTL:      cfg.Robots.ErrorTTL,
		MaxCrawlDelay: cfg.Robots.MaxCrawlDelay,
		// The router is set below, before any fetch.
		Shared: func(rec robots.Record) { n.router.ShareRobots(rec) },
	})
	if len(cfg.Scope.AllowHosts) == 0 && len(cfg.Scope.AllowDomains) == 0 {
		if n.seedHosts, err = openHostSet(filepath.Join(cfg.Data, "seed-hosts.txt")); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	if n.traps, err = newTraps(cfg.Scope); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	var cl ClusterDelegates
	if opts.Cluster != nil {
		env := ClusterEnv{Frontier: n.front, Wake: n.notify, Node: n, Robots: n.robots, Facets: n.traps.tracker, SeedHosts: n.seedHosts}
		if cl, err = opts.Cluster(env); err != nil {
			return nil, fmt.Errorf("node: cluster: %w", err)
		}
	}
	n.deadlines, n.closer = cl.Deadlines, cl.Closer
	if cl.Phases != nil {
		n.phases = cl.Phases
		n.storageHold, _ = cl.Phases.(storageHolder)
	}
	n.ctl = newControl(n)
	n.phases = n.ctl.gate(n.phases)
	if n.bkt, err = bucket.New(cfg.BucketConfig(nphase)); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	var rules []fetch.ResolveRule
	for _, r := range cfg.Resolve {
		rule, err := fetch.ParseResolve(r)
		if err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		rules = append(rules, rule)
	}
	if n.dns, err = newResolver(cfg.DNS, n.log); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	proxy, err := proxyFunc(cfg, n.log)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	var resolver fetch.Resolver
	if n.dns != nil {
		resolver = n.dns
	}
	spool, err := openSpoolDir(cfg.Data)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.client, err = fetch.NewClient(fetch.ClientConfig{
		UserAgent:      cfg.UserAgent,
		ConnectTimeout: cfg.Fetch.ConnectTimeout,
		HeaderTimeout:  cfg.Fetch.HeaderTimeout,
		BodyTimeout:    cfg.Fetch.BodyTimeout,
		MaxBodySize:    cfg.Fetch.MaxBodySize,
		MinRate:        cfg.Fetch.MinRate,
		RateWindow:     cfg.Fetch.RateWindow,
		AllowPrivate:   cfg.AllowPrivate,
		AllowLinkLocal: cfg.Fetch.AllowLinkLocal,
		Resolve:        rules,
		MaxIdleConns:   idleConns(cfg.Fetch.MaxIdleConns, openFileLimit(), n.log),
		Proxy:          proxy,
		Resolver:       resolver,

		MaxInflightBytes: cfg.Fetch.MaxInflightBytes,
		SpoolDir:         spool,
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n.scope, err = urlscope.NewScope(urlscope.ScopeConfig{
		AllowHosts:   cfg.Scope.AllowHosts,
		AllowDomains: cfg.Scope.AllowDomains,
		Include:      cfg.Scope.Include,
		Exclude:      cfg.Scope.Exclude,
		MaxDepth:     cfg.Scope.MaxDepth,
	}); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	// The canonicalization is the process's (urlscope.Normalize): every node
	// of a process, like every member of a cluster, must use the same.
	if err := urlscope.SetCanonical(urlscope.CanonicalConfig{StripParams: cfg.Scope.Canonical.StripParams, SortQuery: cfg.Scope.Canonical.SortQuery}); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n.out, err = openOutput(cfg, n.log); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.out.onLog = n.rep.logged
	n.takeCluster(cl)
	// Before each commit: the pages' WARC records and log lines reach
	// their files, and the links they hold for other members their
	// outbox (LocalSplitter.FileForeign); each page's Durable asks both.
	n.front.SetBeforeCommit(func() {
		n.out.flush()
		n.split.Sync()
	})
	n.m = NewMetrics(n.frontierStates, n.bucketStates)
	n.disk = newDiskGuard(n)
	n.out.failed = func(what string) { n.storageFailed(what, nil) }
	if err := n.m.Registry.Register(n.disk.free); err != nil {
		return nil, fmt.Errorf("node: storage metrics: %w", err)
	}
	n.m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "phasecrawl_hosts_parked", Help: "Hosts parked for fetch.park_duration after fetch.park_after back-offs in a row.",
	}, func() float64 { return float64(n.backoff.parkedAt(n.clock.Now())) }))
	if err := n.registerClusterMetrics(); err != nil {
		return nil, fmt.Errorf("node: cluster metrics: %w", err)
	}
	for _, c := range append(n.ctl.collectors(), dnsCollectors(n.dns)...) {
		if err := n.m.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("node: control metrics: %w", err)
		}
	}
	if err := n.newBudget(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := n.initRecrawl(); err != nil {
		return nil, fmt.Errorf("node: recrawl metrics: %w", err)
	}
	ln := opts.Listener
	if ln == nil && cfg.HTTP != "" {
		if ln, err = net.Listen("tcp", cfg.HTTP); err != nil {
			return nil, fmt.Errorf("node: API listen on %s (key http): %w", cfg.HTTP, err)
		}
	}
	if n.api, err = n.newAPI(ln); err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := n.initHardening(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err := n.registerBudgetMetrics(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	seeds, err := cfg.ReadSeeds()
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if len(seeds) > 0 {
		res, err := n.AddSeeds(context.Background(), seeds)
		if err != nil {
			return nil, fmt.Errorf("node: seeds: %w", err)
		}
		for _, b := range res.Bad {
			n.log.Warn("seed rejected", "line", b.Line, "url", b.URL, "error", b.Error)
		}
		n.log.Info("seeds loaded", "given", len(seeds), "new", res.Added, "rejected", len(res.Bad))
	}
	c := n.front.Counts()
	n.log.Info("node opened", "data", cfg.Data, "in_list", c.InList, "completed", c.Completed, "stalled", c.Stalled, "workers", cfg.Workers, "delay", cfg.Delay)
	ok = true
	return n, nil
}

// Addr returns the API's listen address (nil if the API is off).
func (n *Node) Addr() net.Addr {
	if n.api == nil {
		return nil
	}
	return n.api.Addr()
}

// Frontier returns the node's frontier (read-only use: counts, records).
func (n *Node) Frontier() *frontier.Frontier { return n.front }

// Metrics returns the node's metrics.
func (n *Node) Metrics() *Metrics { return n.m }

// Run crawls until ctx is cancelled, then shuts down gracefully: it stops
// dispatching, lets in-flight fetches finish for up to shutdown_timeout, puts
// every URL not fetched back to IN_LIST, flushes the WARC file and the crawl
// log and closes the frontier. Run closes the node; it may be called once.
func (n *Node) Run(ctx context.Context) error {
	defer n.closeResources()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := n.api.Serve(); err != nil {
			n.log.Error("API server stopped", "error", err)
		}
	}()
	// Workers get their own context: at shutdown they may finish in-flight
	// fetches for up to shutdown_timeout after ctx is done.
	workCtx, stopWork := context.WithCancel(context.Background())
	defer stopWork()

	var workers sync.WaitGroup
	for i := 0; i < n.cfg.Workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for b := range n.jobs {
				n.work(workCtx, ctx, b)
			}
		}()
	}
	for i := 0; i < n.cfg.Fetch.InactiveLane(n.cfg.Workers) && n.deadJobs != nil; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for b := range n.deadJobs {
				n.workIn(workCtx, ctx, b, true)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.retryLane(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.handBackLoop(ctx)
	}()
	n.disk.check() // a node started on a full disk starts paused
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.disk.run(ctx)
	}()
	if n.bwOn {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.bw.Run(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.planLoop(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.reportLoop(ctx)
	}()
	if crashed := n.out.crashed(); len(crashed) > 0 {
		// Before the scheduler runs: these pages are IN_LIST again.
		if k, err := n.recoverArchived(ctx, crashed); err != nil {
			n.log.Error("settle the pages archived before the crash (they will be fetched again)", "error", err, "settled", k)
		} else {
			n.log.Info("settled the pages archived but not recorded before the crash", "pages", k, "files", len(crashed))
		}
	}
	n.ready.Store(true)
	n.log.Info("node running", "api", n.Addr())

	n.schedule(ctx) // returns when ctx is done, after handing back what it held
	close(n.schedDone)

	n.ready.Store(false)
	close(n.jobs)
	if n.deadJobs != nil {
		close(n.deadJobs)
	}
	allDone := make(chan struct{})
	go func() { workers.Wait(); close(allDone) }()
	// Keep consuming finished elements so no worker blocks on n.done.
	drainStop := make(chan struct{})
	go func() {
		for {
			select {
			case <-n.done:
			case <-drainStop:
				return
			}
		}
	}()
	select {
	case <-allDone:
	case <-time.After(n.cfg.ShutdownTimeout):
		n.log.Warn("shutdown timeout: cancelling in-flight fetches", "timeout", n.cfg.ShutdownTimeout)
		stopWork()
		<-allDone
	}
	close(drainStop)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = n.api.Shutdown(sctx)
	cancel()
	wg.Wait()
	n.saveRefused()
	c := n.front.Counts()
	n.log.Info("node stopped", "pages", n.pages.Load(), "in_list", c.InList, "in_progress", c.InProgress, "completed", c.Completed, "stalled", c.Stalled)
	return nil
}

// idleConns is fetch.max_idle_conns, at most half the open-file limit (the
// rest is for the connections in use, the listeners and the files).
func idleConns(want int, fdLimit uint64, log *slog.Logger) int {
	if fdLimit == 0 || uint64(want) <= fdLimit/2 {
		return want
	}
	got := max(int(fdLimit/2), 1)
	log.Warn("fetch.max_idle_conns lowered to half the open-file limit (raise it with ulimit -n / LimitNOFILE)",
		"max_idle_conns", want, "open_file_limit", fdLimit, "using", got)
	return got
}

// closeResources flushes and closes every output and the frontier, once.
func (n *Node) closeResources() {
	n.closeOnce.Do(func() {
		if n.api != nil {
			n.api.Close()
		}
		if n.out != nil {
			n.out.close()
		}
		if n.client != nil {
			n.client.Close()
		}
		if n.closer != nil {
			if err := n.closer.Close(); err != nil {
				n.log.Error("close cluster", "error", err)
			}
		}
		if n.persistCancel != nil {
			n.persistCancel()
		}
		if n.front != nil {
			if err := n.front.Close(); err != nil {
				n.log.Error("close frontier", "error", err)
			}
		}
		if n.seedHosts != nil {
			n.seedHosts.Close()
		}
	})
}

// notify wakes the scheduler without blocking.
func (n *Node) notify() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// retryLane releases STALLED URLs whose backoff has passed back to IN_LIST
// (seed 003's inactive-URL lane): dead hosts wait out their backoff on disk
// instead of holding a worker or a bucket row. Each second it also
// releases the URLs whose revisit is due (recurring crawls).
func (n *Node) retryLane(ctx context.Context) {
	t := n.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for {
			k, err := n.front.ReleaseStalled(ctx, n.clock.Now(), 1000)
			if err != nil {
				if ctx.Err() == nil {
					n.log.Error("retry lane", "error", err)
				}
				break
			}
			if k == 0 {
				break
			}
			n.m.StalledRetries.Add(float64(k))
			n.notify()
			if k < 1000 {
				break
			}
		}
		if n.releaseDue(ctx, n.clock.Now()) {
			n.notify()
		}
	}
}

// Done reports whether the crawl has nothing left to do: no URL IN_LIST,
// IN_PROGRESS or STALLED and no element queued or fetching.
func (n *Node) Done() bool {
	c := n.front.Counts()
	s := n.snap.Load()
	return c.InList == 0 && c.InProgress == 0 && c.Stalled == 0 &&
		s.bucket.Queuing == 0 && s.bucket.Fetching == 0 && s.pending == 0
}

func (n *Node) frontierStates() map[string]float64 {
	c := n.front.Counts()
	return map[string]float64{"in_list": float64(c.InList), "in_progress": float64(c.InProgress), "completed": float64(c.Completed), "stalled": float64(c.Stalled)}
}

func (n *Node) bucketStates() map[string]float64 {
	b := n.snap.Load().bucket
	return map[string]float64{"free": float64(b.Free), "queuing": float64(b.Queuing), "fetching": float64(b.Fetching), "timewait": float64(b.TimeWait)}
}
