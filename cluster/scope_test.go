package cluster

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// memSeedHosts is a ScopeDelegate in memory.
type memSeedHosts struct {
	mu    sync.Mutex
	hosts map[string]bool
}

func newMemSeedHosts(hosts ...string) *memSeedHosts {
	m := &memSeedHosts{hosts: map[string]bool{}}
	for _, h := range hosts {
		m.hosts[h] = true
	}
	return m
}

func (m *memSeedHosts) SeedHosts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.hosts))
}

func (m *memSeedHosts) AddSeedHosts(hosts []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var fresh []string
	for _, h := range hosts {
		if !m.hosts[h] {
			m.hosts[h] = true
			fresh = append(fresh, h)
		}
	}
	return fresh, nil
}

func (m *memSeedHosts) has(hosts ...string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range hosts {
		if !m.hosts[h] {
			return false
		}
	}
	return true
}

// TestSeedHostsShared: the seeds' hosts, the scope when none is configured,
// are the same on every member: a joiner gets the set of the members it
// joins (and gives them its own) before its join gate opens, hosts shared
// later reach every member, and a member that joins last has them all.
func TestSeedHostsShared(t *testing.T) {
	sa, sb, sc := newMemSeedHosts("a.test"), newMemSeedHosts("b.test"), newMemSeedHosts()
	withScope := func(s *memSeedHosts) func(*NodeConfig) {
		return func(c *NodeConfig) { c.Scope, c.ScopeDigest = s, "same" }
	}
	a := startTestClusterWith(t, "a", withScope(sa))
	a.fetching(t)
	b := startTestClusterWith(t, "b", withScope(sb), a.c.members.Addr())
	b.fetching(t)
	if !sb.has("a.test") {
		t.Fatalf("b's join gate opened before it had a's seed hosts: %q", sb.SeedHosts())
	}
	wait.For(t, 20*time.Second, "a has b's seed hosts", func() bool { return sa.has("b.test") })

	if err := b.c.ShareSeedHosts(context.Background(), []string{"c.test", "d.test"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 20*time.Second, "a has the hosts shared by b", func() bool { return sa.has("c.test", "d.test") })

	c := startTestClusterWith(t, "c", withScope(sc), a.c.members.Addr())
	c.fetching(t)
	if want := []string{"a.test", "b.test", "c.test", "d.test"}; !sc.has(want...) {
		t.Fatalf("c's join gate opened with seed hosts %q, want %q", sc.SeedHosts(), want)
	}
	for _, tc := range []*testCluster{a, b, c} {
		wait.For(t, 20*time.Second, tc.c.cfg.Name+"'s outbox empties", func() bool { return tc.c.outbox.Len() == 0 })
	}
}

// TestSeedHostsDroppedForGoneMember: seed hosts filed for a member that is
// gone are dropped, not kept for ever (it gets the whole set when it comes
// back), so the outbox empties.
func TestSeedHostsDroppedForGoneMember(t *testing.T) {
	sa, sb := newMemSeedHosts(), newMemSeedHosts()
	a := startTestClusterWith(t, "a", func(c *NodeConfig) { c.Scope = sa })
	a.fetching(t)
	b := startTestClusterWith(t, "b", func(c *NodeConfig) { c.Scope = sb }, a.c.members.Addr())
	b.fetching(t)
	b.kill(t)
	wait.For(t, 20*time.Second, "a sees b gone", func() bool { return len(a.c.members.Alive()) == 1 })
	if err := a.c.outbox.PutKind(context.Background(), "b", exchange.KindScope, scopeEntries([]string{"x.test"})); err != nil {
		t.Fatal(err)
	}
	a.c.x.Kick()
	wait.For(t, 20*time.Second, "a's outbox empties", func() bool { return a.c.outbox.Len() == 0 })
}

// TestScopeDigestMismatchRefused: a node whose scope settings differ from
// the members' refuses to start, and says which settings.
func TestScopeDigestMismatchRefused(t *testing.T) {
	a := startTestClusterWith(t, "a", func(c *NodeConfig) { c.ScopeDigest = ScopeDigestOf(config.Scope{MaxDepth: 3}) })
	a.fetching(t)
	dir := t.TempDir()
	fo := frontier.DefaultOptions(dir + "/frontier.db")
	fo.NoSync = true
	f, err := frontier.Open(fo)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Start(NodeConfig{
		Name: "b", Gossip: "127.0.0.1:0", Join: []string{a.c.members.Addr()}, Key: testKey, Exchange: "127.0.0.1:0",
		Outbox: dir + "/outbox.db", Tune: membership.FastTimings, NoSync: true,
		Phasing:     Phasing{Phases: 1, PhaseDuration: 500 * time.Millisecond, Guard: 50 * time.Millisecond, Columns: 1999},
		Timeouts:    Timeouts{LeaveTimeout: time.Second},
		ScopeDigest: ScopeDigestOf(config.Scope{MaxDepth: 4}),
	}, f, testLogger())
	if err == nil || !strings.Contains(err.Error(), "scope.max_depth") || !strings.Contains(err.Error(), "member a") {
		t.Fatalf("start with another scope: err = %v, want a refusal naming member a and the scope settings", err)
	}
}

func TestScopeDigestOf(t *testing.T) {
	base := config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100}
	for _, tc := range []struct {
		name string
		s    config.Scope
		same bool
	}{
		{"equal", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100}, true},
		{"domain", config.Scope{AllowDomains: []string{"example.com"}, MaxDepth: 3, MaxPagesPerHost: 100}, false},
		{"domain as host", config.Scope{AllowHosts: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100}, false},
		{"depth", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 4, MaxPagesPerHost: 100}, false},
		{"pages", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3}, false},
		{"exclude", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100, Exclude: []string{"x"}}, false},
		{"strip params", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100, Canonical: config.Canonical{StripParams: []string{"sid"}}}, false},
		{"sort query", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100, Canonical: config.Canonical{SortQuery: true}}, false},
		{"pattern depth", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100, MaxPatternDepth: 10}, false},
		{"segment repeats", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100, MaxSegmentRepeats: 2}, false},
		{"query sets", config.Scope{AllowDomains: []string{"example.org"}, MaxDepth: 3, MaxPagesPerHost: 100, MaxQuerySets: 32}, false},
	} {
		if got := ScopeDigestOf(tc.s) == ScopeDigestOf(base); got != tc.same {
			t.Errorf("%s: same digest = %v, want %v", tc.name, got, tc.same)
		}
	}
}

