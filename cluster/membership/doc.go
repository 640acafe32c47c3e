// Package membership is the cluster's membership and quorum: the gossip
// (hashicorp/memberlist, encrypted with the cluster key) with the metadata
// each node gossips about itself (NodeMeta), the members alive, failed and
// gone (Members), the heartbeats a node hears and the majority it needs
// to crawl (Heard, SeenOf; docs/design/partitions.md), the view of the
// members away whose share waits (Away), and the addresses to join again
// after a partition (ReconnectTargets). The cluster package applies the
// membership to the ring, the phase schedule and the fence.
package membership
