package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// The answers of the node's HTTP API (package api), under the names the
// node's callers know them by.
type (
	Status       = api.Status
	SeedResult   = api.SeedResult
	PhaseStatus  = api.PhaseStatus
	MemberStatus = api.MemberStatus
	PlanPage     = api.PlanPage
	PlanSite     = api.PlanSite
)

// apiNode is the node as its HTTP API sees it (api.Node).
type apiNode struct{ *Node }

var _ api.Node = apiNode{}

// newAPI builds the node's HTTP API on ln (nil: the API is off) and
// registers its series.
func (n *Node) newAPI(ln net.Listener) (*api.Server, error) {
	s, err := api.New(api.Config{Node: apiNode{n}, Metrics: n.m.Registry, Listener: ln, TokenFile: n.cfg.APITokenFile})
	if err != nil {
		return nil, err
	}
	for _, c := range s.Collectors() {
		if err := n.m.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return s, nil
}

// Status returns the node's current figures.
func (n *Node) Status() Status {
	c := n.front.Counts()
	s := n.snap.Load()
	st := Status{
		Node:         n.cfg.Name,
		Frontier:     api.FrontierStatus{InList: c.InList, InProgress: c.InProgress, Completed: c.Completed, Stalled: c.Stalled},
		Bucket:       api.BucketStatus{Free: s.bucket.Free, Queuing: s.bucket.Queuing, Fetching: s.bucket.Fetching, TimeWait: s.bucket.TimeWait},
		Phase:        PhaseStatus{NPhase: s.nphase, Current: s.phase},
		PagesFetched: n.pages.Load(),
		BytesFetched: n.bytes.Load(),
		FetchErrors:  n.errs.Load(),
		UptimeS:      time.Since(n.started).Seconds(),
		Done:         n.Done(),
		ErrorsByKind: n.errorsByKind(),
		Paused:       n.ctl.paused.Load() || n.ctl.diskPaused.Load(),
		PausedReason: n.ctl.pausedReason(),
		Budget:       n.ctl.status(),
	}
	if n.cfg.ExitWhenDone {
		st.DoneGraceS = n.cfg.DoneGrace.Seconds()
	}
	n.clusterStatus(&st)
	return st
}

// errorsByKind reads phasecrawl_fetch_errors_total by kind.
func (n *Node) errorsByKind() map[string]int64 { return CountsByLabel(n.m.FetchErrors, "kind") }

// Ready implements api.Node: the node schedules and fetches.
func (a apiNode) Ready() bool { return a.ready.Load() }

// SetPaused implements api.Node.
func (a apiNode) SetPaused(paused bool, by string) bool { return a.ctl.setPaused(paused, by) }

// CrawlLog implements api.Node.
func (a apiNode) CrawlLog(k int) ([]json.RawMessage, error) { return a.out.tail(k) }

// Plan implements api.Node.
func (a apiNode) Plan(after string, limit int) (PlanPage, error) { return a.planPage(after, limit) }

// AddSeeds normalizes, scopes and routes seed URLs, as POST /v1/seeds does.
// With no allow_hosts or allow_domains configured, a seed's host becomes
// part of the crawl's scope.
func (n *Node) AddSeeds(ctx context.Context, raw []string) (SeedResult, error) {
	return api.AddSeeds(ctx, apiNode{n}, raw)
}

// RouteSeeds implements api.SeedRouter: it normalizes and scopes seeds and
// routes those it accepts. With no allow_hosts or allow_domains configured,
// the hosts of the seeds are made part of the scope (durably, and told to
// the other members) before any is scoped.
func (a apiNode) RouteSeeds(ctx context.Context, seeds []string) (refused []string, added int, err error) {
	n := a.Node
	refused = make([]string, len(seeds))
	parsed := make([]*url.URL, len(seeds))
	norms := make([]string, len(seeds))
	var hosts []string
	for i, raw := range seeds {
		norm, err := urlscope.Normalize(strings.TrimSpace(raw))
		if err == nil {
			var u *url.URL
			if u, err = url.Parse(norm); err == nil {
				parsed[i], norms[i] = u, norm
				hosts = append(hosts, u.Host)
				continue
			}
		}
		refused[i] = err.Error()
	}
	if n.seedHosts != nil {
		fresh, err := n.seedHosts.AddSeedHosts(hosts)
		if err != nil {
			return nil, 0, fmt.Errorf("node: remember seed hosts: %w", err)
		}
		if err := n.router.ShareSeedHosts(ctx, fresh); err != nil {
			return nil, 0, fmt.Errorf("node: share seed hosts: %w", err)
		}
	}
	urls := make([]frontier.NewURL, 0, len(hosts))
	for i, u := range parsed {
		if refused[i] != "" {
			continue
		}
		if ok, reason := n.inScope(u, 0); !ok {
			refused[i] = "out of scope: " + reason
			continue
		}
		urls = append(urls, frontier.NewURL{URL: norms[i], Host: u.Host, Depth: 0})
	}
	if len(urls) == 0 {
		return refused, 0, nil
	}
	added, err = n.router.Route(ctx, urls)
	if err != nil {
		return refused, 0, fmt.Errorf("node: add seeds: %w", err)
	}
	if added > 0 {
		n.notify()
	}
	return refused, added, nil
}

// inScope applies the scope rules, and the seeds' hosts when no hosts or domains are configured.
func (n *Node) inScope(u *url.URL, depth int) (bool, string) {
	if n.seedHosts != nil && !n.seedHosts.Has(u.Host) {
		return false, "host"
	}
	if ok, reason := n.scope.Allow(u, depth); !ok {
		return false, reason
	}
	if depth == 0 || n.seedHosts != nil { // the scope is the seeds' hosts: none counts
		n.hostCap.Exempt(u.Host) // a seed's host does not count
	} else if !n.hostCap.Admit(u.Host) {
		n.capLog.Do(func() {
			n.log.Warn("a registered domain reached scope.max_hosts_per_domain: its further host names are refused",
				"host", u.Host, "max_hosts_per_domain", n.cfg.Scope.MaxHostsPerDomain)
		})
		return false, "max_hosts_per_domain"
	}
	return true, ""
}
