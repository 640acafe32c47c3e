package node

import (
	"github.com/phasecrawl/phasecrawl/bandwidth"
	"github.com/phasecrawl/phasecrawl/frontier"
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
// Remaining) from its frontier statistics (hostAmount).
func (n *Node) remainingBytes(host string) (bandwidth.Amount, bool) {
	hs, found, err := n.front.Host(host)
	if err != nil || !found {
		return bandwidth.Amount{}, false
	}
	return hostAmount(hs)
}

// hostAmount is the data the host hs has left in its round. With a
// finished round (a recurring crawl), the last round's mean page size
// times the URLs the current round has not fetched yet (its URLs less the
// current round's attempts); on a first crawl, its URLs not fetched yet
// times its mean page size so far (refined with every page). Nothing
// fetched yet: not known.
func hostAmount(hs frontier.HostStats) (bandwidth.Amount, bool) {
	if hs.LastRoundFetched > 0 {
		perPage := float64(hs.LastRoundBytes) / float64(hs.LastRoundFetched)
		left := max(hs.Admitted-hs.RoundFetched, 0)
		return bandwidth.Amount{Left: float64(left) * perPage, PerPage: perPage, Recorded: float64(hs.Bytes)}, true
	}
	if hs.Fetched == 0 {
		return bandwidth.Amount{}, false
	}
	perPage := float64(hs.Bytes) / float64(hs.Fetched)
	left := max(hs.Admitted-hs.Fetched, 0)
	return bandwidth.Amount{Left: float64(left) * perPage, PerPage: perPage, Recorded: float64(hs.Bytes)}, true
}
