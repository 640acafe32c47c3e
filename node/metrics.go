package node

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the node's Prometheus series. Every name starts with
// phasecrawl_; no series carries a URL or host label (that would be an
// unbounded number of series). Each node has its own registry, so several
// nodes can live in one process (tests, demo).
type Metrics struct {
	Registry *prometheus.Registry

	PagesFetched   *prometheus.CounterVec // {code}: HTTP status class or exact code
	FetchErrors    *prometheus.CounterVec // {kind}: timeout, dns, conn_refused, ...
	BytesFetched   prometheus.Counter
	FetchDuration  prometheus.Histogram
	RobotsDenied   prometheus.Counter
	Sitemaps       prometheus.Counter
	CanonicalPages prometheus.Counter
	URLsDiscovered prometheus.Counter
	URLsNew        prometheus.Counter
	URLsTaken      prometheus.Counter
	URLsRefilled   prometheus.Counter
	GuestsReceived prometheus.Counter
	GuestsFetched  prometheus.Counter
	StalledRetries prometheus.Counter
	Truncated      prometheus.Counter
	OutOfScope     *prometheus.CounterVec // {reason}
	HostBackoffs   *prometheus.CounterVec // {reason}: rate_limited, unavailable, server_errors
	DeadLane       *prometheus.CounterVec // {lane}: host trips served, by lane (live, inactive)
	AdaptiveCuts   prometheus.Counter
	StorageErrors  *prometheus.CounterVec // {what}: warc, crawl_log, frontier, outbox, cdxj

	// Recurring crawls.
	PagesUnchanged prometheus.Counter
	PagesDuplicate prometheus.Counter
	PagesChanged   prometheus.Counter
	RecrawlLag     prometheus.Histogram
}

// NewMetrics registers the node's series. frontierStates and bucketStates are
// read at scrape time.
func NewMetrics(frontierStates func() map[string]float64, bucketStates func() map[string]float64) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		PagesFetched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "phasecrawl_pages_fetched_total", Help: "Pages fetched, by HTTP status code.",
		}, []string{"code"}),
		FetchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "phasecrawl_fetch_errors_total", Help: "Fetches that got no HTTP response, by kind.",
		}, []string{"kind"}),
		BytesFetched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_bytes_fetched_total", Help: "Body bytes received, as transferred.",
		}),
		FetchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "phasecrawl_fetch_duration_seconds", Help: "Time from request to the end of the body.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 45},
		}),
		RobotsDenied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_robots_denied_total", Help: "URLs not fetched because robots.txt disallows them.",
		}),
		Sitemaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_sitemaps_total", Help: "Sitemaps and sitemap indexes read.",
		}),
		CanonicalPages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_canonical_pages_total", Help: "Pages whose rel=canonical named another in-scope URL: that URL was followed instead of their links.",
		}),
		URLsDiscovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_urls_discovered_total", Help: "In-scope links and redirect targets found.",
		}),
		URLsNew: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_urls_new_total", Help: "Discovered URLs the frontier had not seen before.",
		}),
		URLsTaken: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_urls_taken_total", Help: "URLs a host trip took for itself from its own pages' links (new ones, up to bucket.list_cap in its list).",
		}),
		URLsRefilled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_urls_refilled_total", Help: "URLs a running host trip got from the scheduler (its host's queued URLs, while no other host waited for a worker).",
		}),
		GuestsReceived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_guests_received_total", Help: "URLs other members lent this node for the host phase it works on (cluster.lend), dropped duplicates not counted.",
		}),
		GuestsFetched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_guests_fetched_total", Help: "Lent URLs this node fetched and reported to their owners (cluster.lend).",
		}),
		StalledRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_stalled_retries_total", Help: "STALLED URLs released by the retry lane for another try.",
		}),
		Truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_bodies_truncated_total", Help: "Bodies cut at fetch.max_body_size.",
		}),
		OutOfScope: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "phasecrawl_urls_out_of_scope_total", Help: "Discovered URLs dropped by the scope rules, by reason.",
		}, []string{"reason"}),
		PagesUnchanged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_pages_unchanged_total", Help: "Revisited pages found unchanged (a 304 Not Modified, or the payload digest of the last capture): archived as WARC revisit records, their links not extracted again.",
		}),
		PagesDuplicate: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_pages_duplicate_total", Help: "Pages whose payload has the digest of another capture archived before (another URL, or this one before it changed; warc.dedup): archived as WARC revisit records, their links not extracted again.",
		}),
		PagesChanged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_pages_changed_total", Help: "Revisited pages whose payload changed since the last capture: archived again in full.",
		}),
		RecrawlLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "phasecrawl_recrawl_lag_seconds", Help: "How late a revisit was fetched: the request's start minus the time the URL was due again.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600},
		}),
		HostBackoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "phasecrawl_host_backoffs_total", Help: "Times a host asked to be called back later (429, 503 with Retry-After, 5xx twice in a row), by reason.",
		}, []string{"reason"}),
		DeadLane: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "phasecrawl_host_trips_total", Help: "Host trips served, by lane: live, or inactive (hosts whose last attempt timed out, was refused or failed DNS).",
		}, []string{"lane"}),
	}
	r.MustRegister(m.PagesUnchanged, m.PagesDuplicate, m.PagesChanged, m.RecrawlLag)
	m.AdaptiveCuts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "phasecrawl_adaptive_timeouts_total", Help: "Requests cut by a derived timeout: a host's adaptive timeout (fetch.adaptive_timeouts) or a first contact's connect timeout (fetch.adaptive_connect); each URL goes back to the queue untried.",
	})
	m.StorageErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "phasecrawl_storage_errors_total", Help: "Writes to the data directory that failed (a full disk...), by what was written: warc, crawl_log, frontier, outbox, cdxj. A fetched page whose records were not written is fetched again.",
	}, []string{"what"})
	for _, what := range []string{storeWARC, storeCrawlLog, storeFrontier, storeOutbox, storeCDXJ} {
		m.StorageErrors.WithLabelValues(what)
	}
	r.MustRegister(m.HostBackoffs, m.DeadLane, m.AdaptiveCuts, m.StorageErrors)
	r.MustRegister(m.PagesFetched, m.FetchErrors, m.BytesFetched, m.FetchDuration, m.RobotsDenied, m.Sitemaps, m.CanonicalPages,
		m.URLsDiscovered, m.URLsNew, m.URLsTaken, m.URLsRefilled, m.GuestsReceived, m.GuestsFetched, m.StalledRetries, m.Truncated, m.OutOfScope,
		newStateCollector("phasecrawl_frontier_urls", "URLs in the frontier, by state.", frontierStates),
		newStateCollector("phasecrawl_bucket_elements", "Bucket elements, by state.", bucketStates),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// stateCollector reports a gauge per state, read when Prometheus scrapes.
type stateCollector struct {
	desc *prometheus.Desc
	read func() map[string]float64
}

func newStateCollector(name, help string, read func() map[string]float64) *stateCollector {
	return &stateCollector{desc: prometheus.NewDesc(name, help, []string{"state"}, nil), read: read}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for state, v := range c.read() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, state)
	}
}

// CountsByLabel reads a counter vector by one of its labels: each value of
// the label and its count (summed over the other labels), zeros included.
func CountsByLabel(c *prometheus.CounterVec, label string) map[string]int64 {
	out := map[string]int64{}
	ch := make(chan prometheus.Metric, 16)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil || d.Counter == nil {
			continue
		}
		for _, l := range d.Label {
			if l.GetName() == label {
				out[l.GetValue()] += int64(d.Counter.GetValue())
			}
		}
	}
	return out
}
