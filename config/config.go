// Package config holds the settings of one phasecrawl node: their defaults,
// the YAML file that overrides them, the command-line flags that override the
// file, and the PHASECRAWL_* environment variables that override the flags.
//
// Every key has a dotted name (the YAML path, e.g. "bucket.columns"); its
// environment variable is that name upper-cased with dots turned into
// underscores and prefixed with PHASECRAWL_ (PHASECRAWL_BUCKET_COLUMNS).
// Validation errors name the key and the allowed range.
package config

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
)

// Config is the whole configuration of a node.
type Config struct {
	// Node holds the top-level keys that say what the node is: its name,
	// directory, addresses, workers and politeness basics.
	Node `yaml:",inline"`
	// Run holds the top-level keys that say what it crawls and when it
	// stops: seeds and budgets.
	Run `yaml:",inline"`

	Scope      Scope      `yaml:"scope"`
	Politeness Politeness `yaml:"politeness"`
	Fetch      Fetch      `yaml:"fetch"`
	Robots     Robots     `yaml:"robots"`
	Frontier   Frontier   `yaml:"frontier"`
	Bucket     Bucket     `yaml:"bucket"`
	WARC       WARC       `yaml:"warc"`
	Storage    Storage    `yaml:"storage"`
	Log        Log        `yaml:"log"`
	DNS        DNS        `yaml:"dns"`
	Cluster    Cluster    `yaml:"cluster"`
	Recrawl    Recrawl    `yaml:"recrawl"`

	// Bandwidth caps the node's download rate and shares it among the
	// sites (bandwidth.limit, bandwidth.policy; the file also takes
	// "bandwidth: 2MB"). Default unlimited, policy maxt.
	Bandwidth Bandwidth `yaml:"bandwidth"`

	// Sites holds per-site settings (priority, revisit, deadline,
	// bandwidth) for the hosts each entry matches; file only. Default none.
	Sites []Site `yaml:"sites"`
}

// Node is the top-level keys of the file that describe the node
// (inline in Config: name, data, http, ...).
type Node struct {
	// Name identifies the node in the cluster and in /v1/status. Default: the hostname.
	Name string `yaml:"name"`
	// Data is the data directory (frontier, WARC files, crawl log). Default ./phasecrawl-data.
	Data string `yaml:"data"`
	// HTTP is the API listen address. Default 127.0.0.1:7070.
	HTTP string `yaml:"http"`
	// Resolve holds 'PATTERN=HOST:PORT' rules: hosts matching the glob are dialled at HOST:PORT.
	Resolve []string `yaml:"resolve"`
	// AllowPrivate lets the fetcher connect to loopback and private addresses (the targets
	// of Resolve rules need it not). Link-local addresses and cloud metadata endpoints need
	// Fetch.AllowLinkLocal.
	AllowPrivate bool `yaml:"allow_private"`
	// Delay is the minimum pause between two requests to one host. Default 1s, valid 0..1h.
	Delay time.Duration `yaml:"delay"`
	// UserAgent is sent with every request and used to pick the robots.txt group.
	UserAgent string `yaml:"user_agent"`
	// Workers is the number of fetch workers (each serves one host at a time). Default 256, valid 1..4096.
	Workers int `yaml:"workers"`
	// ShutdownTimeout bounds how long in-flight fetches may run after SIGINT/SIGTERM. Default 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// APITokenFile names a file holding the API's bearer token (its first line; at least 16
	// characters). When set, every write to the API (POST /v1/seeds, ...) needs
	// "Authorization: Bearer TOKEN". Required when http is not a loopback address.
	APITokenFile string `yaml:"api_token_file"`
}

