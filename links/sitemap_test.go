package links

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestParseSitemap(t *testing.T) {
	urlset := `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc> http://h.example/a?x=1&amp;y=2 </loc><lastmod>2026-01-02</lastmod><changefreq>daily</changefreq></url>
  <url><loc>http://h.example/b</loc><lastmod>2026-01-02T03:04:05+01:00</lastmod></url>
  <url><lastmod>2026-01-02</lastmod></url>
  <url><loc>http://h.example/c</loc><lastmod>yesterday</lastmod></url>
</urlset>`
	index := `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>http://h.example/s1.xml.gz</loc><lastmod>2025-12-31T23:59Z</lastmod></sitemap>
<sitemap><loc>http://h.example/s2.xml</loc></sitemap></sitemapindex>`
	wantSet := []SitemapEntry{
		{Loc: "http://h.example/a?x=1&y=2", LastMod: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		{Loc: "http://h.example/b", LastMod: time.Date(2026, 1, 2, 2, 4, 5, 0, time.UTC)},
		{Loc: "http://h.example/c"},
	}
	wantIndex := []SitemapEntry{
		{Loc: "http://h.example/s1.xml.gz", LastMod: time.Date(2025, 12, 31, 23, 59, 0, 0, time.UTC)},
		{Loc: "http://h.example/s2.xml"},
	}
	tests := []struct {
		name      string
		body      []byte
		index     bool
		want      []SitemapEntry
		truncated bool
		err       error
	}{
		{"urlset", []byte(urlset), false, wantSet, false, nil},
		{"gzip urlset", gz(t, []byte(urlset)), false, wantSet, false, nil},
		{"index", []byte(index), true, wantIndex, false, nil},
		{"gzip index", gz(t, []byte(index)), true, wantIndex, false, nil},
		{"no namespace, upper case", []byte(`<URLSET><URL><LOC>http://h.example/a</LOC></URL></URLSET>`), false, []SitemapEntry{{Loc: "http://h.example/a"}}, false, nil},
		{"cut short", []byte(urlset[:strings.Index(urlset, "<url><loc>http://h.example/b")+20]), false, wantSet[:1], true, nil},
		{"html", []byte(`<html><body><a href="/x">x</a></body></html>`), false, nil, false, ErrNotSitemap},
		{"rss", []byte(`<?xml version="1.0"?><rss><channel><link>http://h.example/</link></channel></rss>`), false, nil, false, ErrNotSitemap},
		{"entry closed inside its loc", []byte(`<urlset><url><loC>http://h.example/a<url></A>`), false, nil, true, nil},
		{"empty", nil, false, nil, false, ErrNotSitemap},
		{"gzip'd download", gz(t, bytes.Repeat([]byte{1, 2, 3, '<'}, 100000)), false, nil, false, ErrNotSitemap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sm, err := ParseSitemap(tt.body)
			if err != tt.err {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if sm.Index != tt.index || sm.Truncated != tt.truncated {
				t.Errorf("index=%v truncated=%v, want %v %v", sm.Index, sm.Truncated, tt.index, tt.truncated)
			}
			if fmt.Sprint(sm.Entries) != fmt.Sprint(tt.want) {
				t.Errorf("entries\n%v\nwant\n%v", sm.Entries, tt.want)
			}
		})
	}
}

// TestParseSitemapBounds: a file is read up to 50,000 URLs and 50 MB uncompressed.
func TestParseSitemapBounds(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`<urlset>`)
	for i := 0; i < SitemapMaxURLs+10; i++ {
		fmt.Fprintf(&b, "<url><loc>http://h.example/%d</loc></url>\n", i)
	}
	b.WriteString(`</urlset>`)
	sm, err := ParseSitemap(gz(t, b.Bytes()))
	if err != nil || len(sm.Entries) != SitemapMaxURLs || !sm.Truncated {
		t.Fatalf("%d entries, truncated=%v, err=%v; want %d, true", len(sm.Entries), sm.Truncated, err, SitemapMaxURLs)
	}
	if last := sm.Entries[len(sm.Entries)-1].Loc; last != fmt.Sprintf("http://h.example/%d", SitemapMaxURLs-1) {
		t.Errorf("last entry %s", last)
	}
	// 60 MB of padding inside one <url>: a gzip bomb stops at 50 MB
	b.Reset()
	b.WriteString(`<urlset><url><loc>http://h.example/first</loc></url><url><loc>http://h.example/`)
	b.Write(bytes.Repeat([]byte("x"), 60<<20))
	b.WriteString(`</loc></url></urlset>`)
	sm, err = ParseSitemap(gz(t, b.Bytes()))
	if err != nil || len(sm.Entries) != 1 || !sm.Truncated {
		t.Fatalf("bomb: %d entries, truncated=%v, err=%v; want 1, true", len(sm.Entries), sm.Truncated, err)
	}
}

func TestRobotsSitemaps(t *testing.T) {
	body := "User-agent: *\nDisallow: /x\nSitemap: http://h.example/s1.xml\n  sitemap:http://h.example/s2.xml.gz # two\r\nSITEMAP : http://h.example/s3.xml\nSitemap:\nDisallow: /sitemap: no\n"
	got := RobotsSitemaps([]byte(body))
	want := []string{"http://h.example/s1.xml", "http://h.example/s2.xml.gz", "http://h.example/s3.xml"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
