package node

import (
	"context"
	"io"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/robots"
	"github.com/phasecrawl/phasecrawl/urlscope"
	"github.com/prometheus/client_golang/prometheus"
)

// ClusterDelegates is everything a node takes from its cluster layer, one
// named delegate per capability, as memberlist's Config takes its
// delegates: the node calls each one it is given and asks nothing else of
// the layer (no type assertions). A nil delegate takes the default of a
// node alone, stated on its field; the zero ClusterDelegates is a node
// alone (Standalone). launch.New fills it from the cluster package's layer.
type ClusterDelegates struct {
	// Router takes the URLs the node discovers or is given (seeds) and
	// sends each to its owner, and shares seed hosts and robots.txt with
	// the other members. nil: Standalone, every URL goes to the local
	// frontier and there is nobody to tell.
	Router Router
	// Split hands the URLs a page links to that other members own to
	// their owners and gives back those owned here, which the worker
	// records in the same frontier write as the page. nil: Standalone's
	// (every URL is local) when Router is nil too; otherwise every URL
	// goes through Router.Route, none is recorded with its page.
	Split LocalSplitter
	// Phases tells the node which host-hash phase it works on. nil:
	// Standalone, one phase, always open. The node re-keys its frontier
	// whenever the phase count changes.
	Phases PhaseClock
	// Deadlines bounds each request by the end of its phase and paces a
	// host's first request after the previous phase owner's last. nil:
	// phases never end; no deadline, no wait.
	Deadlines PhaseDeadline
	// Replicas keeps the second copy of the fingerprints of the pages
	// this node completed on another member. nil: no second copies.
	Replicas Replicator
	// Holds says which URLs of the frontier must not be fetched here now.
	// nil: none is held.
	Holds Holder
	// Lending settles the guests other members lent this node: the
	// outcomes and links of the pages fetched, the guests given back.
	// nil: nothing is lent to this node (guests reach it only through
	// ClusterEnv.Node.AddGuests, from a cluster layer that lends).
	Lending GuestSettler
	// Facets tells the other members the facet sets (scope.max_query_sets)
	// this node admits, so that a path's sets are counted cluster-wide.
	// nil: nobody to tell, no set is kept for it.
	Facets FacetSharer
	// Status reports the members, the outbox and the phase in
	// GET /v1/status. nil: no members, no outbox, the scheduler's phase.
	Status StatusReporter
	// Collectors are the cluster's series, registered on the node's
	// registry. nil: none.
	Collectors []prometheus.Collector
	// Closer is closed after the workers stopped and before the frontier
	// is closed (the graceful leave). nil: nothing to close.
	Closer io.Closer
}

// Router sends discovered URLs to the node that owns them. Standalone adds
// them to the local frontier; the cluster's router forwards the URLs other
// nodes own. Route returns how many URLs were new to this node's frontier
// and must not return before they are durable.
type Router interface {
	Route(ctx context.Context, urls []frontier.NewURL) (added int, err error)
	// ShareSeedHosts makes hosts, seed hosts new to this node, part of
	// every node's scope before the seeds on them are routed (the scope
	// when no allow_hosts or allow_domains is set). It must not return
	// before they are durable; a node alone has nobody to tell.
	ShareSeedHosts(ctx context.Context, hosts []string) error
	// ShareRobots hands a robots.txt this node fetched to the other nodes
	// (best effort: one that misses it fetches its own copy).
	ShareRobots(rec robots.Record)
}

// FacetSharer is the ClusterDelegates.Facets delegate: ShareFacets hands the
// facet sets this node admitted (urlscope.TrapTracker.Admit) to the other
// members, best effort and without waiting (a member that misses them
// counts those paths' sets apart). The other members' sets reach the node's
// tracker through ClusterEnv.Facets.
type FacetSharer interface {
	ShareFacets(sets []urlscope.FacetSet)
}

// LocalSplitter is the ClusterDelegates.Split delegate: RouteForeign durably hands
// the URLs owned by other nodes to their owners (outbox) and returns those
// owned here, which the worker then records in the same frontier write as
// the page they were found on (frontier.Settle).
//
// FileForeign does the same without waiting for the write: filed (nil
// when nothing was filed) reports whether the write is durable, and its
// answer is final once a Sync called after FileForeign returned has
// returned. The node calls Sync before each frontier commit and gives
// filed as the page's frontier.Result.Durable, so a page is recorded as
// fetched only once the links it holds for other nodes are durable, and
// its trip does not wait for that write (docs/design/lending.md). Sync
// must not call the frontier.
type LocalSplitter interface {
	RouteForeign(ctx context.Context, urls []frontier.NewURL) (local []frontier.NewURL, err error)
	FileForeign(ctx context.Context, urls []frontier.NewURL) (local []frontier.NewURL, filed func() bool, err error)
	Sync()
}

