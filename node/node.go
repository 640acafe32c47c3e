// Package node wires one phasecrawl node: the scheduler loop that moves URLs
// from the bbolt frontier into the prime-column bucket (KSpider §3.4), the
// workers that fetch a dispatched element's list over one connection to its
// host, the retry lane for STALLED URLs, the outputs (WARC, crawl log) and
// the HTTP API.
//
// Data flows one way: config -> node -> (frontier <-> bucket) -> fetch ->
// Router (the local frontier, or in a cluster the owner's frontier).
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/bandwidth"
	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/fetch/dnscache"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/prometheus/client_golang/prometheus"
)

// crawlLogName is the crawl log's file name in the data directory.
const crawlLogName = "crawl.log"

// Router sends discovered URLs to the node that owns them. The single-node
// router adds them to the local frontier; the cluster's router forwards the
// URLs other nodes own. Route returns how many URLs were new to this node's
// frontier and must not return before they are durable.
type Router interface {
	Route(ctx context.Context, urls []frontier.NewURL) (added int, err error)
	// ShareSeedHosts makes hosts, seed hosts new to this node, part of
	// every node's scope before the seeds on them are routed (the scope
	// when no allow_hosts or allow_domains is set). It must not return
	// before they are durable; the local router has nobody to tell.
	ShareSeedHosts(ctx context.Context, hosts []string) error
	// ShareRobots hands a robots.txt this node fetched to the other nodes
	// (best effort: one that misses it fetches its own copy).
	ShareRobots(rec fetch.RobotsRecord)
}

// PhaseClock tells the node which host-hash phase it works on (KSpider §3.2).
type PhaseClock interface {
	// Active returns the phase this node works on at now and the number of
	// phases; open is false in the guard interval before a swap, when no new
	// request may start.
	Active(now time.Time) (phase, nphase int, open bool)
}

// PhaseDeadline is optionally implemented by a PhaseClock whose phases end:
// Deadline returns the local time by which a request started at now must be
// finished so that it does not outlive its phase. Workers bound every
// request (robots.txt included) with it.
type PhaseDeadline interface {
	Deadline(now time.Time) time.Time
	// Handover returns the latest local time at which another member may
	// have started a request to a host of the phase this node works on at
	// now (the previous owner's guard start, clock uncertainty included).
	// The first request of a host trip waits until Handover plus the host's
	// delay, so a delay or Crawl-delay longer than the guard is kept across
	// a swap too.
	Handover(now time.Time) time.Time
}

// ClusterHook builds the cluster layer once the node's frontier is open: the
// Router that sends URLs to their owners, the PhaseClock of the cluster's
// phase rotation, and a Closer the node calls after its workers stopped and
// before it closes the frontier. The node re-keys the frontier whenever the
// PhaseClock's phase count changes.
type ClusterHook func(env ClusterEnv) (Router, PhaseClock, io.Closer, error)

// ClusterEnv is what the node gives its cluster layer.
type ClusterEnv struct {
	// Frontier is the node's open frontier.
	Frontier *frontier.Frontier
	// Wake tells the scheduler that URLs arrived in the frontier from
	// elsewhere (the URL exchange).
	Wake func()
	// Redirects remembers the redirect chain lengths of the targets other
	// nodes found and this node owns (fetch.max_redirects).
	Redirects interface{ RememberRedirects([]frontier.NewURL) }
	// Robots is the node's robots.txt cache: the cluster imports into it
	// the robots.txt the other nodes fetched.
	Robots *fetch.Robots
	// Guests takes the URLs other members lend this node (guest.go).
	Guests interface{ AddGuests([]Guest) []Guest }
	// SeedHosts is the node's durable set of seed hosts, its scope when no
	// allow_hosts or allow_domains is configured; nil otherwise. The
	// cluster adds the seed hosts of the other members to it.
	SeedHosts SeedHosts
}

// SeedHosts is a node's durable set of seed hosts.
type SeedHosts interface {
	// SeedHosts returns every host in the set.
	SeedHosts() []string
	// AddSeedHosts adds hosts, durably, and returns those that were new.
	AddSeedHosts(hosts []string) ([]string, error)
}

// SinglePhase is the PhaseClock of a node alone: one phase, always open.
type SinglePhase struct{}

// Active implements PhaseClock.
func (SinglePhase) Active(time.Time) (int, int, bool) { return 0, 1, true }

// localRouter adds every URL to the local frontier.
type localRouter struct{ f *frontier.Frontier }

func (r localRouter) Route(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return r.f.Add(ctx, urls)
}

// ShareSeedHosts implements Router: a node alone has nobody to tell.
func (localRouter) ShareSeedHosts(context.Context, []string) error { return nil }