// Run is the top-level keys of the file that say what the node crawls
// and when it stops (inline in Config: seeds, max_pages, ...).
type Run struct {
	// Seeds are start URLs, added to the frontier at start (already-seen ones are ignored).
	Seeds []string `yaml:"seeds"`
	// SeedsFile names a file with one seed URL a line (# comments allowed).
	SeedsFile string `yaml:"seeds_file"`
	// MaxPages is this node's crawl budget in pages: once it has fetched
	// this many pages (responses received) since it started, it starts no
	// new request; requests in flight finish. Per node: each member of a
	// cluster counts its own. Default 0 = unlimited, valid 0..1e12.
	MaxPages int64 `yaml:"max_pages"`
	// MaxDuration is this node's crawl budget in time, counted from its
	// start: once it has passed the node starts no new request. Per node.
	// Default 0 = unlimited, valid 0..8760h.
	MaxDuration time.Duration `yaml:"max_duration"`
	// ExitWhenDone makes the node exit (status 0) once its crawl is done:
	// alone, once its frontier and bucket are empty; in a cluster, once
	// every member is done and its outbox empty, unchanged for done_grace.
	// A recurring crawl (recrawl.interval, a sites: revisit) is never
	// done: the two together are an error. Default false.
	ExitWhenDone bool `yaml:"exit_when_done"`
	// DoneGrace is how long a crawl must stay done before exit_when_done
	// ends it. The members of a cluster wait the largest done_grace among
	// them. Default 5s, valid 1s..1h.
	DoneGrace time.Duration `yaml:"done_grace"`
}

// Recrawl configures recurring crawls: when a fetched page is due again.
type Recrawl struct {
	// Interval is how long after a page was fetched it is due again, for
	// hosts whose sites: entry sets no revisit. Default 0: crawl once.
	// Valid 0..8760h.
	Interval time.Duration `yaml:"interval"`
	// Adaptive lets each page's interval shrink when the page changed and
	// grow when it did not, within min_interval..max_interval. Default false.
	Adaptive bool `yaml:"adaptive"`
	// MinInterval and MaxInterval bound the adaptive interval. Defaults 0
	// (half the page's base interval) and 0 (eight times it); valid 0..8760h,
	// min_interval <= max_interval when both are set.
	MinInterval time.Duration `yaml:"min_interval"`
	MaxInterval time.Duration `yaml:"max_interval"`
}

// Recurring reports whether some page is fetched again (recrawl.interval,
// or a sites: entry's revisit): such a crawl is never done.
func (c Config) Recurring() bool {
	if c.Recrawl.Interval > 0 {
		return true
	}
	for _, s := range c.Sites {
		if s.Revisit > 0 {
			return true
		}
	}
	return false
}

// RevisitFor returns the revisit interval of host (a host name, with or
// without port): its sites: entry's revisit, else recrawl.interval. 0 means
// the host's pages are fetched once.
func (c Config) RevisitFor(host string) time.Duration {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if s, ok := c.SiteFor(host); ok && s.Revisit > 0 {
		return s.Revisit
	}
	return c.Recrawl.Interval
}