// PhaseClock tells the node which host-hash phase it works on (KSpider §3.2).
type PhaseClock interface {
	// Active returns the phase this node works on at now and the number of
	// phases; open is false in the guard interval before a swap, when no new
	// request may start.
	Active(now time.Time) (phase, nphase int, open bool)
}

// PhaseDeadline is the ClusterDelegates.Deadlines delegate, for phases that end:
// Deadline returns the local time by which a request started at now must
// be finished so that it does not outlive its phase. Workers bound every
// request (robots.txt included) with it.
type PhaseDeadline interface {
	Deadline(now time.Time) time.Time
	// Bound returns the context of a request started at now, under
	// parent: it ends at Deadline(now), or earlier when the phase turns
	// out to end sooner than was known at now (a switch of the member
	// list scheduled while the request runs).
	Bound(parent context.Context, now time.Time) (context.Context, context.CancelFunc)
	// Handover returns the latest local time at which another member may
	// have started a request to a host of the phase this node works on at
	// now (the previous owner's guard start, clock uncertainty included).
	// The first request of a host trip waits until Handover plus the host's
	// delay, so a delay or Crawl-delay longer than the guard is kept across
	// a swap too.
	Handover(now time.Time) time.Time
}

// Replicator is the ClusterDelegates.Replicas delegate: Replicate durably sends the
// URLs of pages this node completed to the node that keeps their second
// copy, so that they are not crawled again should this node fail.
// QueueReplicas does the same without waiting for the write (the cluster
// layer logs a failure): a host's trip files its pages' replicas so, and
// goes on with its next request.
type Replicator interface {
	Replicate(ctx context.Context, done []frontier.NewURL) error
	QueueReplicas(ctx context.Context, done []frontier.NewURL) error
}

// Holder is the ClusterDelegates.Holds delegate: Held reports whether a URL in this
// node's frontier must not be fetched here now: another member owns it (a
// rebalance is moving it there), or the member that owns it counting the
// members declared dead a short while ago is one of those (it may have
// fetched it just before it failed). The scheduler skips such URLs. Must
// be fast.
type Holder interface {
	Held(fp uint64) bool
}

// GuestSettler is the ClusterDelegates.Lending delegate: it settles the
// guests other members lent this node. SplitLinks separates the links
// found on a guest page that this node owns from the others; once the
// node has made its own durable, ReportLent files, in one durable write,
// the others for their owners and the outcome for the URL's owner.
// ReturnLent tells the owners of guests this node will not fetch (its
// phase ended, its trip stopped) that they may lend or fetch them again
// at once.
type GuestSettler interface {
	SplitLinks(found []frontier.NewURL) (local, foreign []frontier.NewURL)
	ReportLent(ctx context.Context, out frontier.LentOutcome, foreign []frontier.NewURL) error
	ReturnLent(ctx context.Context, gs []frontier.Guest) error
}

// StatusReporter is the ClusterDelegates.Status delegate: the cluster part of
// GET /v1/status at now.
type StatusReporter interface {
	ClusterStatus(now time.Time) ClusterStatus
}

// ClusterStatus is the cluster part of GET /v1/status.
type ClusterStatus struct {
	Members []MemberStatus
	// Outbox is the URLs waiting per peer (member name).
	Outbox map[string]int
	Phase  PhaseStatus
}

// ClusterHook starts the cluster layer once the node's frontier is open
// (the layer stores the URLs it receives there) and returns its delegates.
type ClusterHook func(env ClusterEnv) (ClusterDelegates, error)

// Delegates is the hook of a cluster layer with fixed delegates, d, that
// needs nothing of the node (tests, and a node alone with some delegates
// of its own).
func Delegates(d ClusterDelegates) ClusterHook {
	return func(ClusterEnv) (ClusterDelegates, error) { return d, nil }
}