// TestScopeDigestPoliteness: members must agree on the politeness unit
// (politeness.key, and the private suffixes that make a registered
// domain), so NodeConfigFrom puts them in the digest; with the default key
// and no private suffix the digest is ScopeDigestOf's.
func TestScopeDigestPoliteness(t *testing.T) {
	base := config.Default()
	digest := func(set func(*config.Config)) string {
		c := base
		if set != nil {
			set(&c)
		}
		return NodeConfigFrom(c, nil, "", nil).ScopeDigest
	}
	if got := digest(nil); got != ScopeDigestOf(base.Scope) {
		t.Errorf("default: digest %s, want ScopeDigestOf's %s", got, ScopeDigestOf(base.Scope))
	}
	domain := func(c *config.Config) { c.Politeness.Key = "domain" }
	for _, tc := range []struct {
		name string
		a, b func(*config.Config)
		same bool
	}{
		{"key", nil, domain, false},
		{"suffixes", func(c *config.Config) { c.Scope.PrivateSuffixes = []string{"x.test"} }, nil, false},
		{"domain and suffixes", domain, func(c *config.Config) { domain(c); c.Scope.PrivateSuffixes = []string{"x.test"} }, false},
		{"delay factor is per member", nil, func(c *config.Config) { c.Politeness.DelayFactor = 2 }, true},
		{"host cap is per member", nil, func(c *config.Config) { c.Scope.MaxHostsPerDomain = 5 }, true},
	} {
		if got := digest(tc.a) == digest(tc.b); got != tc.same {
			t.Errorf("%s: same digest = %v, want %v", tc.name, got, tc.same)
		}
	}
	if u := NodeConfigFrom(base, nil, "", nil).Unit; u != nil {
		t.Error("politeness.key host: Unit is not nil")
	}
	c := base
	c.Politeness.Key, c.Scope.PrivateSuffixes = "domain", []string{"x.test"}
	if u := NodeConfigFrom(c, nil, "", nil).Unit; u == nil || u("a.b.x.test") != "b.x.test" {
		t.Error("politeness.key domain: Unit is not the registered domain")
	}
}

func TestScopeEntryCodec(t *testing.T) {
	ok := exchange.Entry{Kind: exchange.KindScope, NewURL: frontier.NewURL{Host: "example.org"}}
	b := exchange.EncodeBatch(exchange.Batch{ID: 7, Entries: []exchange.Entry{ok}})
	got, err := exchange.DecodeBatch(b)
	if err != nil || len(got.Entries) != 1 || got.Entries[0] != ok {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range []exchange.Entry{
		{Kind: exchange.KindScope},
		{Kind: exchange.KindScope, NewURL: frontier.NewURL{Host: "example.org", URL: "http://example.org/"}},
		{Kind: exchange.KindNew, NewURL: frontier.NewURL{Host: "example.org"}},
	} {
		if err := bad.Valid(); err == nil {
			t.Errorf("Valid(%+v) = nil, want an error", bad)
		}
	}
}

func TestShareCap(t *testing.T) {
	for _, tc := range []struct{ limit, n, want int }{
		{0, 3, 0},
		{100, 1, 100},
		{100, 0, 100},
		{1000, 3, 389},      // 333.3 + 3*18.3
		{100000, 3, 33882},  // 33333.3 + 3*182.6
		{100000, 100, 1095}, // 1000 + 3*31.6
		{10, 100, 2},        // 0.1 + 3*0.32 = 1.05, ceiled
		{5, 2, 5},           // never above the limit
	} {
		if got := ShareCap(tc.limit, tc.n); got != tc.want {
			t.Errorf("ShareCap(%d, %d) = %d, want %d", tc.limit, tc.n, got, tc.want)
		}
	}
	// The cluster admits at most limit + 3*sqrt(n*limit) + n of a host.
	for _, n := range []int{2, 3, 10, 100} {
		limit := 100000
		if total, bound := n*ShareCap(limit, n), float64(limit)+3*math.Sqrt(float64(n*limit))+float64(n); float64(total) > bound {
			t.Errorf("n=%d: the cluster admits %d, over the bound %.0f", n, total, bound)
		}
	}
}
