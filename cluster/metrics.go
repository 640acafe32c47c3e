package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/cluster/phase"
)

// Status is the cluster layer's state as the node shows it in GET
// /v1/status: the members, the outbox per peer and the phase.
type Status struct {
	Members []MemberStatus
	// Outbox is the URLs waiting per peer (member name).
	Outbox map[string]int
	Phase  PhaseStatus
}

// MemberStatus is one member of the cluster as this node sees it.
type MemberStatus struct {
	Name     string
	API      string
	Exchange string
	State    string // alive, suspect, dead, left
}

// PhaseStatus is this node's place in the phase rotation: Current is -1
// while it works on no phase (joining, leaving); NextSwap is the cluster
// time the epoch ends; Fenced says why the node starts no request for want
// of a majority of its member view (empty when it is not fenced).
type PhaseStatus struct {
	NPhase   int
	Current  int
	Epoch    int64
	NextSwap *time.Time
	Fenced   string
}

// ClusterStatus reports the members (alive ones and those seen failing or
// leaving), the outbox per peer and the phase.
func (c *Cluster) ClusterStatus(now time.Time) Status {
	st := c.sched.At(now)
	var ms []MemberStatus
	for _, m := range c.members.All() {
		ms = append(ms, MemberStatus{Name: m.Name, API: m.API, Exchange: m.Exchange, State: string(m.State)})
	}
	next := st.NextSwap
	return Status{
		Members: ms,
		Outbox:  c.outbox.Pending(),
		Phase:   PhaseStatus{NPhase: st.NPhase, Current: st.Current(), Epoch: st.Epoch, NextSwap: &next, Fenced: c.Fenced()},
	}
}

// Collectors returns the cluster series, read at scrape time.
func (c *Cluster) Collectors() []prometheus.Collector { return []prometheus.Collector{collector{c}} }

type collector struct{ c *Cluster }

func desc(name string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, MetricHelp[name], labels, nil)
}

var (
	dMembers     = desc(MetricClusterMembers)
	dPhase       = desc(MetricPhaseCurrent)
	dSwaps       = desc(MetricPhaseSwaps)
	dOffset      = desc(MetricNTPOffset)
	dRootDist    = desc(MetricNTPRootDistance)
	dSynced      = desc(MetricNTPSynced)
	dGuard       = desc(MetricPhaseGuard)
	dForwarded   = desc(MetricURLsForwarded)
	dReceived    = desc(MetricURLsReceived)
	dLentBack    = desc(MetricURLsLentBack)
	dBatches     = desc(MetricExchangeBatches)
	dOutbox      = desc(MetricOutboxURLs, "peer")
	dMovedURLs   = desc(MetricRebalanceURLsMoved)
	dMovedFPs    = desc(MetricRebalanceFPsMoved)
	dRebalancing = desc(MetricRebalanceRunning)
	dJoining     = desc(MetricJoinWaiting)
	dPauses      = desc(MetricPauses)
	dReplicas    = desc(MetricReplicasSent)
	dAway        = desc(MetricMembersAway)
	dFenced      = desc(MetricClusterFenced)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dMembers, dPhase, dSwaps, dOffset, dRootDist, dSynced, dGuard,
		dForwarded, dReceived, dLentBack, dBatches, dOutbox, dMovedURLs, dMovedFPs, dRebalancing, dJoining, dPauses, dReplicas, dAway, dFenced} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	c := k.c
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	st := c.sched.At(time.Now())
	gauge(dMembers, float64(c.alive.Load()))
	gauge(dAway, float64(c.Away()))
	gauge(dPhase, float64(st.Current()))
	counter(dSwaps, float64(c.swaps.Load()))
	counter(dPauses, float64(c.pauses.Load()))
	var cs phase.ClockState
	if c.clock != nil {
		cs = c.clock.State()
	}
	gauge(dOffset, cs.Offset.Seconds())
	gauge(dRootDist, cs.RootDistance.Seconds())
	gauge(dSynced, b2f(cs.Synced))
	gauge(dGuard, st.Guard.Seconds())
	xs := c.x.Stats()
	counter(dForwarded, float64(xs.URLsForwarded))
	counter(dReplicas, float64(xs.ReplicasSent))
	counter(dReceived, float64(xs.URLsReceived))
	counter(dLentBack, float64(xs.URLsLentBack))
	counter(dBatches, float64(xs.BatchesSent))
	pending := c.outbox.Pending()
	for _, m := range c.ring.Load().Members() {
		if _, ok := pending[m]; !ok && m != c.cfg.Name {
			pending[m] = 0
		}
	}
	for peer, n := range pending {
		gauge(dOutbox, float64(n), peer)
	}
	counter(dMovedURLs, float64(c.movedURLs.Load()))
	counter(dMovedFPs, float64(c.movedFPs.Load()))
	gauge(dRebalancing, b2f(c.rebalancing.Load()))
	gauge(dJoining, b2f(c.joining.Load()))
	gauge(dFenced, b2f(c.q.fenced.Load()))
}

// Names of the cluster series. Every node exports them: a node alone
// the values of StandaloneCollector.
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
	MetricURLsLentBack       = "phasecrawl_urls_lent_back_total"
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

// MetricHelp is the help text of each cluster series.
var MetricHelp = map[string]string{
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
	MetricURLsLentBack:       "URLs received from a member, new here, that this node lent back to it in the batch's ack, because it works on their host's phase now (cluster.lend).",
	MetricExchangeBatches:    "Batch messages sent to other members (each answered by one ack), resends included.",
	MetricOutboxURLs:         "URLs waiting in the durable outbox, by peer (member name).",
	MetricRebalanceURLsMoved: "URLs (IN_LIST or STALLED) moved to their new owner by rebalancing.",
	MetricRebalanceFPsMoved:  "Fingerprints of COMPLETED URLs moved to their new owner by rebalancing.",
	MetricRebalanceRunning:   "1 while a rebalance or a leave hand-off runs, else 0.",
	MetricJoinWaiting:        "1 while this node, having joined, waits for the members to move its records to it before fetching.",
	MetricClusterFenced:      "1 while this node is fenced: it does not see a majority of the member view it agreed on (or waits, having seen one again, for the members to agree on it) and starts no request.",
	MetricPauses:             "Times this process was found frozen (SIGSTOP, a VM pause) long enough to be declared dead by the others; each one holds the node off its phase for two epochs and until the members are settled again.",
}

// StandaloneCollector exports the cluster series of a node that runs
// alone: one member, phase 0 of 1 always active, nothing forwarded. With it
// every series exists in both modes, so one dashboard serves both.
func StandaloneCollector() prometheus.Collector { return standaloneCollector{} }

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
	{MetricURLsLentBack, prometheus.CounterValue, 0},
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
	return prometheus.NewDesc(name, MetricHelp[name], nil, nil)
}

func (standaloneCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range standaloneSeries {
		ch <- standaloneDesc(s.name)
	}
	ch <- prometheus.NewDesc(MetricOutboxURLs, MetricHelp[MetricOutboxURLs], []string{"peer"}, nil)
}

func (standaloneCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range standaloneSeries {
		ch <- prometheus.MustNewConstMetric(standaloneDesc(s.name), s.typ, s.value)
	}
}
