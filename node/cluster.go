package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/cluster"
)

// ClusterReporter is implemented by a cluster layer (the io.Closer a
// ClusterHook returns) that shows its state: /v1/status includes
// ClusterStatus and /metrics the Collectors, registered on the node's
// registry. A node alone reports the standalone values
// (cluster.StandaloneCollector) so that every series exists in both modes.
type ClusterReporter interface {
	ClusterStatus(now time.Time) cluster.Status
	Collectors() []prometheus.Collector
}

// MemberStatus is one member of the cluster as this node sees it.
type MemberStatus struct {
	Name     string `json:"name"`
	API      string `json:"api"`
	Exchange string `json:"exchange"`
	State    string `json:"state"` // alive, suspect, dead, left
}

// registerClusterMetrics registers the cluster layer's series, or the
// standalone ones when the node runs alone.
func (n *Node) registerClusterMetrics() error {
	if cr, ok := n.cluster.(ClusterReporter); ok {
		for _, c := range cr.Collectors() {
			if err := n.m.Registry.Register(c); err != nil {
				return err
			}
		}
		return nil
	}
	return n.m.Registry.Register(cluster.StandaloneCollector())
}

// clusterStatus fills the cluster fields of st.
func (n *Node) clusterStatus(st *Status) {
	st.Members, st.Outbox = []MemberStatus{}, map[string]int{}
	cr, ok := n.cluster.(ClusterReporter)
	if !ok {
		return
	}
	cs := cr.ClusterStatus(time.Now())
	for _, m := range cs.Members {
		st.Members = append(st.Members, MemberStatus(m))
	}
	if cs.Outbox != nil {
		st.Outbox = cs.Outbox
	}
	st.Phase = PhaseStatus(cs.Phase)
}
