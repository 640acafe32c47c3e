package sim

import (
	"math"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/ring"
)

// Result holds one run's figures.
type Result struct {
	Nodes    int
	Hosts    int
	Pages    int64
	Duration time.Duration
	Events   int64

	StartKnown int64         // pages in the frontier at the start
	NPhase     int           // phases at the start
	Phase      time.Duration // cluster.phase_duration

	Fetched   int64         // pages fetched
	Bins      []int64       // pages fetched in each virtual second
	LastFetch time.Duration // virtual time of the last page fetched
	// Host0Fetched and Host0Last are the pages of host 0 fetched and the
	// virtual time of its last (WebConfig.BigHost: the big host).
	Host0Fetched int64
	Host0Last    time.Duration
	PerNode      []int64 // pages fetched by each node
	Discovered   int64   // pages known (in the frontier at the start, or found)
	EndPending   int64   // known pages not fetched at the end of the run (Unfetched)
	EndLent      int64   // of those, lent at the end (LentNow)
	Refound      int64   // links to pages known but out of reach (a dead or cut-off member's) stored anew
	Cut          int64   // requests cut by the phase deadline (the page is requeued)
	Swaps        int64   // phase swaps, all nodes

	ExchangeCounts
	LendCounts
	PoliteCounts
	LossCounts
	PartitionCounts
}

// ExchangeCounts is what the members sent each other.
type ExchangeCounts struct {
	Links      int64 // links followed
	Duplicates int64 // links to known pages (deduplicated by the owner)
	Forwarded  int64 // URLs sent to another member (link entries)
	Messages   int64 // exchange batches sent
	Entries    int64 // exchange entries sent: links, lends, outcomes, give-backs
}

// LendCounts is lending's share of a run (Config.NoLend false).
type LendCounts struct {
	Lent        int64 // URLs lent (lend entries)
	Guests      int64 // lends a holder kept as guests (the others it gave back at once)
	LentFetched int64 // lent pages fetched by their holder (each sends an outcome entry)
	Outcomes    int64 // outcome entries filed
	Returned    int64 // lent URLs given back unfetched (IN_LIST outcome entries)
	LendExpired int64 // lent URLs back to their owner when the lend expired (holder dead or cut off)
	LendDropped int64 // lends queued by an owner that died (lost with its records)
	// LostOutcomes counts the pages of LendExpired that the holder had
	// fetched: their outcome was lost with it, so their owner may fetch
	// them again.
	LostOutcomes int64
	// RefetchedLostOutcome counts the second fetches of such pages. They
	// are not in Fetched (a page is counted once) and do not break the
	// no-page-twice invariant; every other second fetch does.
	RefetchedLostOutcome int64
}

// PoliteCounts is the politeness of the biggest hosts and the invariant's violations.
type PoliteCounts struct {
	// Politeness of the biggest hosts: requests × delay ÷ simulated time.
	BigHosts      int
	BigPoliteness float64 // mean over the BigHosts biggest hosts
	BigMin        float64
	// HandoverShortGaps counts requests that started less than the delay
	// after another member's request to the same host ended (allowed by
	// the handover rule: it paces from the previous owner's latest start).
	HandoverShortGaps int64

	Violations     int64
	FirstViolation string
}

// LossCounts is what a member lost at its loss (Config.Loss).
type LossCounts struct {
	LossAt      time.Duration
	LossShare   int64 // known URLs the lost node owned: to be re-owned
	LossKnown   int64 // known URLs at the loss
	LossPending int64 // of those, pending ones lost with its disk
	TakeoverAt  time.Duration
}

// PartitionCounts is the cut and the heal (Config.Partition).
type PartitionCounts struct {
	PartitionAt, PartitionFor, HealAt time.Duration
	PartitionStashed                  int64 // pending URLs held by the cut-off minority
}

// Rate is pages per second over [from, to).
func (r *Result) Rate(from, to time.Duration) float64 {
	a, b := int(from/time.Second), min(int(to/time.Second), len(r.Bins))
	if b <= a {
		return 0
	}
	var n int64
	for _, x := range r.Bins[a:b] {
		n += x
	}
	return float64(n) / float64(b-a)
}

// LentPerFetched is the URLs lent per page fetched.
func (r *Result) LentPerFetched() float64 { return float64(r.Lent) / float64(max(r.Fetched, 1)) }

// MessagesPerEntry is the exchange batches per entry sent (links, lends,
// outcomes, give-backs).
func (r *Result) MessagesPerEntry() float64 {
	return float64(r.Messages) / float64(max(r.Entries, 1))
}

