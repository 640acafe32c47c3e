package links

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// compareTokens tokenizes in with the scanner and with x/net/html's
// Tokenizer (CDATA allowed and raw text cancelled on a pattern that varies
// with seed) and reports the first difference: token type, raw bytes, tag
// name, attributes (first of each name, values decoded), or the whitespace
// classes of a text token as the fast parser reads it.
func compareTokens(in []byte, seed int) error {
	z := html.NewTokenizer(bytes.NewReader(in))
	s := newScanner(in)
	for n := 0; ; n++ {
		cdata := (n+seed)%3 == 0
		z.AllowCDATA(cdata)
		s.allowCDATA = cdata
		tt, st := z.Next(), s.next()
		if tt != st {
			return fmt.Errorf("token %d: type %v, scanner %v (raw %q, scanner %q)", n, tt, st, z.Raw(), s.raw())
		}
		if tt == html.ErrorToken {
			return nil
		}
		if !bytes.Equal(z.Raw(), s.raw()) {
			return fmt.Errorf("token %d (%v): raw %q, scanner %q", n, tt, z.Raw(), s.raw())
		}
		switch tt {
		case html.TextToken:
			want := bytes.Clone(z.Raw())
			if bytes.IndexByte(want, '&') >= 0 || bytes.IndexByte(want, 0) >= 0 {
				want = bytes.Clone(z.Text())
			}
			got := s.wsText()
			for _, set := range []string{" \t\r\n\f", whitespaceOrNUL} {
				if onlyOf(want, set) != onlyOf(got, set) {
					return fmt.Errorf("token %d: text %q: only of %q: %v, scanner (%q) %v", n, want, set, onlyOf(want, set), got, onlyOf(got, set))
				}
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, _ := z.TagName()
			if got := s.tagName(); got != string(name) {
				return fmt.Errorf("token %d: tag %q: name %q, scanner %q", n, z.Raw(), name, got)
			}
			var want, got []string
			for more := tt != html.EndTagToken; more; {
				var k, v []byte
				k, v, more = z.TagAttr()
				if k == nil {
					break
				}
				want = append(want, string(k)+"="+string(v))
			}
			seen := map[string]bool{}
			for _, a := range s.attrs {
				if tt == html.EndTagToken {
					break
				}
				k := asciiLower(strings.ReplaceAll(string(s.b[a.k0:a.k1]), "\x00", "\ufffd"))
				if k2 := asciiLower(string(s.b[a.k0:a.k1])); seen[k2] {
					continue
				} else {
					seen[k2] = true
				}
				v, ok := s.attrValue(a)
				if !ok {
					v = "<fallback>"
					for _, w := range want {
						if strings.HasPrefix(w, k+"=") {
							v = strings.TrimPrefix(w, k+"=")
							break
						}
					}
				}
				got = append(got, k+"="+v)
			}
			if fmt.Sprint(want) != fmt.Sprint(got) {
				return fmt.Errorf("token %d: tag %q: attributes %q, scanner %q", n, z.Raw(), want, got)
			}
			if tt == html.StartTagToken && (n+seed)%5 == 0 {
				z.NextIsNotRawText()
				s.rawTag = ""
			}
		}
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// scannerCases are tokenizer corner cases.
var scannerCases = []string{
	"", "x", "<", "<a", "<a ", "<a href", "<a href=", "<a href=x", "<a href='x", `<a href="x`, "<a>", "</", "</a", "</a>", "</>", "<!", "<!-", "<!--", "<!-->", "<!--->",
	"<!---->", "<!-- x -->y", "<!-- x --!>y", "<!-- x --!->y-->z", "<!--!>x-->", "<!---!>x-->", "<!----!>x", "<!-- -- >x-->", "<!--x--!", "<!--x--",
	"<!DOCTYPE html><a href=1>", "<!doctype", "<!DOCTYPE", "<!DOCTYPE   ", "<!DOCT", "<![CDATA[x]]>y", "<![CDATA[x]]", "<![CDATA[<a href=1>]]>", "<![CDA", "<![cdata[x]]>",
	"<?xml version=1?><a>", "<?", "</ x>", "</1>", "</a b=c>", "<a/>", "<a/ >", "<a / >", "<a href=x/>", "<a href='x'/>", "<a b=1 b=x/>", "<a b/>", "<a b =  c>", "<a =b>", "<a ==b>",
	"<a b= >", "<a b=>", "<a\x00b c\x00=d\x00>", "<A HREF=X REL=NOFOLLOW>", "<a HREF=1 href=2>", "<a b='1\"2' c=\"3'4\">", "<a b=x>y>", "<a b=c\td\ne\ff\rg>",
	"<a href='&amp;&lt;&gt;&quot;&apos;&nbsp;&amp&lt&gt&quot&nbsp&apos'>", "<a href='&copy;&copy=&copy &COPY; &ampx; &ampx=&#38;&#x26;&#X26&#;&#x;&#&#1114112;&#0;&#128;&#xD800;'>",
	"<a href='?a=1&b=2&lang=en&x'>", "<a href='&notit; &notin; &not &AMP &AMP; &frac12 &frac12;'>", "<a href='a\r\nb\rc'>", "<a href=&amp>", "<a href=\"&#x1F600;\">",
	"<script>a<b</script>x", "<script><!--<script></script>--></script>x", "<script><!--<script>--></script>x", "<script><!-- x --></script>", "<script></script>", "<script>",
	"<script><!-- <script> </script> --> </script>x", "<script><!--<SCRIPT>x</SCRIPT>--></script>", "<script></scriptx></script >", "<SCRIPT></Script>", "<script/>x</script>",
	"<style>a</style >b", "<style>a</styl</style>", "<title>a<b>&amp;</title>", "<textarea>&lt;</textarea>", "<xmp><a></xmp>", "<iframe><a href=1></iframe>", "<noembed>x</noembed>",
	"<noframes>x</noframes>", "<noscript>x</noscript>", "<plaintext><a href=1></plaintext><a>", "<title></title>", "<title>x</title", "<title>x</title ", "<title>x</ti",
	"text &amp; more", "&nbsp;", " &#32; ", "\x00", " \x00&amp;", "&", "a&b", "<p>&#9;</p>", "<svg><![CDATA[ &#32; ]]></svg>", "<svg><![CDATA[\x00]]></svg>",
	"<a\tb>", "<a\nb>", "<a\fb>", "<a\rb>", "<" + strings.Repeat("abcdefgh", 8) + ">", "<a " + strings.Repeat("x=1 ", 100) + "/>", "<a " + strings.Repeat("x=1 y=2 ", 50) + "z/>",
}

func TestScannerTokens(t *testing.T) {
	var inputs [][]byte
	for _, c := range scannerCases {
		inputs = append(inputs, []byte(c))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "links", "*.html"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
	}
	r := rand.New(rand.NewSource(7))
	for range 200 {
		inputs = append(inputs, randomPage(r))
	}
	for _, p := range synthCorpus(t, 300) {
		inputs = append(inputs, p.body)
	}
	for i, in := range inputs {
		for seed := range 15 {
			if err := compareTokens(in, seed); err != nil {
				t.Fatalf("input %d %.200q (seed %d): %v", i, in, seed, err)
			}
		}
		// every prefix of the short ones: inputs cut anywhere
		if len(in) < 300 {
			for j := range in {
				if err := compareTokens(in[:j], i); err != nil {
					t.Fatalf("input %d cut at %d %q: %v", i, j, in[:j], err)
				}
			}
		}
	}
}

// FuzzScanTokens compares the scanner with x/net/html's Tokenizer token by token.
func FuzzScanTokens(f *testing.F) {
	for _, c := range scannerCases {
		f.Add([]byte(c), 0)
	}
	r := rand.New(rand.NewSource(3))
	for range 10 {
		f.Add(randomPage(r), r.Intn(15))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed int) {
		if seed < 0 {
			seed = -seed
		}
		if err := compareTokens(in, seed%15); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFieldsLikeFieldsFunc: relNoFollow and metaRobots split like
// strings.FieldsFunc did before they stopped building slices.
func TestFieldsLikeFieldsFunc(t *testing.T) {
	oldRel := func(rel string) bool {
		for _, f := range strings.FieldsFunc(rel, isHTMLSpace) {
			if strings.EqualFold(f, "nofollow") {
				return true
			}
		}
		return false
	}
	oldMeta := func(content string) (nf, ni bool) {
		for _, f := range strings.FieldsFunc(content, func(r rune) bool { return r == ',' || isHTMLSpace(r) }) {
			switch strings.ToLower(f) {
			case "nofollow":
				nf = true
			case "noindex":
				ni = true
			case "none":
				nf, ni = true, true
			}
		}
		return
	}
	parts := []string{"", " ", "\t", "\n", "\f", "\r", "\v", ",", "nofollow", "NOFOLLOW", "noindex", "NoIndex", "none", "x", "\xff", "é", "\u00a0", "no", "follow", "ſ"}
	r := rand.New(rand.NewSource(5))
	for range 20000 {
		var b strings.Builder
		for range r.Intn(6) {
			b.WriteString(parts[r.Intn(len(parts))])
		}
		s := b.String()
		if got, want := relNoFollow(s), oldRel(s); got != want {
			t.Fatalf("relNoFollow(%q) = %v, want %v", s, got, want)
		}
		nf, ni := metaRobots("robots", s)
		wnf, wni := oldMeta(s)
		if nf != wnf || ni != wni {
			t.Fatalf("metaRobots(%q) = %v %v, want %v %v", s, nf, ni, wnf, wni)
		}
	}
}
