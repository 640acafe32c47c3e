package cluster_test

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/phasecrawl/phasecrawl/test/harness"
)

// corpusBound is the most three members may take of one node's time on
// the rust-doc corpus, start-up included (BenchmarkCorpusRustDoc).
const corpusBound = 1.5

// corpusPairs is how many pairs of crawls BenchmarkCorpusRustDoc runs per
// iteration: 7, or PHASECRAWL_BENCH_PAIRS.
func corpusPairs() int {
	if n, err := strconv.Atoi(os.Getenv("PHASECRAWL_BENCH_PAIRS")); err == nil && n > 0 {
		return n
	}
	return 7
}

// median returns the median of xs (the mean of the middle two when their
// number is even); xs must not be empty.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkCorpusRustDoc crawls Debian's rust-doc (over 20,000 HTML pages
// on one host, served by nginx on a loopback address) with --delay 0 and
// the shipped settings, by one node and by three members started
// together (crawlCorpus), in pairs of back-to-back crawls, and fails when
// three members take more than corpusBound (1.5) times one node's time,
// start-up included: from the first process's start to the last request
// nginx logged. Reproduce (CI runs it alone, before the README's test
// command):
//
//	go test -run '^$' -bench '^BenchmarkCorpusRustDoc$' -benchtime 1x ./test/cluster/
//
// The statistic is the median, over the pairs, of each pair's ratio
// (three members' total over one node's). The two crawls of a pair run
// one after the other and so share the machine's load, which a ratio
// across pairs does not: on a shared machine one node's time alone moved
// from 23 to 38 s within minutes. The order within a pair alternates
// (one node first in the first pair, three members first in the second,
// ...) so that a load that rises or falls through the series favours
// neither. The median of seven pairs lets three disturbed pairs pass
// (a burst of other work, or a crawl in which the three members stall for
// seconds, about one in ten, docs/design/performance.md) but not a slowdown
// seen in four pairs of seven. Every crawl is also checked as TestProcCorpusRustDoc
// checks it (each page once, the one node's pages, robots.txt, crawl
// logs). PHASECRAWL_BENCH_PAIRS sets the number of pairs (7).
//
// Before the pairs the benchmark reads every file under the corpus's root
// once (warmCorpus), so that the first crawl does not pay for reading
// nginx's files from disk while the others find them in the page cache:
// on an idle machine a first crawl on a cold cache took 18.3 s where the
// next ones of its kind took 12–13 s.
//
// Metrics: ratio (the median), ratio-min, ratio-max; s-1node and
// s-3members (medians of the totals); s-startup-3members (the median of
// the three members' time to their first request); cpu-ratio (the median
// of the pairs' CPU ratios: the user and system time of the three
// members' processes over one node's, which the machine's other load
// moves less than the times).
func BenchmarkCorpusRustDoc(b *testing.B) {
	bin, root := needCorpus(b)
	ng := harness.StartNginx(b, bin, root, "127.0.0.10")
	n, size, err := warmCorpus(root)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("warmed the page cache: read %d files, %d bytes under %s", n, size, root)
	var ratios, ones, threes, starts, cpus []float64
	var ref map[string]int
	for i := 0; i < b.N; i++ {
		for p := 0; p < corpusPairs(); p++ {
			var one, three corpusCrawl
			if p%2 == 0 {
				one = crawlCorpus(b, ng, 1)
				three = crawlCorpus(b, ng, 3)
			} else {
				three = crawlCorpus(b, ng, 3)
				one = crawlCorpus(b, ng, 1)
			}
			if ref == nil {
				ref = corpusRef(b, one, root)
			}
			checkCorpus(b, ref, one)
			checkCorpus(b, ref, three)
			r := three.total().Seconds() / one.total().Seconds()
			b.Logf("pair %d: %v", len(ratios)+1, one)
			b.Logf("pair %d: %v", len(ratios)+1, three)
			order := "one node first"
			if p%2 == 1 {
				order = "three members first"
			}
			b.Logf("pair %d (%s): three members %.2fs ÷ one node %.2fs = %.2f×", len(ratios)+1, order, three.total().Seconds(), one.total().Seconds(), r)
			ratios = append(ratios, r)
			ones = append(ones, one.total().Seconds())
			threes = append(threes, three.total().Seconds())
			starts = append(starts, three.first.Sub(three.start).Seconds())
			cpus = append(cpus, three.cpu.Seconds()/one.cpu.Seconds())
		}
	}
	b.ReportMetric(median(ratios), "ratio")
	b.ReportMetric(slices.Min(ratios), "ratio-min")
	b.ReportMetric(slices.Max(ratios), "ratio-max")
	b.ReportMetric(median(ones), "s-1node")
	b.ReportMetric(median(threes), "s-3members")
	b.ReportMetric(median(starts), "s-startup-3members")
	b.ReportMetric(median(cpus), "cpu-ratio")
	if m := median(ratios); m > corpusBound {
		b.Errorf("start-up included, three members took a median %.2f× one node's time over %d pairs (%.2f), want at most %.1f×",
			m, len(ratios), ratios, corpusBound)
	}
}

// warmCorpus reads every regular file under root once (symbolic links to
// regular files included, as nginx follows them), so that the
// crawls that follow find the corpus in the page cache, and returns how
// many files and bytes it read.
func warmCorpus(root string) (files int, size int64, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() {
			return nil // a dangling link or not a file: nginx serves nothing there either
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("warm the corpus: %w", err)
		}
		defer f.Close()
		n, err := io.Copy(io.Discard, f)
		if err != nil {
			return fmt.Errorf("warm the corpus: read %s: %w", path, err)
		}
		files++
		size += n
		return nil
	})
	return files, size, err
}

// TestMedian: the statistic of BenchmarkCorpusRustDoc.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{1.2}, 1.2},
		{[]float64{1.9, 1.1, 1.3}, 1.3},
		{[]float64{1.0, 2.0, 1.5, 1.25}, 1.375},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}