// ShareRobots implements Router: a node alone has nobody to tell.
func (localRouter) ShareRobots(fetch.RobotsRecord) {}

// RouteForeign implements LocalSplitter: every URL is owned here.
func (r localRouter) RouteForeign(_ context.Context, urls []frontier.NewURL) ([]frontier.NewURL, error) {
	return urls, nil
}

// LocalSplitter is an optional Router extension: RouteForeign durably hands
// the URLs owned by other nodes to their owners (outbox) and returns those
// owned here, which the worker then records in the same frontier write as
// the page they were found on (frontier.Settle).
type LocalSplitter interface {
	RouteForeign(ctx context.Context, urls []frontier.NewURL) (local []frontier.NewURL, err error)
}

// Holder is an optional Router extension (the cluster): Held reports
// whether a URL in this node's frontier must not be fetched here now:
// another member owns it (a rebalance is moving it there), or the member
// that owns it counting the members declared dead a short while ago is one
// of those (it may have fetched it just before it failed). The scheduler
// skips such URLs. Must be fast.
type Holder interface {
	Held(fp uint64) bool
}

// Replicator is an optional Router extension (the cluster): Replicate
// durably sends the URLs of pages this node completed to the node that
// keeps their second copy, so that they are not crawled again should this
// node fail.
type Replicator interface {
	Replicate(ctx context.Context, done []frontier.NewURL) error
}

// splitterOf returns r as a LocalSplitter; a Router without RouteForeign
// gets every URL through Route, none recorded with the page.
func splitterOf(r Router) LocalSplitter {
	if sp, ok := r.(LocalSplitter); ok {
		return sp
	}
	return routeAll{r}
}

// routeAll is the LocalSplitter of a plain Router.
type routeAll struct{ r Router }

func (a routeAll) RouteForeign(ctx context.Context, urls []frontier.NewURL) ([]frontier.NewURL, error) {
	if len(urls) == 0 {
		return nil, nil
	}
	_, err := a.r.Route(ctx, urls)
	return nil, err
}

// Options are the parts of a node that tests and the cluster replace.
type Options struct {
	Logger *slog.Logger
	// Router defaults to the local frontier.
	Router Router
	// Phases defaults to SinglePhase.
	Phases PhaseClock
	// Listener, if set, serves the API instead of listening on cfg.HTTP.
	Listener net.Listener
	// Cluster, if set, is called right after the frontier opens; its Router
	// and PhaseClock replace Router and Phases.
	Cluster ClusterHook
}