// Cluster configures the cluster layer. With Gossip empty the node
// runs alone.
type Cluster struct {
	// Gossip is the gossip (memberlist) address HOST:PORT; a missing port means 7946.
	// Default "": no cluster, the node runs alone.
	Gossip string `yaml:"gossip"`
	// Join lists HOST:PORT gossip addresses of existing members; empty starts a new cluster.
	Join []string `yaml:"join"`
	// KeyFile holds the cluster key (16, 24 or 32 bytes, raw or base64). Required with gossip.
	KeyFile string `yaml:"key_file"`
	// Exchange is the HOST:PORT the node-to-node URL exchange listens on.
	// Default "": the gossip host, gossip port + 1 (port 0 when the gossip port is 0).
	Exchange string `yaml:"exchange"`
	// Phases is the configured number of host-hash phases (Nphase). Default 1, valid
	// 1..65536; raised automatically to the member count.
	Phases int `yaml:"phases"`
	// PhaseDuration is the length of one phase epoch. Default 30s, valid 100ms..24h.
	PhaseDuration time.Duration `yaml:"phase_duration"`
	// Guard is the longest allowed request: no new request starts this long
	// (plus twice the clock uncertainty) before a phase swap. Default 0 =
	// auto: min(250ms, phase_duration/4) (see PhaseGuard); valid 0..phase_duration/2.
	// Besides, a worker stops a host early when four times its expected
	// response time does not fit before the swap, so the guard only covers
	// an answer much slower than the host's (or, for a new host, the
	// node's) recent ones. Every member's guard falls at the same time,
	// and the whole cluster starts no request in it: 1s left a big site
	// idle for a second at every swap.
	Guard time.Duration `yaml:"guard"`
	// NTP lists NTP servers (host or host:port) for the cluster clock. Empty: the local clock.
	NTP []string `yaml:"ntp"`
	// HandoffTimeout bounds a graceful leave's hand-off: moving every record
	// to its new owner and waiting for the outbox to drain. Default 60s,
	// valid 1s..1h.
	HandoffTimeout time.Duration `yaml:"handoff_timeout"`
	// JoinTimeout bounds how long a starting member waits, before it
	// fetches, for the others to move its records to it. Default 2m, valid
	// 1s..1h.
	JoinTimeout time.Duration `yaml:"join_timeout"`
	// TakeoverAfter is how long the members wait, after gossip declared a
	// member dead (a crash, kill -9, a freeze), before they crawl the URLs
	// of its share that reach them: until then those wait, so a member
	// restarted in time (same --name and --data) gets them back and does not
	// have its last pages, whose replicas may not have left it, crawled
	// again by the others. Default 2m, valid 0 (at once)..24h.
	TakeoverAfter time.Duration `yaml:"takeover_after"`
	// BatchDelay is the longest a partial batch of URLs for another member
	// waits in the outbox before it is sent (250 URLs go at once, up to
	// 1000 a batch). Default 10ms, valid 1ms..1m. Each member sends one batch
	// at a time to a peer and waits for its ack, so under load batches fill
	// by themselves while the previous one is stored; the delay only
	// gathers a slow trickle. Longer: fewer messages, and each link waits
	// longer on its way to its owner.
	BatchDelay time.Duration `yaml:"batch_delay"`
	// TLSCert, TLSKey and TLSCA are PEM files: this member's certificate
	// (valid for its --name as a DNS name, for client and server use), its
	// private key, and the CA certificates that sign the members'. Set all
	// three to run the URL exchange over mutual TLS 1.3 as well (the cluster
	// key still authenticates and seals inside; docs/design/exchange-security.md).
	// Default "": no TLS.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	TLSCA   string `yaml:"tls_ca"`
	// FastGossip uses gossip timings for clusters on one machine (tests,
	// demo): failures are detected in about a second. Never on a real
	// network, where a busy node would be declared dead. Default false.
	FastGossip bool `yaml:"fast_gossip"`
	// FenceAfter: a member that has not heard from a majority of the last
	// member view it agreed on for this long starts no request until it
	// does again (quorum fencing: docs/design/partitions.md). The members
	// keep a member declared dead in the phase schedule for at least
	// fence_after + 2×fence_after/5 + 1s (and takeover_after). Default 5s,
	// valid 100ms..10m.
	FenceAfter time.Duration `yaml:"fence_after"`
	// ReconnectInterval is how often a member tries to join the members it
	// declared dead, and its join addresses, again (gossip never contacts a
	// dead member again; after a partition heals the sides find each other
	// this way). Default 10s, valid 100ms..1h.
	ReconnectInterval time.Duration `yaml:"reconnect_interval"`
	// ReconnectTimeout is how long after a member was declared dead it is
	// tried again. Default 24h, valid 0 (forever)..8760h.
	ReconnectTimeout time.Duration `yaml:"reconnect_timeout"`
	// Lend: a member lends the URLs it owns that wait for its turn on
	// their host's phase to the member that works on that phase now; it
	// keeps their records and settles them when the outcome comes back
	// (docs/design/lending.md). Default true; false: every URL waits for
	// its owner's turn (a small crawl takes minutes on a cluster).
	Lend bool `yaml:"lend"`
}

// Enabled reports whether the node joins a cluster (cluster.gossip is set).
func (c Cluster) Enabled() bool { return strings.TrimSpace(c.Gossip) != "" }

// PhaseGuard returns cluster.guard, or min(250ms, phase_duration/4) when it is 0 (auto).
func (c Cluster) PhaseGuard() time.Duration {
	if c.Guard > 0 {
		return c.Guard
	}
	return min(250*time.Millisecond, c.PhaseDuration/4)
}