// PhaseRates is pages per second per node over the first and the last
// phase of the run.
func (r *Result) PhaseRates() (first, last float64) {
	n := float64(r.Nodes)
	return r.Rate(0, r.Phase) / n, r.Rate(r.Duration-r.Phase, r.Duration) / n
}

// PerNodeRate is pages per second per node over the whole run.
func (r *Result) PerNodeRate() float64 {
	return float64(r.Fetched) / r.Duration.Seconds() / float64(r.Nodes)
}

// Spread is min, max and stddev over the mean of xs.
type Spread struct{ Min, Max, Std float64 }

func spread(xs []int64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	var sum float64
	mn, mx := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		f := float64(x)
		sum += f
		mn, mx = min(mn, f), max(mx, f)
	}
	mean := sum / float64(len(xs))
	var v float64
	for _, x := range xs {
		d := float64(x) - mean
		v += d * d
	}
	if mean == 0 {
		return Spread{}
	}
	return Spread{Min: mn / mean, Max: mx / mean, Std: math.Sqrt(v/float64(len(xs))) / mean}
}

func (s *Sim) finish() {
	for _, n := range s.nodes {
		s.res.PerNode = append(s.res.PerNode, n.fetched)
	}
	s.res.EndPending, s.res.EndLent = s.Unfetched(), s.LentNow()
	big := s.web.Biggest(10)
	s.res.BigHosts = len(big)
	s.res.BigMin = math.Inf(1)
	for _, h := range big {
		p := float64(s.requests[h]) * s.cfg.Delay.Seconds() / s.cfg.Duration.Seconds()
		s.res.BigPoliteness += p / float64(len(big))
		s.res.BigMin = min(s.res.BigMin, p)
	}
}

// Unfetched counts the known pages not fetched yet. With Fetched and
// Gone it accounts for every page ever known (Discovered): the pages are
// conserved. Run checks the other invariants as it goes.
func (s *Sim) Unfetched() int64 {
	var n int64
	for _, st := range s.state {
		if st&stKnown != 0 && st&stFetched == 0 {
			n++
		}
	}
	return n
}

// LentNow counts the URLs lent and not settled yet (their outcome or
// give-back may be on its way).
func (s *Sim) LentNow() int64 {
	var n int64
	for _, st := range s.state {
		if st&stLent != 0 {
			n++
		}
	}
	return n
}

// Gone counts the pages that were known and are out of reach now: lost
// with a dead member (and not linked again since) or kept by a cut-off one.
func (s *Sim) Gone() int64 {
	var n int64
	for _, st := range s.state {
		if st&stKnown == 0 && st&(stLost|stStashed) != 0 {
			n++
		}
	}
	return n
}

// Ownership is the ring's figures for a cluster of n members over a set
// of fingerprints: the share of each member, and the fraction of the
// fingerprints that move when a member joins or leaves.
type Ownership struct {
	Nodes   int
	FPs     int
	Share   Spread  // URLs per node: min, max, stddev over the mean
	Join    float64 // fraction moved when one member joins
	Leave   float64 // fraction moved when one member leaves
	JoinErr float64 // (Join − 1/(n+1)) / (1/(n+1))
	LeavErr float64 // (Leave − 1/n) / (1/n)
}

// RingStats computes Ownership for members named as in a run with the
// real ring.Ring, over the fingerprints of every stride-th page of web.
func RingStats(web *Web, n int, stride int64) Ownership {
	names := make([]string, n)
	for i := range names {
		names[i] = nodeName(i)
	}
	r := ring.New(names)
	rj := ring.New(append(append([]string{}, names...), nodeName(n)))
	rl := ring.New(names[1:])
	counts := make([]int64, n)
	var fps, join, leave int64
	for h := range web.Hosts() {
		for i := int64(0); i < int64(web.PagesOf(h)); i++ {
			g := web.Off[h] + i
			if g%stride != 0 {
				continue
			}
			fp := web.FP(h, int(i))
			o := r.OwnerIndex(fp)
			counts[o]++
			fps++
			if rj.OwnerIndex(fp) != o {
				join++
			}
			if o == 0 || rl.OwnerIndex(fp)+1 != o {
				leave++
			}
		}
	}
	own := Ownership{Nodes: n, FPs: int(fps), Share: spread(counts)}
	own.Join = float64(join) / float64(fps)
	own.Leave = float64(leave) / float64(fps)
	own.JoinErr = own.Join*float64(n+1) - 1
	own.LeavErr = own.Leave*float64(n) - 1
	return own
}
