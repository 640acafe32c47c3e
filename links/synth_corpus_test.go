package links

import (
	"net/url"
	"strings"
	"sync"
	"testing"

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
	}{{"goquery", Extract}, {"fast", ExtractFast}, {"fast-no-requisites", func(u *url.URL, b []byte) Page {
		return ExtractFastRequisites(u, b, false) // what a crawl without fetch.requisites runs
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
