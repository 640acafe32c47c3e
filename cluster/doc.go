// Package cluster turns phasecrawl nodes into a KSpider-style cluster with no
// central node (KSpider §3.1–3.3). It applies the membership
// (cluster/membership: gossip, heartbeats, members away) to the ownership
// ring (cluster/ring), the phase schedule and the fence; it routes each URL
// to its owner through the durable exchange between members
// (cluster/exchange), rebalances when the members change, runs the lend
// rounds and settles their outcomes (the ledger and the wire formats are
// cluster/lend's), and shares the robots.txt, scope and facet sets among
// the members. The phase rotation runs on a shared NTP-corrected clock.
package cluster
