// Package hashexp is the paper's load-distribution experiment (KSpider §4,
// Figures 9 and 10): how evenly URLs spread over nodes and hosts over phases
// under the paper's sum-of-characters hashes and under phasecrawl's
// (ring.Ring's rendezvous hashing, xxhash of the host mod Nphase). Its
// tests print the tables of docs/design/paper-experiment.md and check that
// the note quotes them as the code computes them today.
package hashexp

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
)

// Scheme is a way of assigning URLs to nodes or hosts to phases.
type Scheme int

const (
	// PaperSum is KSpider's: sum of the string's bytes mod N (equations 1, 2).
	PaperSum Scheme = iota
	// Ours is phasecrawl's: rendezvous Owner over node names for nodes,
	// xxhash64(lower-cased host) mod Nphase for phases.
	Ours
)

// String names the scheme for tables.
func (s Scheme) String() string {
	if s == PaperSum {
		return "sum of chars"
	}
	return "phasecrawl"
}

// SumChars is the paper's hash: the sum of the bytes of s.
func SumChars(s string) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h += uint64(s[i])
	}
	return h
}

// NodeNames returns the member names used in the experiment: node1..nodeN.
func NodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node%d", i+1)
	}
	return names
}

// NodeCounts returns how many of urls each of n nodes owns under scheme.
func NodeCounts(urls []string, n int, scheme Scheme) []int {
	counts := make([]int, n)
	if n < 1 {
		return counts
	}
	ring := ring.New(NodeNames(n)) // sorted node1, node10, node2, ... order does not matter for counts
	for _, u := range urls {
		if scheme == PaperSum {
			counts[SumChars(u)%uint64(n)]++
		} else {
			counts[ring.OwnerIndex(xxhash.Sum64String(u))]++
		}
	}
	return counts
}

// PhaseCounts returns how many of urls fall into each of nphase phases by
// their host under scheme. URLs that do not parse are skipped.
func PhaseCounts(urls []string, nphase int, scheme Scheme) []int {
	counts := make([]int, nphase)
	if nphase < 1 {
		return counts
	}
	for _, raw := range urls {
		host, ok := hostOf(raw)
		if !ok {
			continue
		}
		if scheme == PaperSum {
			counts[SumChars(host)%uint64(nphase)]++
		} else {
			counts[xxhash.Sum64String(host)%uint64(nphase)]++
		}
	}
	return counts
}

// hostOf returns the lower-cased host[:port] of an absolute URL.
func hostOf(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false
	}
	return strings.ToLower(u.Host), true
}

// Dist summarizes a distribution of counts over buckets.
type Dist struct {
	Counts    []int
	Min, Max  int
	Mean      float64
	MaxDevPct float64 // largest |count − mean| as a percentage of the mean
}

// Summarize computes a Dist over counts.
func Summarize(counts []int) Dist {
	d := Dist{Counts: counts}
	if len(counts) == 0 {
		return d
	}
	d.Min, d.Max = counts[0], counts[0]
	total := 0
	for _, c := range counts {
		d.Min, d.Max = min(d.Min, c), max(d.Max, c)
		total += c
	}
	d.Mean = float64(total) / float64(len(counts))
	if d.Mean > 0 {
		dev := math.Max(float64(d.Max)-d.Mean, d.Mean-float64(d.Min))
		d.MaxDevPct = 100 * dev / d.Mean
	}
	return d
}

// HashRow is one line of a HashTable: N buckets under both schemes.
type HashRow struct {
	N           int
	Paper, Ours Dist
	// PaperMovedPct and OursMovedPct (node tables only) are the percentages
	// of URLs whose node changes when the cluster grows from N−1 to N nodes.
	PaperMovedPct, OursMovedPct float64
}

// MovedPct returns the percentage of urls whose owner changes when a node
// joins a cluster of n−1 nodes (n >= 2) under scheme. For PaperSum node ids
// 0..n−2 keep their identity; for Ours the names node1..node(n−1) do.
func MovedPct(urls []string, n int, scheme Scheme) float64 {
	if n < 2 || len(urls) == 0 {
		return 0
	}
	before, after := ring.New(NodeNames(n-1)), ring.New(NodeNames(n))
	moved := 0
	for _, u := range urls {
		if scheme == PaperSum {
			h := SumChars(u)
			if h%uint64(n-1) != h%uint64(n) {
				moved++
			}
		} else if fp := xxhash.Sum64String(u); before.Owner(fp) != after.Owner(fp) {
			moved++
		}
	}
	return 100 * float64(moved) / float64(len(urls))
}

// HashTable is the experiment for one URL list and one kind of bucket.
type HashTable struct {
	Title string
	Kind  string // "node" or "phase"
	URLs  int
	Rows  []HashRow
}

// NodeTable runs the URLs-per-node experiment for N = from..to.
func NodeTable(title string, urls []string, from, to int) HashTable {
	t := HashTable{Title: title, Kind: "node", URLs: len(urls)}
	for n := from; n <= to; n++ {
		t.Rows = append(t.Rows, HashRow{N: n,
			Paper:         Summarize(NodeCounts(urls, n, PaperSum)),
			Ours:          Summarize(NodeCounts(urls, n, Ours)),
			PaperMovedPct: MovedPct(urls, n, PaperSum),
			OursMovedPct:  MovedPct(urls, n, Ours)})
	}
	return t
}

// PhaseTable runs the URLs-per-phase experiment for Nphase = from..to.
func PhaseTable(title string, urls []string, from, to int) HashTable {
	t := HashTable{Title: title, Kind: "phase", URLs: len(urls)}
	for n := from; n <= to; n++ {
		t.Rows = append(t.Rows, HashRow{N: n,
			Paper: Summarize(PhaseCounts(urls, n, PaperSum)),
			Ours:  Summarize(PhaseCounts(urls, n, Ours))})
	}
	return t
}

// Markdown renders the table: per N the mean, and min / max / max deviation
// from the mean for the paper's hash and for ours; node tables add the share
// of URLs that change node when the N-th node joins.
func (t HashTable) Markdown() string {
	var b strings.Builder
	node := t.Kind == "node"
	fmt.Fprintf(&b, "**%s** — %d URLs, URLs per %s\n\n", t.Title, t.URLs, t.Kind)
	if node {
		b.WriteString("| N | mean | sum-of-chars min / max | dev | moved | rendezvous min / max | dev | moved |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	} else {
		b.WriteString("| Nphase | mean | sum-of-chars min / max | dev | xxhash min / max | dev |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|\n")
	}
	for _, r := range t.Rows {
		if node {
			fmt.Fprintf(&b, "| %d | %.0f | %d / %d | %.1f%% | %.0f%% | %d / %d | %.1f%% | %.0f%% |\n", r.N, r.Paper.Mean,
				r.Paper.Min, r.Paper.Max, r.Paper.MaxDevPct, r.PaperMovedPct, r.Ours.Min, r.Ours.Max, r.Ours.MaxDevPct, r.OursMovedPct)
			continue
		}
		fmt.Fprintf(&b, "| %d | %.0f | %d / %d | %.1f%% | %d / %d | %.1f%% |\n", r.N, r.Paper.Mean,
			r.Paper.Min, r.Paper.Max, r.Paper.MaxDevPct, r.Ours.Min, r.Ours.Max, r.Ours.MaxDevPct)
	}
	return b.String()
}

// ReadURLList reads one URL per line; blank lines and lines starting with #
// are skipped.
func ReadURLList(r io.Reader) ([]string, error) {
	var urls []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		urls = append(urls, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hashexp: read URL list: %w", err)
	}
	return urls, nil
}
