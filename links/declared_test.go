package links

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/phasecrawl/phasecrawl/urlscope"
)

func TestSrcsetURLs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"a.png", []string{"a.png"}},
		{"a.png 1x, b.png 2x", []string{"a.png", "b.png"}},
		{" a.png,b.png 2x,,c.png", []string{"a.png,b.png", "c.png"}}, // a URL runs to a space
		{"a.png, b.png,, c.png 2x", []string{"a.png", "b.png", "c.png"}},
		{"a.png 100w (max-width: 3px, 4px), b.png", []string{"a.png", "b.png"}},
		{"", nil},
		{" , ", nil},
	}
	for _, tt := range tests {
		if got := srcsetURLs(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("srcsetURLs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRefreshURL(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"5; url=/next", "/next", true},
		{"0;URL='x y'", "x y", true},
		{` 3 , "q.html" `, `q.html`, true},
		{"1.5; url = a", "a", true},
		{"10; b.html", "b.html", true},
		{"5", "", false},
		{"x; url=/a", "", false},
		{"5 url=/a", "", false},
		{"0;", "", false},
	}
	for _, tt := range tests {
		got, ok := refreshURL(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("refreshURL(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestHeaderLinks(t *testing.T) {
	base := mustURL(t, "http://h.example/dir/page")
	h := http.Header{}
	h.Add("Link", `</next>; rel="next", <style.css>; rel=stylesheet, <https://other.example/c>; rel="canonical"`)
	h.Add("Link", `<http://h.example/pre>; rel=preconnect, <about.html>; rel="alternate"; hreflang="de"; title="a, b; c"`)
	h.Add("Link", `<other-res>; rel=next; anchor="/x", <up.html>; rel="up nofollow", garbage, <idx>; REL=Index`)
	p := FromHeader(base, h)
	want := Page{
		Base:      "http://h.example/dir/page",
		Canonical: "https://other.example/c",
		Links: []Link{
			{URL: "http://h.example/next"},
			{URL: "http://h.example/dir/style.css", Requisite: true},
			{URL: "http://h.example/dir/about.html"},
			{URL: "http://h.example/dir/up.html", NoFollow: true},
			{URL: "http://h.example/dir/idx"},
		},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got\n%s\nwant\n%s", pageString(p), pageString(want))
	}
	// merged with the body's links: one followed occurrence makes a link followed
	body := bothExtract(t, base, []byte(`<link rel=canonical href=/body-canonical><img src=/next><a href=up.html>up</a><img src=style.css>`), "merge")
	body.Merge(p)
	got := fmt.Sprintf("%s %v", body.Canonical, body.Links)
	if w := "http://h.example/body-canonical [{http://h.example/next false false} {http://h.example/dir/up.html false false} {http://h.example/dir/style.css false true} {http://h.example/dir/about.html false false} {http://h.example/dir/idx false false}]"; got != w {
		t.Errorf("merged:\n%s\nwant\n%s", got, w)
	}
}

func TestExtractCSSLinks(t *testing.T) {
	base := mustURL(t, "http://h.example/css/site.css")
	css := `@import "base.css"; @IMPORT 'print.css' print; @import url(theme.css);
/* url(commented.png) */ body { background: URL( "../img/bg.png" ) } .a{background:url(data:image/png;base64,AA)}
@font-face { src: url(/fonts/f.woff2) format("woff2"), url('f.woff') ; } .b { x: url(`
	p := ExtractCSS(base, []byte(css))
	var got []string
	for _, l := range p.Links {
		if !l.Requisite {
			t.Errorf("%s not a requisite", l.URL)
		}
		got = append(got, l.URL)
	}
	want := []string{"http://h.example/css/base.css", "http://h.example/css/print.css", "http://h.example/css/theme.css",
		"http://h.example/img/bg.png", "http://h.example/fonts/f.woff2", "http://h.example/css/f.woff"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// FuzzDeclared: the parsers of what a response declares besides its HTML
// (Link headers, style sheets, sitemaps, robots.txt Sitemap lines, srcset
// and refresh values) never panic, and give normalized absolute links.
func FuzzDeclared(f *testing.F) {
	for _, s := range []string{
		`</a>; rel="next", <b>; rel=stylesheet; title="x,y", <c>; rel=canonical; anchor="#"`,
		`@import "a.css"; body{background:url( 'b.png' )} /* url(c) */ x{y:url(d`,
		`<urlset><url><loc>http://h.example/a</loc><lastmod>2026-01-01</lastmod></url></urlset>`,
		`<sitemapindex><sitemap><loc>/s.xml</loc></sitemap></sitemapindex>`,
		"Sitemap: http://h.example/s.xml\nsitemap:x",
		"a.png 1x, b.png (2x, 3), , c",
		"0; url='x'",
	} {
		f.Add(s)
	}
	base := mustURL(f, "http://fuzz.example/d/p")
	check := func(t *testing.T, what string, p Page) {
		for _, l := range append(p.Links, Link{URL: p.Canonical}) {
			if l.URL == "" && what != "" {
				continue
			}
			if n, err := urlscope.Normalize(l.URL); err != nil || n != l.URL {
				t.Fatalf("%s: link %q not normalized", what, l.URL)
			}
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		check(t, "Link header", FromHeader(base, http.Header{"Link": {s}}))
		check(t, "CSS", ExtractCSS(base, []byte(s)))
		if sm, err := ParseSitemap([]byte(s)); err == nil && len(sm.Entries) > SitemapMaxURLs {
			t.Fatalf("%d entries", len(sm.Entries))
		}
		_ = RobotsSitemaps([]byte(s))
		_ = srcsetURLs(s)
		_, _ = refreshURL(s)
	})
}
