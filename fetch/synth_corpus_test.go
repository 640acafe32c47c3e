package fetch

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/demo/synthweb"
)

// synthCorpus is up to n HTML pages of the default synthetic web (no slow
// hosts), in the order a breadth-first crawl from its seeds finds them.
type synthPage struct {
	url  *url.URL
	body []byte
}

var (
	synthOnce  sync.Once
	synthPages []synthPage
)

func synthCorpus(tb testing.TB, n int) []synthPage {
	tb.Helper()
	synthOnce.Do(func() {
		rs, err := synthweb.SampleDefault(3000, false)
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range rs {
			if r.Code != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || len(synthPages) == 2000 {
				continue
			}
			pu, _ := url.Parse(r.URL)
			synthPages = append(synthPages, synthPage{pu, r.Body})
		}
	})
	if len(synthPages) < n {
		n = len(synthPages)
	}
	return synthPages[:n]
}

// BenchmarkExtractLinksSynth extracts the links of 2,000 synthetic-web
// pages (2-8 KB each, ~2,000 links in all); ns/op is per page.
func BenchmarkExtractLinksSynth(b *testing.B) {
	pages := synthCorpus(b, 2000)
	for _, bc := range []struct {
		name string
		fn   func(*url.URL, []byte) Page
	}{{"goquery", ExtractLinks}, {"fast", ExtractLinksFast}, {"fast-no-requisites", func(u *url.URL, b []byte) Page {
		return ExtractLinksFastRequisites(u, b, false) // what a crawl without fetch.requisites runs
	}}} {
		b.Run(bc.name, func(b *testing.B) {
			size := 0
			for _, p := range pages {
				size += len(p.body)
			}
			b.SetBytes(int64(size / len(pages)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p := pages[i%len(pages)]
				bc.fn(p.url, p.body)
			}
		})
	}
}

func TestSynthCorpusAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, p := range synthCorpus(t, 2000) {
		bothExtract(t, p.url, p.body, p.url.String())
	}
}

// BenchmarkFetchSynth fetches the synthetic-web pages of synthCorpus over
// loopback from an in-process server (its CPU included) with one
// connection per host, as the crawler does; ns/op is per page.
func BenchmarkFetchSynth(b *testing.B) { fetchSynth(b, 0) }

// BenchmarkFetchSynthBudget is BenchmarkFetchSynth under the node's
// default body memory budget (ClientConfig.MaxInflightBytes 256 MiB): the
// cost of reserving and giving back each body's share.
func BenchmarkFetchSynthBudget(b *testing.B) { fetchSynth(b, 256<<20) }

func fetchSynth(b *testing.B, budget int64) {
	pages := synthCorpus(b, 2000)
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
		r, err := cl.Fetch(ctx, pages[i%len(pages)].url.String())
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
