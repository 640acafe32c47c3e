package hashexp

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
)

// synthWebName and siteName name the experiment's URL lists.
const (
	synthWebName = "synthetic web (demo/synthweb default, ~590 hosts, Zipf sizes)"
	siteName     = "university-shaped site (testdata, ~100 hosts)"
)

// experimentLists returns the URL lists of the experiment: the pages a
// correct crawl of the default synthetic web fetches (demo/synthweb's
// oracle), and the university-shaped list in testdata.
func experimentLists(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(siteListPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	site, err := ReadURLList(f)
	if err != nil {
		t.Fatal(err)
	}
	wc := synthweb.DefaultConfig()
	wc.TrapHosts = 0
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	exp := web.Expected(synthweb.Scope{Domains: []string{wc.Domain}, MaxPagesPerHost: 1000, UserAgent: "phasecrawl"})
	urls := slices.Sorted(maps.Keys(exp.Pages))
	return map[string][]string{synthWebName: urls, siteName: site}
}

func TestHashExperiment(t *testing.T) {
	for name, urls := range experimentLists(t) {
		if len(urls) < 20000 {
			t.Fatalf("%s: %d URLs, want >= 20000", name, len(urls))
		}
		nodes := NodeTable(name, urls, 2, 10)
		for _, r := range nodes.Rows {
			if r.Ours.MaxDevPct > 5 {
				t.Errorf("%s: rendezvous over %d nodes deviates %.1f%% from the mean (counts %v)", name, r.N, r.Ours.MaxDevPct, r.Ours.Counts)
			}
			if sum(r.Ours.Counts) != len(urls) || sum(r.Paper.Counts) != len(urls) {
				t.Errorf("%s N=%d: counts do not add up", name, r.N)
			}
			// A join moves ~1/N of the URLs under rendezvous.
			if want := 100 / float64(r.N); r.OursMovedPct < want*0.85 || r.OursMovedPct > want*1.15 {
				t.Errorf("%s: join to %d nodes moved %.1f%%, want ~%.1f%%", name, r.N, r.OursMovedPct, want)
			}
		}
		for _, r := range PhaseTable(name, urls, 2, 10).Rows {
			if sum(r.Ours.Counts) != len(urls) || sum(r.Paper.Counts) != len(urls) {
				t.Errorf("%s Nphase=%d: counts do not add up", name, r.N)
			}
		}
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func TestSummarize(t *testing.T) {
	d := Summarize([]int{90, 100, 110, 100})
	if d.Min != 90 || d.Max != 110 || d.Mean != 100 || d.MaxDevPct != 10 {
		t.Fatalf("%+v", d)
	}
	if d := Summarize(nil); d.Mean != 0 || d.MaxDevPct != 0 {
		t.Fatalf("%+v", d)
	}
	if SumChars("ab") != 97+98 {
		t.Fatal("SumChars")
	}
	urls, err := ReadURLList(strings.NewReader("# c\n\nhttp://a/\n  http://b/x  \n"))
	if err != nil || len(urls) != 2 || urls[1] != "http://b/x" {
		t.Fatalf("ReadURLList = %q, %v", urls, err)
	}
	if got := PhaseCounts([]string{"::bad", "http://A/", "http://a/x"}, 3, Ours); sum(got) != 2 {
		t.Fatalf("PhaseCounts %v", got)
	}
}

// TestPrintHashTables prints the Markdown tables of the paper's experiment
// (KSpider Figures 9 and 10): go test ./cluster -run TestPrintHashTables -v.
// Each table must appear verbatim in the design note that quotes them, so
// that the figures there are the ones the code produces today.
func TestPrintHashTables(t *testing.T) {
	lists := experimentLists(t)
	doc, err := os.ReadFile(paperExperimentDoc)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, name := range []string{synthWebName, siteName} {
		for _, tab := range []HashTable{NodeTable(name, lists[name], 2, 10), PhaseTable(name, lists[name], 2, 10)} {
			if len(tab.Rows) != 9 || tab.Rows[0].N != 2 || tab.Rows[8].N != 10 {
				t.Errorf("%s, per %s: rows %d, want N = 2..10", name, tab.Kind, len(tab.Rows))
			}
			md := tab.Markdown()
			if !strings.Contains(string(doc), md) {
				t.Errorf("%s does not hold the table of %s per %s as the code computes it today:\n%s", paperExperimentDoc, name, tab.Kind, md)
			}
			b.WriteString(md + "\n")
		}
	}
	t.Log("\n" + b.String())
}

// paperExperimentDoc is the design note that quotes the tables.
const paperExperimentDoc = "../../docs/design/paper-experiment.md"