// ExchangeAddr returns cluster.exchange, or its default derived from cluster.gossip.
func (c Cluster) ExchangeAddr() string {
	if c.Exchange != "" || c.Gossip == "" {
		return c.Exchange
	}
	host, port, err := net.SplitHostPort(c.Gossip)
	if err != nil {
		host, port = strings.Trim(c.Gossip, "[]"), "7946"
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return ""
	}
	if p != 0 {
		p++
	}
	return net.JoinHostPort(host, strconv.Itoa(p))
}

// Scope limits what is crawled.
type Scope struct {
	// AllowHosts lists hosts that may be crawled. Empty with empty AllowDomains: the seeds' hosts.
	AllowHosts []string `yaml:"allow_hosts"`
	// AllowDomains lists domains whose hosts (and subdomains) may be crawled.
	AllowDomains []string `yaml:"allow_domains"`
	// Include, if set, keeps only URLs matching one of these regular expressions.
	Include []string `yaml:"include"`
	// Exclude drops URLs matching any of these regular expressions.
	Exclude []string `yaml:"exclude"`
	// MaxDepth is the largest link distance from a seed; 0 = unlimited. Valid 0..10000.
	MaxDepth int `yaml:"max_depth"`
	// MaxPagesPerHost caps the URLs admitted per host; 0 = unlimited. Default 100000.
	MaxPagesPerHost int `yaml:"max_pages_per_host"`
	// PrivateSuffixes add to the Public Suffix List, as its private section
	// holds github.io: with "example.net" here, a.b.example.net's registered
	// domain is b.example.net.
	PrivateSuffixes []string `yaml:"private_suffixes"`
	// MaxHostsPerDomain caps the host names admitted per registered domain
	// (seed hosts and allow_hosts do not count), per member; 0 = unlimited.
	// Default 1000, valid 0..1000000.
	MaxHostsPerDomain int `yaml:"max_hosts_per_domain"`
	// Canonical removes session-id and tracking parameters and orders the
	// query, so that a page has one URL (docs/design/traps.md).
	Canonical Canonical `yaml:"canonical"`
	// MaxSegmentRepeats refuses a URL whose path repeats a sequence of
	// segments more than this many times in a row, or one segment more
	// than this many times plus one; 0 = off. Default 2, valid 0..1000.
	MaxSegmentRepeats int `yaml:"max_segment_repeats"`
	// MaxPathDepth refuses a URL with more path segments; 0 = off. Default 20, valid 0..1000.
	MaxPathDepth int `yaml:"max_path_depth"`
	// MaxQueryParams refuses a URL with more query parameters (after
	// canonicalization); 0 = off. Default 16, valid 0..1000.
	MaxQueryParams int `yaml:"max_query_params"`
	// MaxPatternDepth refuses a step (a link to the next month, day or
	// page: the same pattern, digits replaced, a number one apart) with
	// more steps than this on the way it was found; 0 = off. Default 10,
	// valid 0..100000.
	MaxPatternDepth int `yaml:"max_pattern_depth"`
	// MaxQuerySets is the most distinct sets of query parameter names
	// admitted on one path pattern of a host (facets); 0 = off. Default 32,
	// valid 0..100000.
	MaxQuerySets int `yaml:"max_query_sets"`
}

// Politeness chooses what one politeness unit is.
type Politeness struct {
	// Key is "host" (each host name is a unit) or "domain" (every name of a
	// registered domain is one unit: one phase, one delay, one request at a
	// time). Default "host".
	Key string `yaml:"key"`
	// DelayFactor: the next request to a unit waits at least this many
	// times the last response time. Default 0 (off), valid 0..100.
	DelayFactor float64 `yaml:"delay_factor"`
}

// Canonical is scope.canonical: the canonicalization of URLs before
// de-duplication. Every member of a cluster must use the same.
type Canonical struct {
	// StripParams are parameter names (case-insensitive; a trailing "*"
	// makes a prefix) removed from queries and path parameters. Default:
	// session ids (jsessionid, phpsessid, sid, sessionid, aspsessionid*,
	// ...) and tracking tags (utm_*, gclid, fbclid, ...); [] = none.
	StripParams []string `yaml:"strip_params"`
	// SortQuery orders query parameters by name (stable). Default true.
	SortQuery bool `yaml:"sort_query"`
}

