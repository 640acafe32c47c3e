package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
)

// spoolDirName is the data directory's folder of bodies spooled past
// fetch.max_inflight_bytes (removed once read back).
const spoolDirName = "spool"

// openSpoolDir makes the spool directory in data and removes the bodies an
// earlier process left in it (a kill between spooling and reading back).
func openSpoolDir(data string) (string, error) {
	dir := filepath.Join(data, spoolDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("spool directory: %w", err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "body-*.spool"))
	if err != nil {
		return "", fmt.Errorf("spool directory: %w", err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return "", fmt.Errorf("spool directory: %w", err)
		}
	}
	return dir, nil
}

// registerBudgetMetrics registers the gauges and counters of the body
// memory budget (fetch.max_inflight_bytes); nothing when it is off.
func (n *Node) registerBudgetMetrics() error {
	b := n.client.Budget()
	if b == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "phasecrawl_inflight_body_bytes", Help: "Body bytes (as transferred and decoded) held in memory by the workers now, bounded by fetch.max_inflight_bytes.",
		}, func() float64 { return float64(b.InFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "phasecrawl_inflight_body_bytes_limit", Help: "fetch.max_inflight_bytes: the bound of phasecrawl_inflight_body_bytes.",
		}, func() float64 { return float64(b.Max()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "phasecrawl_body_budget_waits_total", Help: "Bodies that waited for room under fetch.max_inflight_bytes before being read.",
		}, func() float64 { return float64(b.Waits()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "phasecrawl_body_budget_spools_total", Help: "Bodies that went on into a temp file in the data directory because fetch.max_inflight_bytes refused them more room.",
		}, func() float64 { return float64(b.Spools()) }),
	} {
		if err := n.m.Registry.Register(c); err != nil {
			return fmt.Errorf("body budget metrics: %w", err)
		}
	}
	return nil
}
