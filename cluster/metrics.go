package cluster

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/node"
)

// ClusterStatus implements node.ClusterReporter: the members (alive ones
// and those seen failing or leaving), the outbox per peer and the phase.
func (c *Cluster) ClusterStatus(now time.Time) node.ClusterStatus {
	st := c.sched.At(now)
	var ms []node.MemberStatus
	for _, m := range c.members.All() {
		ms = append(ms, node.MemberStatus{Name: m.Name, API: m.API, Exchange: m.Exchange, State: string(m.State)})
	}
	next := st.NextSwap
	return node.ClusterStatus{
		Members: ms,
		Outbox:  c.outbox.Pending(),
		Phase:   node.PhaseStatus{NPhase: st.NPhase, Current: current(st), Epoch: st.Epoch, NextSwap: &next, Fenced: c.Fenced()},
	}
}

// Collectors implements node.ClusterReporter: the cluster series, read at
// scrape time.
func (c *Cluster) Collectors() []prometheus.Collector { return []prometheus.Collector{collector{c}} }

type collector struct{ c *Cluster }

func desc(name string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, node.ClusterMetricHelp[name], labels, nil)
}

var (
	dMembers     = desc(node.MetricClusterMembers)
	dPhase       = desc(node.MetricPhaseCurrent)
	dSwaps       = desc(node.MetricPhaseSwaps)
	dOffset      = desc(node.MetricNTPOffset)
	dRootDist    = desc(node.MetricNTPRootDistance)
	dSynced      = desc(node.MetricNTPSynced)
	dGuard       = desc(node.MetricPhaseGuard)
	dForwarded   = desc(node.MetricURLsForwarded)
	dReceived    = desc(node.MetricURLsReceived)
	dBatches     = desc(node.MetricExchangeBatches)
	dOutbox      = desc(node.MetricOutboxURLs, "peer")
	dMovedURLs   = desc(node.MetricRebalanceURLsMoved)
	dMovedFPs    = desc(node.MetricRebalanceFPsMoved)
	dRebalancing = desc(node.MetricRebalanceRunning)
	dJoining     = desc(node.MetricJoinWaiting)
	dPauses      = desc(node.MetricPauses)
	dReplicas    = desc(node.MetricReplicasSent)
	dAway        = desc(node.MetricMembersAway)
	dFenced      = desc(node.MetricClusterFenced)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dMembers, dPhase, dSwaps, dOffset, dRootDist, dSynced, dGuard,
		dForwarded, dReceived, dBatches, dOutbox, dMovedURLs, dMovedFPs, dRebalancing, dJoining, dPauses, dReplicas, dAway, dFenced} {
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
	gauge(dPhase, float64(current(st)))
	counter(dSwaps, float64(c.swaps.Load()))
	counter(dPauses, float64(c.pauses.Load()))
	var cs ClockState
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