// Fetch configures the HTTP fetcher.
type Fetch struct {
	// ConnectTimeout bounds TCP connect and TLS handshake. Default 15s (Kim, Kim & Chin's timeout).
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// HeaderTimeout bounds the wait for response headers. Default 10s.
	HeaderTimeout time.Duration `yaml:"header_timeout"`
	// BodyTimeout bounds reading the body. Default 20s.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// MaxBodySize truncates bodies beyond this many bytes. Default 10 MiB, valid 1 KiB..1 GiB.
	MaxBodySize int64 `yaml:"max_body_size"`
	// MaxInflightBytes bounds the body bytes (as transferred and decoded)
	// held in memory by all workers at once, from a body's first byte until
	// its page is archived and its links are taken: past it a body waits
	// for room, or, once it has started, goes on into a temp file in the
	// data directory (spool/). A single body larger than the bound is read
	// when nothing else is held. Default 256 MiB, valid 0..1 TiB (0 =
	// unbounded); below max_body_size large bodies are read one at a time.
	MaxInflightBytes int64 `yaml:"max_inflight_bytes"`
	// MaxTries is how many times a STALLED URL is tried before it is given up. Default 3, valid 1..100.
	MaxTries int `yaml:"max_tries"`
	// RetryBackoff is the first wait before a STALLED URL is retried; it doubles each try. Default 1m.
	RetryBackoff time.Duration `yaml:"retry_backoff"`
	// Parser picks the link extractor: "fast" (x/net/html tokenizer) or "goquery". Default fast.
	Parser string `yaml:"parser"`
	// Requisites fetches page requisites too: style sheets, scripts, images, fonts, media,
	// icons (<img src>, <script src>, <link rel=stylesheet>, CSS url(), ...), as Heritrix and
	// wget --page-requisites do for replay. They are fetched at their page's depth. Default false.
	Requisites bool `yaml:"requisites"`
	// Sitemaps picks the sitemaps read: "robots" (the Sitemap: lines of each host's robots.txt),
	// "all" (those and /sitemap.xml of every host) or "off". Default robots.
	Sitemaps string `yaml:"sitemaps"`
	// MinRate is the slowest body transfer tolerated, in bytes per second, measured over
	// every RateWindow after the headers (slow-drip and stalled bodies fail as "too_slow").
	// Default 512, valid 0..1073741824 (0 = off).
	MinRate int64 `yaml:"min_rate"`
	// RateWindow is the period MinRate is measured over. Default 5s, valid 10ms..10m.
	RateWindow time.Duration `yaml:"rate_window"`
	// MaxRedirects is the longest redirect chain followed from a URL (each hop is fetched as
	// a URL of its own); the Location of a longer chain is dropped. Default 10, valid 0..100.
	MaxRedirects int `yaml:"max_redirects"`
	// MaxOutlinks is the most links taken from one page; the rest are dropped. Default 10000,
	// valid 0..10000000 (0 = unlimited).
	MaxOutlinks int `yaml:"max_outlinks"`
	// MaxIdleConns is the most idle keep-alive connections kept (one per host at most,
	// least recently used closed first, each closed after 90s idle), so a host's next
	// trip need not connect again; the node keeps at most half the process's open-file
	// limit. Default 4096, valid 1..1000000.
	MaxIdleConns int `yaml:"max_idle_conns"`
	// Proxy is the HTTP(S) proxy every request goes through, an http:// or
	// https:// URL (user:password@ for Basic authentication): https
	// targets through a CONNECT tunnel, http ones as absolute-form
	// requests. Default "": the HTTPS_PROXY / HTTP_PROXY environment
	// variables (and their lower-case forms), with NO_PROXY's exceptions.
	// The private-address guard still applies to the target.
	Proxy string `yaml:"proxy"`
	// AllowLinkLocal lets the fetcher connect to link-local addresses
	// (169.254.0.0/16, fe80::/10) and cloud metadata endpoints
	// (169.254.169.254, fd00:ec2::254), which allow_private does not open.
	// Default false.
	AllowLinkLocal bool `yaml:"allow_link_local"`
	// InactiveWorkers is the size of the dead-link lane: the workers that
	// serve the hosts whose last attempt timed out, was refused or failed
	// DNS, so such hosts never hold up the workers of live ones. -1 (the
	// default) means a tenth of workers, at least 1; 0 turns the lane off
	// (every host on the same workers). Valid -1..4096.
	InactiveWorkers int `yaml:"inactive_workers"`
	// AdaptiveTimeouts derives each host's connect and header timeouts from
	// its observed response times: AdaptiveFactor times the longest of its
	// last 32 (the node's last 32 answers for a host not answered yet), at
	// least AdaptiveFloor, at most connect_timeout / header_timeout. Only the
	// live workers use them: a URL cut by one is retried in the dead-link
	// lane with the full timeouts (and without using up a try). Default false.
	AdaptiveTimeouts bool `yaml:"adaptive_timeouts"`
	// AdaptiveConnect bounds the connect of a first contact (a host that
	// has not answered the node yet) by AdaptiveFactor times the longest of
	// the node's last 32 connect times, at least AdaptiveFloor (AdaptiveFactor
	// × AdaptiveFloor until the node has seen 8 connects), at most
	// connect_timeout: a host that accepts nothing holds a live worker that
	// long. A cut host is tried again in the dead-link lane with the full
	// timeouts, without using up a try. Needs the lane. Default true.
	AdaptiveConnect bool `yaml:"adaptive_connect"`
	// AdaptiveFactor multiplies the observed response time. Default 4, valid 1..100.
	AdaptiveFactor int `yaml:"adaptive_factor"`
	// AdaptiveFloor is the shortest derived timeout. Default 250ms, valid 1ms..10m.
	AdaptiveFloor time.Duration `yaml:"adaptive_floor"`
	// BackoffMax caps one server back-off (a 429 or 503's Retry-After, or
	// the grown delay after repeated 5xx). Default 10m, valid 1s..24h.
	BackoffMax time.Duration `yaml:"backoff_max"`
	// ParkAfter is how many back-offs in a row park a host. Default 6, valid 1..1000.
	ParkAfter int `yaml:"park_after"`
	// ParkDuration is how long a parked host gets no request. Default 1h, valid 1s..168h.
	ParkDuration time.Duration `yaml:"park_duration"`
}

