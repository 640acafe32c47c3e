package node

import (
	"context"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/plan"
)

// The revisit plan (Martinsson): every host with a revisit interval is a
// site whose round must fit in its interval. A node's workers are its
// lanes (each works on one host at a time); a host's round is its latest
// measured round (frontier.HostStats.LatestRound: the time its trips held
// a worker), or, before one was measured, the estimate of its pages times
// its politeness delay (the delay, or its Crawl-delay, bounds a polite
// round); either times the number of phases (a node works on a host only
// in the host's phase). The plan's spare time
// is min over lanes of (shortest interval − Σ rounds), exported as
// phasecrawl_plan_spare_seconds; negative means some site cannot be
// revisited in time.

// planRefresh is how often the spare time is computed again.
const planRefresh = 30 * time.Second

// roundEstimate is the round time of the host hs: its latest measured
// round (measured true), else pages × max(delay, Crawl-delay); times the
// phase count.
func (n *Node) roundEstimate(hs frontier.HostStats) (d time.Duration, measured bool) {
	_, nphase, _ := n.phases.Active(time.Now())
	if _, _, took, ok := hs.LatestRound(); ok {
		return took * time.Duration(max(nphase, 1)), true
	}
	per := max(n.cfg.Delay, hs.Delay)
	return time.Duration(hs.Admitted) * per * time.Duration(max(nphase, 1)), false
}

func (n *Node) planSite(hs frontier.HostStats) PlanSite {
	round, measured := n.roundEstimate(hs)
	s := PlanSite{Host: hs.Host, RevisitS: n.cfg.RevisitFor(hs.Host).Seconds(), LastRoundS: round.Seconds(), LastRoundMeasured: measured,
		Pages: hs.Admitted, Bytes: hs.Bytes}
	if site, ok := n.cfg.SiteFor(hostName(hs.Host)); ok {
		s.Priority, s.DeadlineS = site.Priority, site.Deadline.Seconds()
	}
	return s
}

// sitePriorities reports whether any sites: entry sets a priority.
func (n *Node) sitePriorities() bool {
	for _, s := range n.cfg.Sites {
		if s.Priority != 0 {
			return true
		}
	}
	return false
}

// sitePriority is the priority of host's sites: entry (0 without one).
func (n *Node) sitePriority(host string) int {
	s, _ := n.cfg.SiteFor(hostName(host))
	return s.Priority
}

// hostName drops the port of host[:port].
func hostName(host string) string {
	for i := len(host) - 1; i >= 0; i-- {
		switch host[i] {
		case ':':
			return host[:i]
		case ']':
			return host
		}
	}
	return host
}

// computeSpare builds the plan of every host with a revisit interval and
// returns its spare time in seconds (ok false: no such host).
func (n *Node) computeSpare() (spare float64, ok bool, err error) {
	var sites []plan.Site
	for after := ""; ; {
		hs, next, err := n.front.Hosts(after, 1000)
		if err != nil {
			return 0, false, err
		}
		for _, h := range hs {
			iv := n.cfg.RevisitFor(h.Host)
			if iv <= 0 || h.Admitted == 0 {
				continue
			}
			round, _ := n.roundEstimate(h)
			sites = append(sites, plan.Site{Name: h.Host, Exec: round.Seconds(), Deadline: iv.Seconds()})
		}
		if next == "" {
			break
		}
		after = next
	}
	if len(sites) == 0 {
		return 0, false, nil
	}
	_, tl := plan.Optimize(sites, n.cfg.Workers)
	return tl, true, nil
}

// revisits reports whether any host may have a revisit interval.
func (n *Node) revisits() bool {
	if n.cfg.Recrawl.Interval > 0 {
		return true
	}
	for _, s := range n.cfg.Sites {
		if s.Revisit > 0 {
			return true
		}
	}
	return false
}

// planLoop computes the spare time every planRefresh while the node runs
// (a recurring crawl only), and warns when it turns negative.
func (n *Node) planLoop(ctx context.Context) {
	if !n.revisits() {
		return
	}
	t := time.NewTicker(planRefresh)
	defer t.Stop()
	warned := false
	for {
		spare, ok, err := n.computeSpare()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				n.log.Error("revisit plan", "error", err)
			}
		case !ok:
			n.spare.Store(nil)
		default:
			n.spare.Store(&spare)
			if spare < 0 && !warned {
				n.log.Warn("revisit plan: negative spare time, some sites cannot be revisited within their interval (longer revisit, more workers or members)",
					"spare_s", spare, "workers", n.cfg.Workers)
			}
			warned = spare < 0
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// spareGauge exports the last computed spare time (NaN before, or without
// sites to revisit).
func (n *Node) spareGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "phasecrawl_plan_spare_seconds",
		Help: "Spare time of the revisit plan (Martinsson's T_L): over the node's workers, the least of (shortest revisit interval − sum of the rounds of the hosts given to it, measured or estimated). Negative: some host cannot be revisited in time. NaN without hosts to revisit.",
	}, func() float64 {
		if p := n.spare.Load(); p != nil {
			return *p
		}
		return math.NaN()
	})
}

// planPage is a page of the revisit plan (GET /v1/plan): at most limit
// hosts whose name sorts after after, in name order.
func (n *Node) planPage(after string, limit int) (PlanPage, error) {
	hs, next, err := n.front.Hosts(after, limit)
	if err != nil {
		return PlanPage{}, err
	}
	page := PlanPage{Sites: make([]PlanSite, 0, len(hs)), Next: next, SpareS: n.spare.Load(), FirstRoundEnd: n.firstRoundEnd(time.Now())}
	for _, h := range hs {
		s := n.planSite(h)
		if due, ok, err := n.front.HostNextDue(h.Host); err == nil && ok {
			s.NextDue = &due
		}
		page.Sites = append(page.Sites, s)
	}
	return page, nil
}
