package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterReporter is implemented by a cluster layer (the io.Closer a
// ClusterHook returns) that shows its state: /v1/status includes
// ClusterStatus and /metrics the Collectors, registered on the node's
// registry. A node alone reports the standalone values (see
// standaloneCollector) so that every series exists in both modes.
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
	return n.m.Registry.Register(standaloneCollector{})
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

// Names of the cluster series (all nodes export them, see ClusterReporter).
const (
	MetricClusterMembers     = "phasecrawl_cluster_members"
	MetricPhaseCurrent       = "phasecrawl_phase_current"
	MetricPhaseSwaps         = "phasecrawl_phase_swaps_total"
	MetricNTPOffset          = "phasecrawl_ntp_offset_seconds"
	MetricNTPRootDistance    = "phasecrawl_ntp_root_distance_seconds"
	MetricNTPSynced          = "phasecrawl_ntp_synced"
	MetricPhaseGuard         = "phasecrawl_phase_guard_seconds"
	MetricURLsForwarded      = "phasecrawl_urls_forwarded_total"
	MetricURLsReceived       = "phasecrawl_urls_received_total"
	MetricExchangeBatches    = "phasecrawl_exchange_batches_total"
	MetricOutboxURLs         = "phasecrawl_outbox_urls"
	MetricRebalanceURLsMoved = "phasecrawl_rebalance_urls_moved_total"
	MetricRebalanceFPsMoved  = "phasecrawl_rebalance_fingerprints_moved_total"
	MetricRebalanceRunning   = "phasecrawl_rebalance_running"
	MetricJoinWaiting        = "phasecrawl_cluster_join_waiting"
	MetricPauses             = "phasecrawl_cluster_pauses_total"
	MetricReplicasSent       = "phasecrawl_replicas_sent_total"
	MetricMembersAway        = "phasecrawl_cluster_members_away"
	MetricClusterFenced      = "phasecrawl_cluster_fenced"
)

// ClusterMetricHelp is the help text of each cluster series.
var ClusterMetricHelp = map[string]string{
	MetricClusterMembers:     "Members of the cluster this node sees alive (itself included; 1 when alone).",
	MetricPhaseCurrent:       "Host-hash phase this node works on; -1 when it works on none (joining, leaving).",
	MetricPhaseSwaps:         "Phase swaps of this node (KSpider §3.3).",
	MetricNTPOffset:          "Cluster time minus local time, from NTP (0 without NTP).",
	MetricNTPRootDistance:    "Root distance of the chosen NTP sample (0 without NTP).",
	MetricNTPSynced:          "1 when the last NTP round gave a valid sample, else 0.",
	MetricPhaseGuard:         "Guard interval before each phase swap in which no request starts.",
	MetricURLsForwarded:      "URLs sent to their owner and acknowledged by it (discovered URLs and rebalanced records; replicas not included).",
	MetricReplicasSent:       "Fingerprints of fetched pages sent to the member ranked second for their URL (the owner should this node fail) and acknowledged by it.",
	MetricMembersAway:        "Members declared dead less than cluster.takeover_after ago: the URLs of their share wait for them to come back.",
	MetricURLsReceived:       "URLs received from other members.",
	MetricExchangeBatches:    "Batch messages sent to other members (each answered by one ack), resends included.",
	MetricOutboxURLs:         "URLs waiting in the durable outbox, by peer (member name).",
	MetricRebalanceURLsMoved: "URLs (IN_LIST or STALLED) moved to their new owner by rebalancing.",
	MetricRebalanceFPsMoved:  "Fingerprints of COMPLETED URLs moved to their new owner by rebalancing.",
	MetricRebalanceRunning:   "1 while a rebalance or a leave hand-off runs, else 0.",
	MetricJoinWaiting:        "1 while this node, having joined, waits for the members to move its records to it before fetching.",
	MetricClusterFenced:      "1 while this node is fenced: it does not see a majority of the member view it agreed on (or waits, having seen one again, for the members to agree on it) and starts no request.",
	MetricPauses:             "Times this process was found frozen (SIGSTOP, a VM pause) long enough to be declared dead by the others; each one holds the node off its phase for two epochs and until the members are settled again.",
}

// standaloneCollector exports the cluster series of a node that runs alone:
// one member, phase 0 of 1 always active, nothing forwarded.
type standaloneCollector struct{}

var standaloneSeries = []struct {
	name  string
	typ   prometheus.ValueType
	value float64
}{
	{MetricClusterMembers, prometheus.GaugeValue, 1},
	{MetricPhaseCurrent, prometheus.GaugeValue, 0},
	{MetricPhaseSwaps, prometheus.CounterValue, 0},
	{MetricNTPOffset, prometheus.GaugeValue, 0},
	{MetricNTPRootDistance, prometheus.GaugeValue, 0},
	{MetricNTPSynced, prometheus.GaugeValue, 0},
	{MetricPhaseGuard, prometheus.GaugeValue, 0},
	{MetricURLsForwarded, prometheus.CounterValue, 0},
	{MetricURLsReceived, prometheus.CounterValue, 0},
	{MetricExchangeBatches, prometheus.CounterValue, 0},
	{MetricRebalanceURLsMoved, prometheus.CounterValue, 0},
	{MetricRebalanceFPsMoved, prometheus.CounterValue, 0},
	{MetricRebalanceRunning, prometheus.GaugeValue, 0},
	{MetricJoinWaiting, prometheus.GaugeValue, 0},
	{MetricPauses, prometheus.CounterValue, 0},
	{MetricReplicasSent, prometheus.CounterValue, 0},
	{MetricMembersAway, prometheus.GaugeValue, 0},
	{MetricClusterFenced, prometheus.GaugeValue, 0},
}

func standaloneDesc(name string) *prometheus.Desc {
	return prometheus.NewDesc(name, ClusterMetricHelp[name], nil, nil)
}

func (standaloneCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range standaloneSeries {
		ch <- standaloneDesc(s.name)
	}
	ch <- prometheus.NewDesc(MetricOutboxURLs, ClusterMetricHelp[MetricOutboxURLs], []string{"peer"}, nil)
}

func (standaloneCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range standaloneSeries {
		ch <- prometheus.MustNewConstMetric(standaloneDesc(s.name), s.typ, s.value)
	}
}