// InactiveLane is the number of dead-link lane workers fetch.inactive_workers
// asks for: -1 is a tenth of workers, at least 1.
func (f Fetch) InactiveLane(workers int) int {
	if f.InactiveWorkers < 0 {
		return max(workers/10, 1)
	}
	return f.InactiveWorkers
}

// DNS configures the fetcher's DNS cache.
type DNS struct {
	// Cache resolves host names with a cache that keeps each answer for its
	// TTL (bounded by min_ttl and max_ttl). Default true; false: the system
	// resolver on every new connection.
	Cache bool `yaml:"cache"`
	// Servers are the DNS servers asked (HOST:PORT; a missing port means 53).
	// Default: the nameservers of /etc/resolv.conf.
	Servers []string `yaml:"servers"`
	// MinTTL is the least time an answer is kept (a TTL of 0 is common).
	// Default 5s, valid 0..1h.
	MinTTL time.Duration `yaml:"min_ttl"`
	// MaxTTL is the most time an answer is kept. Default 1h, valid min_ttl..24h.
	MaxTTL time.Duration `yaml:"max_ttl"`
}

// Robots configures robots.txt handling.
type Robots struct {
	// TTL is how long a host's robots.txt is cached. Default 24h.
	TTL time.Duration `yaml:"ttl"`
	// ErrorTTL is how long a host whose robots.txt answered 5xx (or failed) is treated as disallowed. Default 10m.
	ErrorTTL time.Duration `yaml:"error_ttl"`
	// MaxCrawlDelay caps the Crawl-delay a site may ask for. Default 30s, valid 0..10m.
	MaxCrawlDelay time.Duration `yaml:"max_crawl_delay"`
}

