package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterReporter is implemented by a cluster layer (the io.Closer a
// ClusterHook returns) that shows its state: /v1/status includes
// ClusterStatus and /metrics the Collectors, registered on the node's
// registry. The cluster series of a node alone (the standalone values, so
// that every series exists in both modes) are registered by whoever wires
// it (launch.New).
type ClusterReporter interface {
	ClusterStatus(now time.Time) ClusterStatus
	Collectors() []prometheus.Collector
}

// ClusterStatus is the cluster part of GET /v1/status.
type ClusterStatus struct {
	Members []MemberStatus
	// Outbox is the URLs waiting per peer (member name).
	Outbox map[string]int
	Phase  PhaseStatus
}

// registerClusterMetrics registers the cluster layer's series.
func (n *Node) registerClusterMetrics() error {
	if cr, ok := n.cluster.(ClusterReporter); ok {
		for _, c := range cr.Collectors() {
			if err := n.m.Registry.Register(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// clusterStatus fills the cluster fields of st.
func (n *Node) clusterStatus(st *Status) {
	st.Members, st.Outbox = []MemberStatus{}, map[string]int{}
	cr, ok := n.cluster.(ClusterReporter)
	if !ok {
		return
	}
	cs := cr.ClusterStatus(time.Now())
	if cs.Members != nil {
		st.Members = cs.Members
	}
	if cs.Outbox != nil {
		st.Outbox = cs.Outbox
	}
	st.Phase = cs.Phase
}
