package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestDemoCluster runs `phasecrawl demo --nodes 2` on a small synthetic web:
// the summary has each node's pages, they add up to the expected pages, and
// the web saw at most one request at a time per host across the cluster.
func TestDemoCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster demo in -short mode")
	}
	var out, errOut bytes.Buffer
	code := Run([]string{"demo", "--nodes", "2", "--hosts", "40", "--pages", "800", "--delay", "5ms",
		"--phase-duration", "2s", "--data", t.TempDir(), "--json"}, nil, &out, &errOut)
	var sum demoSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("exit %d, summary %q: %v\n%s", code, out.String(), err, errOut.String())
	}
	if len(sum.Nodes) != 2 || sum.Nodes[0].Name != "node0" || sum.Nodes[1].Addr != "127.0.0.2" {
		t.Fatalf("nodes: %+v", sum.Nodes)
	}
	if sum.Nodes[0].Pages+sum.Nodes[1].Pages != sum.Pages || sum.Pages < int64(sum.Expected) || sum.Nodes[0].Pages == 0 || sum.Nodes[1].Pages == 0 {
		t.Errorf("pages %d (%+v), expected %d", sum.Pages, sum.Nodes, sum.Expected)
	}
	if sum.MaxConcurrency != 1 || sum.MinGapMS < 4 {
		t.Errorf("per-host concurrency %d, min gap %.1fms", sum.MaxConcurrency, sum.MinGapMS)
	}
	// The hosts that ended the crawl: latest first, each request counted,
	// its idle time between requests at least the delay (5 ms) each.
	if len(sum.LastHosts) != demoLastHosts {
		t.Fatalf("last hosts: %+v, want %d", sum.LastHosts, demoLastHosts)
	}
	for i, h := range sum.LastHosts {
		if h.Requests < 1 || h.FirstS > h.LastS || h.LastS > sum.Seconds || h.LongIdleS > h.IdleS ||
			h.IdleS < 0.004*float64(h.Requests-1) || (i > 0 && h.LastS > sum.LastHosts[i-1].LastS) {
			t.Errorf("last host %d: %+v (crawl %.2fs)", i, h, sum.Seconds)
		}
	}
	for _, v := range sum.Violations {
		if !strings.HasPrefix(v, "duplicate") && !strings.Contains(v, "duplicate fetches") {
			t.Errorf("violation: %s", v) // a duplicate may happen when a request outlives a phase under -race
		}
	}
	if (code == 0) != (len(sum.Violations) == 0) {
		t.Errorf("exit code %d with %d violations", code, len(sum.Violations))
	}
}
