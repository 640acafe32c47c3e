package cluster

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/urlscope"
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
	// Wake is called when URLs owned here arrived from a peer (the node's scheduler wake-up). Optional.
	Wake func()
	// Tune adjusts memberlist's configuration (tests: FastTimings). Optional.
	Tune func(*memberlist.Config)
	// NoSync skips fsync on the outbox (tests only).
	NoSync bool
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
	// Facets takes the facet sets (scope.max_query_sets) the other
	// members admitted, and is told those this node admits through
	// ShareFacets. nil: they are dropped.
	Facets FacetMerger
	// ScopeDigest identifies the node's scope settings (ScopeDigestOf); a
	// node refuses to join members whose digest differs.
	ScopeDigest string
	// Unit is the politeness unit a host's phase is hashed from
	// (politeness.key; nil: the host). Every member must use the same:
	// NodeConfigFrom puts it in ScopeDigest.
	Unit frontier.Unit
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
	// Phasing configures the phase schedule and its clock.
	Phasing
	// Timeouts are the cluster layer's waits.
	Timeouts
}

// Phasing configures the phase schedule (ScheduleConfig) and the cluster
// clock (ClockConfig) of NodeConfig.
type Phasing struct {
	// Phases, PhaseDuration, Guard and Columns configure the Schedule (see ScheduleConfig).
	Phases        int
	PhaseDuration time.Duration
	Guard         time.Duration
	Columns       int
	// NTP lists NTP servers; empty: the local clock (zero offset and uncertainty).
	NTP []string
}

// Timeouts are the waits of NodeConfig: the leave and hand-off, the join,
// the takeover, the fence and the reconnects, and the exchange's batches.
type Timeouts struct {
	// LeaveTimeout bounds the leave broadcast at Close. 0: DefaultLeaveTimeout.
	LeaveTimeout time.Duration
	// HandoffTimeout bounds the hand-off at Close: moving every record to
	// its new owner and waiting for the outbox to drain. 0: cluster.handoff_timeout's default.
	HandoffTimeout time.Duration
	// JoinTimeout bounds how long a starting node waits, before it
	// fetches, for every member to have moved the records it owns to it
	// (see Cluster). 0: cluster.join_timeout's default.
	JoinTimeout time.Duration
	// BatchDelay is the exchange's MaxDelay: the longest a partial batch
	// waits. 0: the exchange's default (DefaultExchangeConfig, 10ms).
	BatchDelay time.Duration
	// TakeoverAfter is how long the URLs owned by a member declared dead
	// wait (Held) before this node crawls those that reach it; 0: at once.
	TakeoverAfter time.Duration
	// FenceAfter: a node that has not heard from a majority of its agreed
	// member view for this long starts no request (quorum.go). 0: cluster.fence_after's default.
	FenceAfter time.Duration
	// ReconnectInterval is how often the node tries to join the members
	// declared dead and the Join addresses again (reconnect.go). 0: cluster.reconnect_interval's default.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long after a member was declared dead the
	// node keeps trying to reach it; 0: forever. Default 24h.
	ReconnectTimeout time.Duration
}

// DefaultLeaveTimeout is Timeouts.LeaveTimeout's default: no
// configuration key sets it.
const DefaultLeaveTimeout = 5 * time.Second

// withDefaults returns t with each zero timeout that has a default set to
// it: the configuration's defaults (config.Default), written there once.
// TakeoverAfter, BatchDelay and ReconnectTimeout keep their zero, which
// means something of its own.
func (t Timeouts) withDefaults() Timeouts {
	d := config.Default().Cluster
	for _, v := range []struct {
		field *time.Duration
		def   time.Duration
	}{
		{&t.LeaveTimeout, DefaultLeaveTimeout},
		{&t.HandoffTimeout, d.HandoffTimeout},
		{&t.JoinTimeout, d.JoinTimeout},
		{&t.FenceAfter, d.FenceAfter},
		{&t.ReconnectInterval, d.ReconnectInterval},
	} {
		if *v.field <= 0 {
			*v.field = v.def
		}
	}
	return t
}

// NodeConfigFrom builds the cluster layer's configuration from a node's
// configuration (its cluster section), the cluster key, the API address to
// gossip and the scheduler's wake-up.
func NodeConfigFrom(cfg config.Config, key []byte, api string, wake func()) NodeConfig {
	k := cfg.Cluster
	// node.New refused a bad politeness.key or private suffix already.
	u, unitName, _ := urlscope.PolitenessUnit(cfg.Politeness.Key, cfg.Scope.PrivateSuffixes)
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
		tune = membership.FastTimings
	}
	return NodeConfig{
		Name: cfg.Name, Gossip: k.Gossip, Join: k.Join, Key: key, Exchange: k.ExchangeAddr(), API: api,
		Outbox: filepath.Join(cfg.Data, "outbox.db"), Wake: wake, Tune: tune,
		ScopeDigest: digest, MaxPagesPerHost: cfg.Scope.MaxPagesPerHost,
		Lend: k.Lend, Revisit: RevisitSchedule(cfg), Unit: unit,
		Phasing: Phasing{Phases: k.Phases, PhaseDuration: k.PhaseDuration, Guard: k.PhaseGuard(), Columns: cfg.Bucket.Columns, NTP: k.NTP},
		Timeouts: Timeouts{HandoffTimeout: k.HandoffTimeout, JoinTimeout: k.JoinTimeout, BatchDelay: k.BatchDelay,
			TakeoverAfter: k.TakeoverAfter, FenceAfter: k.FenceAfter, ReconnectInterval: k.ReconnectInterval, ReconnectTimeout: k.ReconnectTimeout},
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
// fetch, so that a chain is limited however many members it crosses
// (the node implements it). RememberRedirects keeps those that discovered
// URLs carry (NewURL.Redirects); RedirectsOf is the length kept for a
// fingerprint (0: none), which a URL lent to another member carries.
type RedirectMemory interface {
	RememberRedirects(urls []frontier.NewURL)
	RedirectsOf(fp uint64) int
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
