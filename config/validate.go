package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Validate checks every key; the error names the key and its allowed range.
func (c Config) Validate() error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if strings.TrimSpace(c.Name) == "" {
		bad("name: must not be empty")
	}
	if strings.TrimSpace(c.Data) == "" {
		bad("data: must name a directory")
	}
	if _, _, err := net.SplitHostPort(c.HTTP); err != nil {
		bad("http=%q: must be HOST:PORT (%v)", c.HTTP, err)
	} else if !IsLoopbackAddr(c.HTTP) && strings.TrimSpace(c.APITokenFile) == "" {
		bad("api_token_file: required when http=%q is not a loopback address (the API's writes need a bearer token; --api-token-file FILE)", c.HTTP)
	}
	durRange := func(key string, d, lo, hi time.Duration) {
		if d < lo || d > hi {
			bad("%s=%s: must be in %s..%s", key, d, lo, hi)
		}
	}
	intRange := func(key string, v, lo, hi int64) {
		if v < lo || v > hi {
			bad("%s=%d: must be in %d..%d", key, v, lo, hi)
		}
	}
	durRange("delay", c.Delay, 0, time.Hour)
	intRange("workers", int64(c.Workers), 1, 4096)
	durRange("shutdown_timeout", c.ShutdownTimeout, 0, 10*time.Minute)
	if strings.TrimSpace(c.UserAgent) == "" {
		bad("user_agent: must not be empty")
	}
	intRange("max_pages", c.MaxPages, 0, 1e12)
	if _, err := c.Storage.MinFreeBytes(1 << 40); err != nil {
		bad("%s", err.Error())
	}
	durRange("max_duration", c.MaxDuration, 0, 8760*time.Hour)
	durRange("done_grace", c.DoneGrace, time.Second, time.Hour)
	if c.ExitWhenDone && c.Recurring() {
		bad("exit_when_done: a recurring crawl (recrawl.interval, --revisit, or a sites: revisit) is never done; drop --exit-when-done or --revisit")
	}
	intRange("scope.max_depth", int64(c.Scope.MaxDepth), 0, 10000)
	intRange("scope.max_pages_per_host", int64(c.Scope.MaxPagesPerHost), 0, 1<<31-1)
	intRange("scope.max_hosts_per_domain", int64(c.Scope.MaxHostsPerDomain), 0, 1000000)
	if c.Politeness.Key != "host" && c.Politeness.Key != "domain" {
		bad("politeness.key=%q: must be host or domain", c.Politeness.Key)
	}
	if !(c.Politeness.DelayFactor >= 0 && c.Politeness.DelayFactor <= 100) {
		bad("politeness.delay_factor=%g: must be in 0..100", c.Politeness.DelayFactor)
	}
	intRange("scope.max_segment_repeats", int64(c.Scope.MaxSegmentRepeats), 0, 1000)
	intRange("scope.max_path_depth", int64(c.Scope.MaxPathDepth), 0, 1000)
	intRange("scope.max_query_params", int64(c.Scope.MaxQueryParams), 0, 1000)
	intRange("scope.max_pattern_depth", int64(c.Scope.MaxPatternDepth), 0, 100000)
	intRange("scope.max_query_sets", int64(c.Scope.MaxQuerySets), 0, 100000)
	for i, p := range c.Scope.Canonical.StripParams {
		name := strings.TrimSuffix(strings.TrimSpace(p), "*")
		if name == "" || strings.ContainsAny(name, "*=&;?#/ ") {
			bad("scope.canonical.strip_params[%d]=%q: must be a parameter name, optionally ending in * (a prefix)", i, p)
		}
	}
	durRange("fetch.connect_timeout", c.Fetch.ConnectTimeout, time.Millisecond, 10*time.Minute)
	durRange("fetch.header_timeout", c.Fetch.HeaderTimeout, time.Millisecond, 10*time.Minute)
	durRange("fetch.body_timeout", c.Fetch.BodyTimeout, time.Millisecond, 10*time.Minute)
	intRange("fetch.max_body_size", c.Fetch.MaxBodySize, 1<<10, 1<<30)
	intRange("fetch.max_inflight_bytes", c.Fetch.MaxInflightBytes, 0, 1<<40)
	intRange("fetch.max_tries", int64(c.Fetch.MaxTries), 1, 100)
	durRange("fetch.retry_backoff", c.Fetch.RetryBackoff, 0, 24*time.Hour)
	if c.Fetch.Parser != "fast" && c.Fetch.Parser != "goquery" {
		bad("fetch.parser=%q: must be fast or goquery", c.Fetch.Parser)
	}
	if c.Fetch.Sitemaps != "robots" && c.Fetch.Sitemaps != "all" && c.Fetch.Sitemaps != "off" {
		bad("fetch.sitemaps=%q: must be robots, all or off", c.Fetch.Sitemaps)
	}
	intRange("fetch.min_rate", c.Fetch.MinRate, 0, 1<<30)
	durRange("fetch.rate_window", c.Fetch.RateWindow, 10*time.Millisecond, 10*time.Minute)
	intRange("fetch.max_redirects", int64(c.Fetch.MaxRedirects), 0, 100)
	intRange("fetch.max_outlinks", int64(c.Fetch.MaxOutlinks), 0, 10000000)
	intRange("fetch.max_idle_conns", int64(c.Fetch.MaxIdleConns), 1, 1000000)
	if err := validateProxy(c.Fetch.Proxy); err != nil {
		bad("fetch.proxy=%q: %v", redactProxy(c.Fetch.Proxy), err)
	}
	if c.DNS.Cache {
		durRange("dns.min_ttl", c.DNS.MinTTL, 0, time.Hour)
		durRange("dns.max_ttl", c.DNS.MaxTTL, c.DNS.MinTTL, 24*time.Hour)
		for i, s := range c.DNS.Servers {
			if _, err := DNSServerAddr(s); err != nil {
				bad("dns.servers[%d]=%q: %v", i, s, err)
			}
		}
	}
	intRange("fetch.inactive_workers", int64(c.Fetch.InactiveWorkers), -1, 4096)
	intRange("fetch.adaptive_factor", int64(c.Fetch.AdaptiveFactor), 1, 100)
	durRange("fetch.adaptive_floor", c.Fetch.AdaptiveFloor, time.Millisecond, 10*time.Minute)
	durRange("fetch.backoff_max", c.Fetch.BackoffMax, time.Second, 24*time.Hour)
	intRange("fetch.park_after", int64(c.Fetch.ParkAfter), 1, 1000)
	durRange("fetch.park_duration", c.Fetch.ParkDuration, time.Second, 168*time.Hour)
	durRange("robots.ttl", c.Robots.TTL, time.Second, 30*24*time.Hour)
	durRange("robots.error_ttl", c.Robots.ErrorTTL, time.Second, 24*time.Hour)
	durRange("robots.max_crawl_delay", c.Robots.MaxCrawlDelay, 0, 10*time.Minute)
	intRange("frontier.window", int64(c.Frontier.Window), 1000, 100000000)
	intRange("frontier.batch_size", int64(c.Frontier.BatchSize), 1, 100000)
	durRange("frontier.batch_delay", c.Frontier.BatchDelay, 0, time.Second)
	if err := c.BucketConfig(1).Validate(); err != nil {
		bad("%v", err)
	}
	if c.WARC.Enabled {
		intRange("warc.max_size", c.WARC.MaxSize, 1<<20, 100<<30)
		if c.WARC.Compression != WARCCompressResponses && c.WARC.Compression != WARCCompressAll {
			bad("warc.compression=%q: must be %s or %s", c.WARC.Compression, WARCCompressResponses, WARCCompressAll)
		}
		if l := c.WARC.CompressionLevel; l != WARCHuffmanOnly && (l < 1 || l > 9) {
			bad("warc.compression_level=%d: must be -2 (Huffman only) or 1..9", l)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level=%q: must be debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format=%q: must be text or json", c.Log.Format)
	}
	for i, r := range c.Resolve {
		if !strings.Contains(r, "=") {
			bad("resolve[%d]=%q: must be PATTERN=HOST:PORT", i, r)
		}
	}
	durRange("recrawl.interval", c.Recrawl.Interval, 0, 8760*time.Hour)
	durRange("recrawl.min_interval", c.Recrawl.MinInterval, 0, 8760*time.Hour)
	durRange("recrawl.max_interval", c.Recrawl.MaxInterval, 0, 8760*time.Hour)
	if c.Recrawl.MinInterval > 0 && c.Recrawl.MaxInterval > 0 && c.Recrawl.MinInterval > c.Recrawl.MaxInterval {
		bad("recrawl.min_interval=%s: must not exceed recrawl.max_interval=%s", c.Recrawl.MinInterval, c.Recrawl.MaxInterval)
	}
	errs = append(errs, c.Cluster.validate()...)
	errs = append(errs, c.validateSites()...)
	errs = append(errs, c.validateBandwidth()...)
	if len(errs) > 0 {
		return fmt.Errorf("config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// IsLoopbackAddr reports whether the listen address HOST:PORT binds only loopback
// interfaces: "localhost" or a loopback IP (127.0.0.0/8, ::1). An empty host, 0.0.0.0, ::
// and every other name or address count as reachable from elsewhere.
func IsLoopbackAddr(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// validate checks the cluster section; each message names its key.
func (c Cluster) validate() []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if c.Phases < 1 || c.Phases > 65536 {
		bad("cluster.phases=%d: must be in 1..65536", c.Phases)
	}
	if c.PhaseDuration < 100*time.Millisecond || c.PhaseDuration > 24*time.Hour {
		bad("cluster.phase_duration=%s: must be in 100ms..24h", c.PhaseDuration)
	}
	if c.Guard < 0 || c.Guard > c.PhaseDuration/2 {
		bad("cluster.guard=%s: must be in 0..phase_duration/2 (%s)", c.Guard, c.PhaseDuration/2)
	}
	if c.TakeoverAfter < 0 || c.TakeoverAfter > 24*time.Hour {
		bad("cluster.takeover_after=%s: must be in 0..24h", c.TakeoverAfter)
	}
	if c.FenceAfter < 100*time.Millisecond || c.FenceAfter > 10*time.Minute {
		bad("cluster.fence_after=%s: must be in 100ms..10m", c.FenceAfter)
	}
	if c.ReconnectInterval < 100*time.Millisecond || c.ReconnectInterval > time.Hour {
		bad("cluster.reconnect_interval=%s: must be in 100ms..1h", c.ReconnectInterval)
	}
	if c.ReconnectTimeout < 0 || c.ReconnectTimeout > 8760*time.Hour {
		bad("cluster.reconnect_timeout=%s: must be in 0..8760h", c.ReconnectTimeout)
	}
	if c.HandoffTimeout < time.Second || c.HandoffTimeout > time.Hour {
		bad("cluster.handoff_timeout=%s: must be in 1s..1h", c.HandoffTimeout)
	}
	if c.JoinTimeout < time.Second || c.JoinTimeout > time.Hour {
		bad("cluster.join_timeout=%s: must be in 1s..1h", c.JoinTimeout)
	}
	if c.BatchDelay < time.Millisecond || c.BatchDelay > time.Minute {
		bad("cluster.batch_delay=%s: must be in 1ms..1m", c.BatchDelay)
	}
	for i, s := range c.NTP {
		if strings.TrimSpace(s) == "" {
			bad("cluster.ntp[%d]: must be host or host:port, not empty", i)
		}
	}
	tlsSet := 0
	for _, v := range []string{c.TLSCert, c.TLSKey, c.TLSCA} {
		if strings.TrimSpace(v) != "" {
			tlsSet++
		}
	}
	if tlsSet > 0 && tlsSet < 3 {
		for _, kv := range [][2]string{{"cluster.tls_cert", c.TLSCert}, {"cluster.tls_key", c.TLSKey}, {"cluster.tls_ca", c.TLSCA}} {
			if strings.TrimSpace(kv[1]) == "" {
				bad("%s: required with the other cluster.tls_* keys (set cluster.tls_cert, cluster.tls_key and cluster.tls_ca, or none)", kv[0])
			}
		}
	}
	if !c.Enabled() {
		if len(c.Join) > 0 {
			bad("cluster.join: needs cluster.gossip (the local gossip address)")
		}
		if tlsSet > 0 {
			bad("cluster.tls_cert: needs cluster.gossip (TLS secures the traffic between members)")
		}
		return errs
	}
	hostPort := func(key, v string, portOptional bool) {
		if portOptional && !strings.Contains(strings.TrimPrefix(strings.TrimSuffix(v, "]"), "["), ":") {
			return // host only: the default port
		}
		_, p, err := net.SplitHostPort(v)
		if err != nil {
			bad("%s=%q: must be HOST:PORT (%v)", key, v, err)
			return
		}
		if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			bad("%s=%q: port must be in 0..65535", key, v)
		}
	}
	hostPort("cluster.gossip", c.Gossip, true)
	for i, j := range c.Join {
		hostPort(fmt.Sprintf("cluster.join[%d]", i), j, true)
	}
	if c.Exchange != "" {
		hostPort("cluster.exchange", c.Exchange, false)
	}
	if strings.TrimSpace(c.KeyFile) == "" {
		bad("cluster.key_file: required with cluster.gossip (16, 24 or 32 byte key, raw or base64)")
	}
	return errs
}
