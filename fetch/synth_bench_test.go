package fetch

import (
	"context"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
)

// synthURLs is up to n URLs of HTML pages of the default synthetic web (no
// slow hosts), in the order a breadth-first crawl from its seeds finds them:
// the pages links.BenchmarkExtractLinksSynth parses.
func synthURLs(tb testing.TB, n int) []string {
	tb.Helper()
	rs, err := synthweb.SampleDefault(3000, false)
	if err != nil {
		tb.Fatal(err)
	}
	var urls []string
	for _, r := range rs {
		if r.Code == 200 && strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") && len(urls) < n {
			urls = append(urls, r.URL)
		}
	}
	return urls
}

// BenchmarkFetchSynth fetches the synthetic-web pages of synthURLs over
// loopback from an in-process server (its CPU included) with one
// connection per host, as the crawler does; ns/op is per page.
func BenchmarkFetchSynth(b *testing.B) { fetchSynth(b, 0) }

// BenchmarkFetchSynthBudget is BenchmarkFetchSynth under the node's
// default body memory budget (ClientConfig.MaxInflightBytes 256 MiB): the
// cost of reserving and giving back each body's share.
func BenchmarkFetchSynthBudget(b *testing.B) { fetchSynth(b, 256<<20) }

func fetchSynth(b *testing.B, budget int64) {
	urls := synthURLs(b, 2000)
	c := synthweb.DefaultConfig()
	c.SlowHosts = 0
	w, err := synthweb.New(c)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(w)
	defer srv.Close()
	cc := DefaultClientConfig()
	cc.AllowPrivate = true
	cc.Resolve = []ResolveRule{{Pattern: "*." + c.Domain, Addr: srv.Listener.Addr().String()}}
	cc.MaxInflightBytes = budget
	cc.SpoolDir = b.TempDir()
	cl, err := NewClient(cc)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cpuTime()
	n := 0
	for i := 0; b.Loop(); i++ {
		r, err := cl.Fetch(ctx, urls[i%len(urls)])
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
		n++
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/op")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