// ClusterEnv is what the node gives its cluster layer: concrete values,
// each of which the cluster layer takes as an interface of its own
// (launch.New hands them over). The node declares no interface for them.
type ClusterEnv struct {
	// Frontier is the node's open frontier.
	Frontier *frontier.Frontier
	// Wake tells the scheduler that URLs arrived in the frontier from
	// elsewhere (the URL exchange).
	Wake func()
	// Node is the node itself: it remembers the redirect chain lengths of
	// the targets other nodes found and this node owns (RememberRedirects
	// and RedirectsOf, fetch.max_redirects), and takes the URLs other
	// members lend it (AddGuests, guest.go), returning those it cannot
	// take now.
	Node *Node
	// Robots is the node's robots.txt cache: the cluster imports into it
	// the robots.txt the other nodes fetched.
	Robots *robots.Cache
	// Facets is the node's facet-set tracker (scope.max_query_sets): the
	// cluster merges into it the sets the other nodes admitted. nil when
	// the limit is off.
	Facets *urlscope.TrapTracker
	// SeedHosts is the node's durable set of seed hosts, its scope when no
	// allow_hosts or allow_domains is configured; nil otherwise. The
	// cluster adds the seed hosts of the other members to it.
	SeedHosts *SeedHostSet
}

// Standalone is the cluster layer of a node alone, the Router, Split and
// Phases of a ClusterDelegates that leaves them nil: every URL is owned here and
// goes to Frontier, there is nobody to share seed hosts or robots.txt
// with, and there is one phase, always open. The other delegates of a
// node alone are off (nil): phases never end, no second copies, nothing
// held or lent, no members.
type Standalone struct{ Frontier *frontier.Frontier }

// Route implements Router: it adds urls to the frontier.
func (s Standalone) Route(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return s.Frontier.Add(ctx, urls)
}

// ShareSeedHosts implements Router: a node alone has nobody to tell.
func (Standalone) ShareSeedHosts(context.Context, []string) error { return nil }

// ShareRobots implements Router: a node alone has nobody to tell.
func (Standalone) ShareRobots(robots.Record) {}

// RouteForeign implements LocalSplitter: every URL is owned here.
func (Standalone) RouteForeign(_ context.Context, urls []frontier.NewURL) ([]frontier.NewURL, error) {
	return urls, nil
}

// FileForeign implements LocalSplitter: every URL is owned here.
func (Standalone) FileForeign(_ context.Context, urls []frontier.NewURL) ([]frontier.NewURL, func() bool, error) {
	return urls, nil, nil
}

// Sync implements LocalSplitter: nothing is ever queued.
func (Standalone) Sync() {}

// Active implements PhaseClock: one phase, always open.
func (Standalone) Active(time.Time) (int, int, bool) { return 0, 1, true }

// routeAll is the LocalSplitter of a Router given without one: every URL
// goes through Route, none is recorded with its page.
type routeAll struct{ r Router }

func (a routeAll) RouteForeign(ctx context.Context, urls []frontier.NewURL) ([]frontier.NewURL, error) {
	if len(urls) == 0 {
		return nil, nil
	}
	_, err := a.r.Route(ctx, urls)
	return nil, err
}

// FileForeign routes urls at once (Route is durable when it returns).
func (a routeAll) FileForeign(ctx context.Context, urls []frontier.NewURL) ([]frontier.NewURL, func() bool, error) {
	local, err := a.RouteForeign(ctx, urls)
	return local, nil, err
}

func (routeAll) Sync() {}

// takeCluster sets the node's delegates from c, each nil one to its
// default (ClusterDelegates). The frontier must be open.
func (n *Node) takeCluster(c ClusterDelegates) {
	n.router, n.split = c.Router, c.Split
	if n.router == nil {
		n.router = Standalone{n.front}
		if n.split == nil {
			n.split = Standalone{n.front}
		}
	} else if n.split == nil {
		n.split = routeAll{n.router}
	}
	n.repl, n.holder, n.lender = c.Replicas, c.Holds, c.Lending
	n.facets = c.Facets
	if n.traps != nil {
		n.traps.sharing = c.Facets != nil
	}
	n.status, n.clusterSeries = c.Status, c.Collectors
}

// registerClusterMetrics registers the cluster layer's series.
func (n *Node) registerClusterMetrics() error {
	for _, c := range n.clusterSeries {
		if err := n.m.Registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// clusterStatus fills the cluster fields of st.
func (n *Node) clusterStatus(st *Status) {
	st.Members, st.Outbox = []MemberStatus{}, map[string]int{}
	if n.status == nil {
		return
	}
	cs := n.status.ClusterStatus(time.Now())
	if cs.Members != nil {
		st.Members = cs.Members
	}
	if cs.Outbox != nil {
		st.Outbox = cs.Outbox
	}
	st.Phase = cs.Phase
}
