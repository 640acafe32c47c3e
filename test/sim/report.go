package sim

import (
	"fmt"
	"io"
	"time"
)

// SizeReport is the figures for one cluster size.
type SizeReport struct {
	Nodes       int
	Base        *Result
	Solo        float64 // one node alone, pages/s
	Own         Ownership
	Loss        *Result
	Partition   *Result
	PartitionOf int
}

// Efficiency is the cluster's pages/s per node over one node's alone.
func (r SizeReport) Efficiency() float64 { return r.Base.PerNodeRate() / r.Solo }

// RecoverAfter is how long after the event the cluster's pages/s over a
// phase (30s window, sliding by 1s) first reaches frac of the baseline's
// over the same window; -1 when never within the run.
func RecoverAfter(base, ev *Result, at time.Duration, frac float64) time.Duration {
	const win = 30 * time.Second
	for t := at; t+win <= base.Duration; t += time.Second {
		if b := base.Rate(t, t+win); b > 0 && ev.Rate(t, t+win) >= frac*b {
			return t - at
		}
	}
	return -1
}

// Write prints the tables of reports as Markdown.
func Write(w io.Writer, reps []SizeReport) {
	fmt.Fprintf(w, "| nodes | frontier per node and phase at the start | pages/s per node | first / last phase | one node alone | efficiency | fetched (known, not fetched at the end; of which lent) | biggest hosts' politeness (mean / min) | requests cut at the deadline | short handover gaps |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reps {
		b := r.Base
		first, last := b.PhaseRates()
		fmt.Fprintf(w, "| %d | %.0f | %.1f | %.1f / %.1f | %.1f | %.2f | %d (%d; %d) | %.2f / %.2f | %d | %d |\n", r.Nodes, float64(b.StartKnown)/float64(r.Nodes*b.NPhase), b.PerNodeRate(), first, last, r.Solo, r.Efficiency(),
			b.Fetched, b.EndPending, b.EndLent, b.BigPoliteness, b.BigMin, b.Cut, b.HandoverShortGaps)
	}
	fmt.Fprintf(w, "\n| nodes | fetched per node min / max / std (÷ mean) | URL share min / max / std (÷ mean) | messages per forwarded URL | forwarded URLs per fetched page | lent URLs per fetched page | lent pages fetched by their holder (÷ fetched) | messages per entry (links, lends, outcomes, give-backs) | moved per join (÷ 1/(N+1)) | moved per leave (÷ 1/N) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reps {
		f := spread(r.Base.PerNode)
		b := r.Base
		fmt.Fprintf(w, "| %d | %.2f / %.2f / %.3f | %.3f / %.3f / %.4f | %.4f | %.2f | %.2f | %.2f | %.4f | %.5f (%.3f) | %.5f (%.3f) |\n", r.Nodes, f.Min, f.Max, f.Std,
			r.Own.Share.Min, r.Own.Share.Max, r.Own.Share.Std, float64(b.Messages)/float64(max(b.Forwarded, 1)),
			float64(b.Forwarded)/float64(max(b.Fetched, 1)), b.LentPerFetched(), float64(b.LentFetched)/float64(max(b.Fetched, 1)), b.MessagesPerEntry(),
			r.Own.Join, r.Own.Join*float64(r.Nodes+1), r.Own.Leave, r.Own.Leave*float64(r.Nodes))
	}
	fmt.Fprintf(w, "\n| nodes | loss: share to re-own (URLs, ÷ known) | pending lost with it | pages lost vs. baseline | recovered to 95%% of (N−1)/N after | partition: minority | pages/s lost while cut | pages lost vs. baseline (whole run) | takeover at | recovered to 95%% after heal |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reps {
		l, p := r.Loss, r.Partition
		rec := func(d time.Duration) string {
			if d < 0 {
				return "not within run"
			}
			return d.String()
		}
		lossCell := "– | – | – | –"
		if l != nil {
			frac := float64(r.Nodes-1) / float64(r.Nodes) * 0.95
			lossCell = fmt.Sprintf("%d (%.4f) | %d | %d | %s", l.LossShare, float64(l.LossShare)/float64(max(l.LossKnown, 1)), l.LossPending,
				r.Base.Fetched-l.Fetched, rec(RecoverAfter(r.Base, l, l.LossAt, frac)))
		}
		partCell := "– | – | – | – | –"
		if p != nil {
			lostRate := r.Base.Rate(p.PartitionAt, p.HealAt) - p.Rate(p.PartitionAt, p.HealAt)
			take := "none (healed first)"
			if p.TakeoverAt > 0 {
				take = (p.TakeoverAt - p.PartitionAt).String() + " after the cut"
			}
			partCell = fmt.Sprintf("%d of %d | %.1f (%.0f%%) | %d | %s | %s", r.PartitionOf, r.Nodes, lostRate, 100*lostRate/max(r.Base.Rate(p.PartitionAt, p.HealAt), 1),
				r.Base.Fetched-p.Fetched, take, rec(RecoverAfter(r.Base, p, p.HealAt, 0.95)))
		}
		fmt.Fprintf(w, "| %d | %s | %s |\n", r.Nodes, lossCell, partCell)
	}
	fmt.Fprintf(w, "\n| nodes | loss: lent URLs back at expiry | of which fetched, outcome lost | fetched again (outcome lost) | partition: lent URLs back at expiry | of which fetched, outcome lost | fetched again (outcome lost) |\n|---|---|---|---|---|---|---|\n")
	for _, r := range reps {
		cell := func(x *Result) string {
			if x == nil {
				return "– | – | –"
			}
			return fmt.Sprintf("%d | %d | %d", x.LendExpired, x.LostOutcomes, x.RefetchedLostOutcome)
		}
		fmt.Fprintf(w, "| %d | %s | %s |\n", r.Nodes, cell(r.Loss), cell(r.Partition))
	}
}

// WriteBigHost prints, for a web with a big host (WebConfig.BigHost),
// when one node alone and each cluster size fetched the big host's last
// page and the web's, as Markdown.
func WriteBigHost(w io.Writer, web *Web, solo *Result, reps []SizeReport) {
	fmt.Fprintf(w, "| nodes | big host: pages fetched (of %d) | its last page at | its pages/s | ÷ one node's | last page of the web at | requests cut at the deadline | phase swaps |\n|---|---|---|---|---|---|---|---|\n", web.PagesOf(0))
	row := func(name string, r *Result) {
		rate := float64(r.Host0Fetched) / max(r.Host0Last.Seconds(), 1e-9)
		soloRate := float64(solo.Host0Fetched) / max(solo.Host0Last.Seconds(), 1e-9)
		fmt.Fprintf(w, "| %s | %d | %.1fs | %.0f | %.2f | %.1fs | %d | %d |\n", name, r.Host0Fetched, r.Host0Last.Seconds(), rate, rate/soloRate,
			r.LastFetch.Seconds(), r.Cut, r.Swaps)
	}
	row("1 (alone)", solo)
	for _, r := range reps {
		row(fmt.Sprint(r.Nodes), r.Base)
	}
}