// Frontier configures the bbolt URL store and the scheduler's window over it.
type Frontier struct {
	// Window is the sliding window (sWin) of oldest unfinished URLs the scheduler scans. Default 250000, valid 1000..100000000.
	Window int `yaml:"window"`
	// BatchSize is the most writes in one transaction. Default 2048, valid 1..100000.
	BatchSize int `yaml:"batch_size"`
	// BatchDelay is the longest a write waits to be batched. Default 20ms:
	// under load each commit (and its fsync) then carries about 20ms of
	// writes; 10ms measured 20-27% more pages/s than 0 on 2 cores, and 20ms
	// another ~10% fewer CPU-s per page and ~9% more pages/s than 10ms (40ms:
	// fewer pages/s, host trips wait longer for their last write) (docs/design/performance.md); a batch is committed sooner when no write comes for a
	// quarter of the delay (light load, e.g. the last hosts of a crawl:
	// ~4% more pages/s); 0 commits what is queued at once, and writes
	// arriving during a commit form the next batch. Valid 0..1s.
	BatchDelay time.Duration `yaml:"batch_delay"`
}

// Bucket configures the prime-column scheduler bucket (KSpider §3.4).
type Bucket struct {
	// Columns is a prime in 199..4999, default 1999.
	Columns int `yaml:"columns"`
	// Rows per column, 4..16, default 8.
	Rows int `yaml:"rows"`
	// ListCap is the URLs per element, 1..1000, default 20.
	ListCap int `yaml:"list_cap"`
	// MaxQueueWait dispatches a QUEUING element that is not full after this long. Default 1s.
	MaxQueueWait time.Duration `yaml:"max_queue_wait"`
}

// Storage guards the data directory's file system.
type Storage struct {
	// MinFree is the free space the data directory's file system keeps:
	// below it the node starts no new request (requests in flight finish
	// and are written), and it resumes by itself once the free space is
	// back above MinFree plus a quarter of it. Bytes ("512MiB", "2GB",
	// "1073741824") or a share of the file system ("5%"); "0" turns the
	// guard off. Default "128MiB"; bytes valid 0..1PiB, a share 0..50%.
	MinFree string `yaml:"min_free"`
}

// MinFreeBytes is storage.min_free in bytes on a file system of total
// bytes (a share is taken of total).
func (s Storage) MinFreeBytes(total uint64) (uint64, error) {
	t := strings.TrimSpace(s.MinFree)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || v > 50 {
			return 0, fmt.Errorf("storage.min_free=%q: a share must be in 0%%..50%%", s.MinFree)
		}
		return uint64(float64(total) * v / 100), nil
	}
	v, err := ParseByteRate(t)
	if err != nil || strings.HasSuffix(t, "/s") || v > 1<<50 {
		return 0, fmt.Errorf("storage.min_free=%q: must be bytes (such as 512MiB, 2GB; 0..1PiB) or a share of the file system (such as 5%%)", s.MinFree)
	}
	return uint64(v), nil
}

// WARC configures the archive output.
type WARC struct {
	// Enabled writes request and response records to WARC files under <data>/warc. Default true.
	Enabled bool `yaml:"enabled"`
	// MaxSize rotates a WARC file past this many bytes. Default 1 GiB, valid 1 MiB..100 GiB.
	MaxSize int64 `yaml:"max_size"`
	// Compression chooses which records are deflated (every record is its
	// own gzip member either way, readable by any WARC tool): "responses"
	// deflates response and warcinfo records (gzip level 1) and writes the
	// small request records as stored (uncompressed) gzip members, whose
	// deflate costs about as much CPU as a whole page's for ~250 bytes
	// saved; "all" deflates every record. Default "responses".
	Compression string `yaml:"compression"`
	// CompressionLevel is the deflate level of the deflated records:
	// -2 (Huffman only: no match search, a static HTML table where it
	// fits; the default), or 1 (fastest match search) to 9. On
	// synthetic-web pages (2-8 KB) -2 costs ~18 µs per exchange and 3,466
	// bytes, 1 costs ~33 µs and 2,478 bytes
	// (`go test ./fetch/archive -bench WARCWrite`).
	CompressionLevel int `yaml:"compression_level"`
	// Dedup archives a page whose payload has the digest of one archived
	// before (any URL, this round or an earlier one, on this member) as a
	// revisit record of the identical-payload-digest profile that refers
	// to it, without the payload, and does not extract its links again
	// (docs/design/dedup.md). Default true.
	Dedup bool `yaml:"dedup"`
}

// WARC compression modes (WARC.Compression).
const (
	WARCCompressResponses = "responses"
	WARCCompressAll       = "all"
)

