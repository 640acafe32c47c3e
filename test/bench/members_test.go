package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/test/synthweb"
)

// bigHostConfig is a web whose largest host holds most of it: 60 hosts,
// 26,000 content pages, sizes ∝ 1/rank^3, so the largest site has 21,624
// pages (plus its redirects, 404s and files), the next 2,703, and most
// sites a few dozen. No Crawl-delay, slow or trap host: the largest
// site's one connection sets the crawl's pace.
func bigHostConfig() synthweb.Config {
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.ZipfS, wc.MaxSitePages = 60, 26000, 3, 25000
	wc.CrawlDelayHosts, wc.SlowHosts, wc.TrapHosts = 0, 0, 0
	return wc
}

// BenchmarkMembersBigHost crawls bigHostConfig's web with one node alone
// and with three cluster members (each a process of its own, on
// 127.0.0.1..3, started together with the web's seeds, the shipped
// cluster settings: 30 s phases), back to back in each iteration (the
// order alternating), with --delay 0. Only the member whose phase holds
// a host may crawl it, so the largest host is crawled by one member at a
// time, as by one node. Metrics, for each (prefix 1- and 3-): s, from the
// first process's start to the web's last response (start-up included);
// crawl-s, from the web's first request to its last response; pages/s
// over crawl-s; startup-s, from the start to the first request; CPU-s,
// the members' user+sys time. ratio and crawl-ratio: three members' s and
// crawl-s over one node's, on the iterations' sums. Each crawl is checked
// against the web's oracle (every page exactly once, robots.txt at most
// once per member, one request at a time per host).
func BenchmarkMembersBigHost(b *testing.B) {
	web := prerenderedWeb(b, bigHostConfig())
	var sums [2]membersResult
	first := pairedRuns
	pairedRuns++
	b.StopTimer()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			c := (first + i + k) % 2
			n := []int{1, 3}[c]
			r := membersCrawl(b, web, n)
			b.Logf("%d member(s): %.2fs (start-up %.2fs), %.2fs crawling, %.0f pages/s, CPU %.1fs", n, r.total.Seconds(), r.firstAnswer.Seconds(),
				r.crawling.Seconds(), float64(r.pages)/r.crawling.Seconds(), r.cpu.Seconds())
			for _, l := range r.tail {
				b.Logf("  %s", l)
			}
			s := &sums[c]
			s.pages += r.pages
			s.total += r.total
			s.crawling += r.crawling
			s.cpu += r.cpu
			s.firstAnswer += r.firstAnswer
		}
	}
	for c, n := range []int{1, 3} {
		s := sums[c]
		p := fmt.Sprintf("%d-", n)
		b.ReportMetric(s.total.Seconds()/float64(b.N), p+"s")
		b.ReportMetric(s.crawling.Seconds()/float64(b.N), p+"crawl-s")
		b.ReportMetric(float64(s.pages)/s.crawling.Seconds(), p+"pages/s")
		b.ReportMetric(s.firstAnswer.Seconds()/float64(b.N), p+"startup-s")
		b.ReportMetric(s.cpu.Seconds()/float64(b.N), p+"CPU-s")
	}
	b.ReportMetric(sums[1].total.Seconds()/sums[0].total.Seconds(), "ratio")
	b.ReportMetric(sums[1].crawling.Seconds()/sums[0].crawling.Seconds(), "crawl-ratio")
}

// TestMembersInChild: three members, each a process of its own, crawl a
// small web whose largest host holds most of its pages (as
// BenchmarkMembersBigHost does a larger one): every page exactly once, by
// the members together, within a few epochs of the shipped phases.
func TestMembersInChild(t *testing.T) {
	if testing.Short() {
		t.Skip("three member processes in -short mode")
	}
	wc := bigHostConfig()
	wc.Hosts, wc.Pages = 20, 2000
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	r := membersCrawl(t, web, 3)
	if r.pages == 0 || r.total <= 0 || r.total > 3*time.Minute {
		t.Fatalf("3 members: %d pages in %s", r.pages, r.total)
	}
	t.Logf("3 members: %d pages in %.2fs (start-up %.2fs), CPU %.1fs", r.pages, r.total.Seconds(), r.firstAnswer.Seconds(), r.cpu.Seconds())
}