// Node is one running crawler.
type Node struct {
	spare  atomic.Pointer[float64] // the revisit plan's spare time, seconds (plan.go)
	cfg    config.Config
	log    *slog.Logger
	front  *frontier.Frontier
	bkt    *bucket.Bucket
	client *fetch.Client
	robots *fetch.Robots
	scope  *fetch.Scope
	warc   *archive.WARCWriter
	// crashWARC are the WARC files an earlier process left open (killed),
	// repaired at start: recoverArchived settles from them the pages it
	// fetched but had not recorded.
	crashWARC []string
	clog      *archive.CrawlLog
	m         *Metrics
	router    Router
	split     LocalSplitter // router's view for workers (splitterOf)
	repl      Replicator    // nil: the router keeps no second copies
	holder    Holder        // nil: no URL waits for an absent owner
	lender    Lender        // nil: no URL is lent to this node
	guests    *guestPool    // URLs other members lent this node (guest.go)
	phases    PhaseClock
	lat       *latencies // per-host response times, for the phase deadline (worker.go)
	bw        *bandwidth.Budget
	bwOn      bool       // sites are paced or have deadlines (bandwidth.go)
	backoff   *backoffs  // per-host server back-off (backoff.go)
	times     *hostTimes // per-host response times, for adaptive timeouts (adaptive.go)
	cluster   io.Closer  // the cluster layer, closed before the frontier
	ln        net.Listener

	seedHosts *hostSet        // scope when no allow_hosts/allow_domains: the seeds' hosts
	hard      *hardening      // API token, redirect chain lengths (hardening.go)
	ctl       *control        // pause, resume and the crawl budget (control.go)
	dns       *dnscache.Cache // the fetcher's DNS cache; nil: the system resolver (netops.go)

	started time.Time
	pages   atomic.Int64
	bytes   atomic.Int64
	errs    atomic.Int64

	wake chan struct{}     // new URLs or retries: the scheduler should scan
	done chan finished     // workers -> scheduler: an element's list is done
	jobs chan bucket.Batch // scheduler -> workers
	// refills: running trips -> scheduler, requests for more URLs of their
	// host (worker.go refillAsk, scheduler.refill).
	refills chan *refillAsk
	// deadJobs: scheduler -> the dead-link lane's workers (nil: no lane);
	// inactive: the hosts it serves (deadlane.go).
	deadJobs chan bucket.Batch
	inactive *inactiveHosts
	snap     atomic.Pointer[schedSnapshot]

	persistCtx    context.Context // for frontier writes; cancelled only after workers stop
	persistCancel context.CancelFunc
	ready         atomic.Bool
	closeOnce     sync.Once
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
	n := &Node{
		cfg:      cfg,
		log:      log.With("node", cfg.Name),
		phases:   opts.Phases,
		lat:      newLatencies(),
		times:    newHostTimes(),
		guests:   newGuestPool(),
		backoff:  newBackoffs(cfg.Fetch.BackoffMax, cfg.Fetch.ParkAfter, cfg.Fetch.ParkDuration),
		started:  time.Now(),
		wake:     make(chan struct{}, 1),
		done:     make(chan finished, cfg.Workers*2),
		refills:  make(chan *refillAsk, cfg.Workers),
		jobs:     make(chan bucket.Batch),
		inactive: newInactiveHosts(),
	}
	if cfg.Fetch.InactiveLane(cfg.Workers) > 0 {
		n.deadJobs = make(chan bucket.Batch)
	}
	if n.phases == nil {
		n.phases = SinglePhase{}
	}
	_, nphase, _ := n.phases.Active(time.Now())
	n.snap.Store(&schedSnapshot{nphase: nphase})
	ok := false
	defer func() {
		if !ok {
			n.closeResources()
		}
	}()
	fo := frontier.DefaultOptions(filepath.Join(cfg.Data, "frontier.db"))
	if opts.Cluster != nil {
		// The cluster's PhaseClock is built after the frontier opens; start
		// from the configured count, the scheduler re-keys when it differs.
		nphase = max(cfg.Cluster.Phases, 1)
	}
	fo.Phases = nphase
	fo.MaxPerHost = cfg.Scope.MaxPagesPerHost
	fo.MaxTries = cfg.Fetch.MaxTries
	fo.BatchSize = cfg.Frontier.BatchSize
	fo.BatchDelay = cfg.Frontier.BatchDelay
	var err error
	if n.front, err = frontier.Open(fo); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.persistCtx, n.persistCancel = context.WithCancel(context.Background())
	n.robots = fetch.NewRobots(fetch.RobotsConfig{
		UserAgent:     cfg.UserAgent,
		TTL:           cfg.Robots.TTL,
		ErrorTTL:      cfg.Robots.ErrorTTL,
		MaxCrawlDelay: cfg.Robots.MaxCrawlDelay,
		// The router is set below, before any fetch.
		Shared: func(rec fetch.RobotsRecord) { n.router.ShareRobots(rec) },
	})
	if len(cfg.Scope.AllowHosts) == 0 && len(cfg.Scope.AllowDomains) == 0 {
		if n.seedHosts, err = openHostSet(filepath.Join(cfg.Data, "seed-hosts.txt")); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	if opts.Cluster != nil {
		env := ClusterEnv{Frontier: n.front, Wake: n.notify, Robots: n.robots, Redirects: n, Guests: n}
		if n.seedHosts != nil {
			env.SeedHosts = n.seedHosts
		}
		router, phases, closer, err := opts.Cluster(env)
		if err != nil {
			return nil, fmt.Errorf("node: cluster: %w", err)
		}
		n.cluster = closer
		if router != nil {
			opts.Router = router
		}
		if phases != nil {
			n.phases = phases
		}
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
	n.client, err = fetch.NewClient(fetch.ClientConfig{
		UserAgent:      cfg.UserAgent,
		ConnectTimeout: cfg.Fetch.ConnectTimeout,
		HeaderTimeout:  cfg.Fetch.HeaderTimeout,
		BodyTimeout:    cfg.Fetch.BodyTimeout,
		MaxBodySize:    cfg.Fetch.MaxBodySize,
		MinRate:        cfg.Fetch.MinRate,
		RateWindow:     cfg.Fetch.RateWindow,
		AllowPrivate:   cfg.AllowPrivate,
		Resolve:        rules,
		MaxIdleConns:   idleConns(cfg.Fetch.MaxIdleConns, openFileLimit(), n.log),
		Proxy:          proxy,
		Resolver:       resolver,
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n.scope, err = fetch.NewScope(fetch.ScopeConfig{
		AllowHosts:   cfg.Scope.AllowHosts,
		AllowDomains: cfg.Scope.AllowDomains,
		Include:      cfg.Scope.Include,
		Exclude:      cfg.Scope.Exclude,
		MaxDepth:     cfg.Scope.MaxDepth,
	}); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if cfg.WARC.Enabled {
		dir := filepath.Join(cfg.Data, "warc")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("node: warc directory: %w", err)
		}
		if rep, err := archive.Recover(dir); err != nil {
			return nil, fmt.Errorf("node: recover WARC files: %w", err)
		} else if len(rep.Files) > 0 {
			n.log.Info("recovered WARC files left open by a crash", "files", len(rep.Files))
			for _, f := range rep.Files {
				if !f.Removed && f.Final != "" {
					n.crashWARC = append(n.crashWARC, f.Final)
				}
			}
		}
		wc := archive.DefaultWARCConfig(dir)
		wc.Prefix, wc.MaxSize, wc.Software = "phasecrawl-"+cfg.Name, cfg.WARC.MaxSize, "phasecrawl/0.1"
		wc.StoreRequests = cfg.WARC.Compression != config.WARCCompressAll
		wc.CompressionLevel = cfg.WARC.CompressionLevel
		if n.warc, err = archive.NewWARCWriter(wc); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	if n.clog, err = archive.OpenCrawlLog(filepath.Join(cfg.Data, crawlLogName)); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n.warc != nil {
		// A page's crawl log line never reaches the file before its WARC
		// records (recoverArchived relies on it): each has its own flush
		// delay, and the log's could fire between a WARC flush and the
		// next page's records.
		n.clog.SetBeforeFlush(n.flushWARC)
	}
	n.front.SetBeforeCommit(n.flushOutputs)
	n.router = opts.Router
	if n.router == nil {
		n.router = localRouter{n.front}
	}
	n.split = splitterOf(n.router)
	n.repl, _ = n.router.(Replicator)
	n.holder, _ = n.router.(Holder)
	n.lender, _ = n.router.(Lender)
	n.m = NewMetrics(n.frontierStates, n.bucketStates)
	n.m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "phasecrawl_hosts_parked", Help: "Hosts parked for fetch.park_duration after fetch.park_after back-offs in a row.",
	}, func() float64 { return float64(n.backoff.parkedAt(time.Now())) }))
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
	if opts.Listener != nil {
		n.ln = opts.Listener
	} else if cfg.HTTP != "" {
		if n.ln, err = net.Listen("tcp", cfg.HTTP); err != nil {
			return nil, fmt.Errorf("node: API listen on %s (key http): %w", cfg.HTTP, err)
		}
	}
	if err := n.initHardening(); err != nil {
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
	if n.ln == nil {
		return nil
	}
	return n.ln.Addr()
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
	var srv *http.Server
	if n.ln != nil {
		srv = &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(n.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("API server stopped", "error", err)
			}
		}()
	}
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
	if len(n.crashWARC) > 0 {
		// Before the scheduler runs: these pages are IN_LIST again.
		if k, err := n.recoverArchived(ctx); err != nil {
			n.log.Error("settle the pages archived before the crash (they will be fetched again)", "error", err, "settled", k)
		} else {
			n.log.Info("settled the pages archived but not recorded before the crash", "pages", k, "files", len(n.crashWARC))
		}
		n.crashWARC = nil
	}
	n.ready.Store(true)
	n.log.Info("node running", "api", n.Addr())

	n.schedule(ctx) // returns when ctx is done, after handing back what it held

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
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	wg.Wait()
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

// flushOutputs writes the buffered WARC records and crawl-log lines to
// their files. The frontier calls it before each commit: a page whose
// result is recorded has its records and its line in the files (a kill -9
// cannot take them), and a page whose records were lost in a buffer is not
// recorded, so it is fetched again.
func (n *Node) flushOutputs() {
	n.flushWARC()
	if err := n.clog.Flush(); err != nil {
		n.log.Error("crawl log", "error", err)
	}
}

// flushWARC writes the buffered WARC records (if WARC output is on).
func (n *Node) flushWARC() {
	if n.warc != nil {
		if err := n.warc.Flush(); err != nil {
			n.log.Error("WARC write", "error", err)
		}
	}
}

// closeResources flushes and closes every output and the frontier, once.
func (n *Node) closeResources() {
	n.closeOnce.Do(func() {
		if n.ln != nil {
			_ = n.ln.Close()
		}
		if n.warc != nil {
			if err := n.warc.Close(); err != nil {
				n.log.Error("close WARC", "error", err)
			}
		}
		if n.clog != nil {
			if err := n.clog.Close(); err != nil {
				n.log.Error("close crawl log", "error", err)
			}
		}
		if n.client != nil {
			n.client.Close()
		}
		if n.cluster != nil {
			if err := n.cluster.Close(); err != nil {
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
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for {
			k, err := n.front.ReleaseStalled(ctx, time.Now(), 1000)
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
		if n.releaseDue(ctx, time.Now()) {
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
