package node

import (
	"github.com/phasecrawl/phasecrawl/bandwidth"
)

// newBudget builds the node's bandwidth budget (package bandwidth) and
// registers its metrics. It is in use (n.bwOn) when bandwidth.limit is set
// or a sites: entry has a deadline or a bandwidth; otherwise its series
// stay at zero and workers do not touch it.
func (n *Node) newBudget() error {
	cfg := n.cfg
	on := cfg.Bandwidth.Limit > 0
	for _, s := range cfg.Sites {
		on = on || s.Deadline > 0 || s.Bandwidth > 0
	}
	policy := bandwidth.Policy(cfg.Bandwidth.Policy)
	if policy == "" {
		policy = bandwidth.MaxT
	}
	// A site is active from its trip's start until it has had no trip for
	// longer than a trip's gap can be: its delay and a queue wait, twice.
	idle := max(2*(cfg.Delay+cfg.Robots.MaxCrawlDelay/4+cfg.Bucket.MaxQueueWait), 2e9)
	b, err := bandwidth.New(bandwidth.Config{
		Limit:  float64(cfg.Bandwidth.Limit),
		Policy: policy,
		Site: func(host string) bandwidth.SiteInfo {
			s, ok := cfg.SiteFor(host)
			if !ok {
				return bandwidth.SiteInfo{}
			}
			return bandwidth.SiteInfo{Deadline: s.Deadline, Fixed: float64(s.Bandwidth)}
		},
		Remaining: n.remainingBytes,
		Idle:      idle,
		Floor:     float64(max(4<<10, 2*cfg.Fetch.MinRate)),
	}, n.m.Registry)
	if err != nil {
		return err
	}
	n.bw, n.bwOn = b, on
	return nil
}

// remainingBytes estimates the data a host has left (bandwidth.Config's
// Remaining) from its frontier statistics: its URLs not fetched yet times
// its mean page size so far (refined with every page; on a recrawl the
// earlier rounds' pages count too). Nothing fetched yet: not known.
func (n *Node) remainingBytes(host string) (bandwidth.Amount, bool) {
	hs, found, err := n.front.Host(host)
	if err != nil || !found || hs.Fetched == 0 {
		return bandwidth.Amount{}, false
	}
	perPage := float64(hs.Bytes) / float64(hs.Fetched)
	left := max(hs.Admitted-hs.Fetched, 0)
	return bandwidth.Amount{Left: float64(left) * perPage, PerPage: perPage, Recorded: float64(hs.Bytes)}, true
}
