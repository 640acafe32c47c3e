package node

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
	URLsDiscovered prometheus.Counter
	URLsNew        prometheus.Counter
	URLsTaken      prometheus.Counter
	GuestsReceived prometheus.Counter
	GuestsFetched  prometheus.Counter
	StalledRetries prometheus.Counter
	Truncated      prometheus.Counter
	OutOfScope     *prometheus.CounterVec // {reason}
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
		URLsDiscovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_urls_discovered_total", Help: "In-scope links and redirect targets found.",
		}),
		URLsNew: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_urls_new_total", Help: "Discovered URLs the frontier had not seen before.",
		}),
		URLsTaken: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "phasecrawl_urls_taken_total", Help: "URLs a host trip took for itself (up to bucket.list_cap): new ones from its own pages' links, and, for the last page of its list, ones its host had queued.",
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
	}
	r.MustRegister(m.PagesFetched, m.FetchErrors, m.BytesFetched, m.FetchDuration, m.RobotsDenied,
		m.URLsDiscovered, m.URLsNew, m.URLsTaken, m.GuestsReceived, m.GuestsFetched, m.StalledRetries, m.Truncated, m.OutOfScope,
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