// WARCHuffmanOnly is the WARC.CompressionLevel that entropy-codes records
// without searching for matches (compress/flate.HuffmanOnly).
const WARCHuffmanOnly = -2

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// defaultStripParams is scope.canonical.strip_params by default; the same
// list as urlscope.DefaultStripParams (config does not import urlscope).
var defaultStripParams = []string{
	"jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid*", "cfid", "cftoken",
	"utm_*", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid", "mc_cid", "mc_eid", "igshid", "_hsenc", "_hsmi", "mtm_*", "pk_campaign", "pk_kwd",
}

// Default returns the configuration a node runs with when nothing is set.
func Default() Config {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "phasecrawl"
	}
	b := bucket.DefaultConfig()
	return Config{
		Node: Node{
			Name:            name,
			Data:            "./phasecrawl-data",
			HTTP:            "127.0.0.1:7070",
			Delay:           time.Second,
			UserAgent:       "phasecrawl/0.1 (+https://github.com/phasecrawl/phasecrawl)",
			Workers:         256,
			ShutdownTimeout: 30 * time.Second,
		},
		Run: Run{DoneGrace: 5 * time.Second},
		Scope: Scope{MaxPagesPerHost: 100000, Canonical: Canonical{StripParams: slices.Clone(defaultStripParams), SortQuery: true},
			MaxSegmentRepeats: 2, MaxPathDepth: 20, MaxQueryParams: 16, MaxPatternDepth: 10, MaxQuerySets: 32, MaxHostsPerDomain: 1000},
		Politeness: Politeness{Key: "host"},
		Fetch: Fetch{
			ConnectTimeout: 15 * time.Second,
			HeaderTimeout:  10 * time.Second,
			BodyTimeout:    20 * time.Second,
			MaxBodySize:    10 << 20,
			MaxTries:       3,
			RetryBackoff:   time.Minute,
			Parser:         "fast",
			Sitemaps:       "robots",
			MinRate:        512,
			RateWindow:     5 * time.Second,
			MaxRedirects:   10,
			MaxOutlinks:    10000,
			MaxIdleConns:   4096,

			MaxInflightBytes: 256 << 20,

			InactiveWorkers: -1,
			AdaptiveConnect: true,
			AdaptiveFactor:  4,
			AdaptiveFloor:   250 * time.Millisecond,
			BackoffMax:      10 * time.Minute,
			ParkAfter:       6,
			ParkDuration:    time.Hour,
		},
		Robots:    Robots{TTL: 24 * time.Hour, ErrorTTL: 10 * time.Minute, MaxCrawlDelay: 30 * time.Second},
		Frontier:  Frontier{Window: 250000, BatchSize: 2048, BatchDelay: 20 * time.Millisecond},
		Bucket:    Bucket{Columns: b.Columns, Rows: b.Rows, ListCap: b.ListCap, MaxQueueWait: b.MaxQueueWait},
		WARC:      WARC{Enabled: true, MaxSize: 1 << 30, Compression: WARCCompressResponses, CompressionLevel: WARCHuffmanOnly, Dedup: true},
		Storage:   Storage{MinFree: "128MiB"},
		Log:       Log{Level: "info", Format: "text"},
		DNS:       DNS{Cache: true, MinTTL: 5 * time.Second, MaxTTL: time.Hour},
		Bandwidth: Bandwidth{Policy: "maxt"},
		Cluster: Cluster{Phases: 1, PhaseDuration: 30 * time.Second, HandoffTimeout: time.Minute, JoinTimeout: 2 * time.Minute, TakeoverAfter: 2 * time.Minute, Lend: true,
			BatchDelay: 10 * time.Millisecond, FenceAfter: 5 * time.Second, ReconnectInterval: 10 * time.Second, ReconnectTimeout: 24 * time.Hour},
	}
}

// BucketConfig converts the bucket section to the bucket package's Config.
func (c Config) BucketConfig(phases int) bucket.Config {
	return bucket.Config{
		Columns:      c.Bucket.Columns,
		Rows:         c.Bucket.Rows,
		ListCap:      c.Bucket.ListCap,
		MaxQueueWait: c.Bucket.MaxQueueWait,
		Phases:       phases,
	}
}
