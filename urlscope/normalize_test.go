package urlscope

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalize(t *testing.T) {
	long := "http://example.com/" + strings.Repeat("a", MaxURLLength-len("http://example.com/"))
	tests := []struct {
		in, want string
		err      error
	}{
		// scheme and host case, default ports
		{in: "HTTP://Example.COM", want: "http://example.com/"},
		{in: "https://example.com:443/a", want: "https://example.com/a"},
		{in: "http://example.com:80/a", want: "http://example.com/a"},
		{in: "http://example.com:443/a", want: "http://example.com:443/a"},
		{in: "https://example.com:80/a", want: "https://example.com:80/a"},
		{in: "http://example.com:0080/", want: "http://example.com/"},
		{in: "http://example.com:/", want: "http://example.com/"},
		{in: "http://example.com:8080", want: "http://example.com:8080/"},
		{in: "http://example.com:65535/", want: "http://example.com:65535/"},
		{in: "http://example.com:65536/", err: ErrPort},
		{in: "http://example.com:8o/", err: ErrPort},
		{in: "http://example.com:-1/", err: ErrPort},
		// userinfo dropped
		{in: "http://user:pass@example.com/", want: "http://example.com/"},
		{in: "http://a@b@example.com/x", want: "http://example.com/x"},
		{in: "http://user@[::1]:8080/", want: "http://[::1]:8080/"},
		// IPv6 and IPv4
		{in: "http://[2001:DB8::1]/", want: "http://[2001:db8::1]/"},
		{in: "http://[2001:0db8:0:0:0:0:0:1]:80/", want: "http://[2001:db8::1]/"},
		{in: "http://[::ffff:1.2.3.4]/", want: "http://[::ffff:1.2.3.4]/"},
		{in: "http://[fe80::1%25eth0]/", err: ErrHost},
		{in: "http://[1.2.3.4]/", err: ErrHost},
		{in: "http://[::1/", err: ErrHost},
		{in: "http://[::1]x/", err: ErrHost},
		{in: "http://127.0.0.1:8080/", want: "http://127.0.0.1:8080/"},
		// IDNA
		{in: "http://bücher.example/", want: "http://xn--bcher-kva.example/"},
		{in: "http://BÜCHER.example/", want: "http://xn--bcher-kva.example/"},
		{in: "http://xn--bcher-kva.example/", want: "http://xn--bcher-kva.example/"},
		{in: "http://例え.テスト/パス", want: "http://xn--r8jz45g.xn--zckzah/%E3%83%91%E3%82%B9"},
		{in: "http://b%C3%BCcher.example/", want: "http://xn--bcher-kva.example/"},
		{in: "http://ex%41mple.com/", want: "http://example.com/"},
		{in: "http://my_host.example.com/", want: "http://my_host.example.com/"},
		// bad hosts
		{in: "http:///path", want: "http://path/"}, // browsers skip extra slashes
		{in: "http://", err: ErrHost},
		{in: "http://exa mple.com/", err: ErrHost},
		{in: "http://exa\x00mple.com/", err: ErrHost},
		{in: "http://exa%00mple.com/", err: ErrHost},
		{in: "http://exa%0Ample.com/", err: ErrHost},
		{in: "http://exa\x7fmple.com/", err: ErrHost},
		{in: "http://a<b.com/", err: ErrHost},
		{in: "http://%zz.com/", err: ErrHost},
		{in: "http://a%2Fb.com/", err: ErrHost},
		{in: "http://./", err: ErrHost},
		{in: "http://example.com／evil/", err: ErrHost}, // fullwidth solidus maps to "/"
		// schemes
		{in: "ftp://example.com/", err: ErrScheme},
		{in: "javascript:alert(1)", err: ErrScheme},
		{in: "mailto:a@b.c", err: ErrScheme},
		{in: "example.com/path", err: ErrScheme},
		{in: "/relative", err: ErrScheme},
		{in: "", err: ErrScheme},
		{in: "hTTpS://EXAMPLE.com", want: "https://example.com/"},
		// leniencies shared with browsers
		{in: "  http://example.com/a  ", want: "http://example.com/a"},
		{in: "http://exa\nmple.com/a\tb", want: "http://example.com/ab"},
		{in: `http:\\example.com\a\b`, want: "http://example.com/a/b"},
		{in: "http:example.com/a", want: "http://example.com/a"},
		{in: "http:///example.com/a", want: "http://example.com/a"},
		// paths and dot segments
		{in: "http://example.com", want: "http://example.com/"},
		{in: "http://example.com/a/./b/../c", want: "http://example.com/a/c"},
		{in: "http://example.com/a/b/..", want: "http://example.com/a/"},
		{in: "http://example.com/a/b/.", want: "http://example.com/a/b/"},
		{in: "http://example.com/../../a", want: "http://example.com/a"},
		{in: "http://example.com/..", want: "http://example.com/"},
		{in: "http://example.com/a/%2E%2E/b", want: "http://example.com/b"},
		{in: "http://example.com/a/%2e/b", want: "http://example.com/a/b"},
		{in: "http://example.com/a/.../b", want: "http://example.com/a/.../b"},
		{in: "http://example.com/a/..b/c", want: "http://example.com/a/..b/c"},
		{in: "http://example.com//a//b", want: "http://example.com//a//b"},
		{in: "http://example.com/a//../b", want: "http://example.com/a/b"},
		// percent-encoding
		{in: "http://example.com/%7euser/%7E", want: "http://example.com/~user/~"},
		{in: "http://example.com/a%2fb%3F", want: "http://example.com/a%2Fb%3F"},
		{in: "http://example.com/%41%42%43%2D%5F", want: "http://example.com/ABC-_"},
		{in: "http://example.com/a b", want: "http://example.com/a%20b"},
		{in: "http://example.com/ü", want: "http://example.com/%C3%BC"},
		{in: "http://example.com/\xff\xfe", want: "http://example.com/%FF%FE"},
		{in: "http://example.com/100%", want: "http://example.com/100%25"},
		{in: "http://example.com/%zz%4", want: "http://example.com/%25zz%254"},
		{in: "http://example.com/%25", want: "http://example.com/%25"},
		{in: "http://example.com/a|b^c{d}`\"<>", want: "http://example.com/a%7Cb%5Ec%7Bd%7D%60%22%3C%3E"},
		{in: "http://example.com/[x]", want: "http://example.com/%5Bx%5D"},
		{in: "http://example.com/!$&'()*+,;=:@", want: "http://example.com/!$&'()*+,;=:@"},
		{in: "http://example.com/a\x01b", want: "http://example.com/a%01b"},
		// query
		{in: "http://example.com/?", want: "http://example.com/"},
		{in: "http://example.com/p?#frag", want: "http://example.com/p"},
		{in: "http://example.com/?b=2&a=1", want: "http://example.com/?a=1&b=2"}, // scope.canonical.sort_query
		{in: "http://example.com/?a=1&&b", want: "http://example.com/?a=1&b"},
		{in: "http://example.com/?q=a b+c", want: "http://example.com/?q=a%20b+c"},
		{in: "http://example.com/?q=%7e%2f?/", want: "http://example.com/?q=~%2F?/"},
		{in: "http://example.com/?a[]=1", want: "http://example.com/?a%5B%5D=1"},
		{in: `http://example.com/a\b?c\d`, want: "http://example.com/a/b?c%5Cd"},
		{in: "http://example.com/?q=./../", want: "http://example.com/?q=./../"},
		// fragment
		{in: "http://example.com/a#b", want: "http://example.com/a"},
		{in: "http://example.com/a#b?c", want: "http://example.com/a"},
		{in: "http://example.com#", want: "http://example.com/"},
		// length
		{in: long, want: long},
		{in: long + "a", err: ErrTooLong},
		{in: long + "#" + strings.Repeat("f", 5000), want: long},
		{in: "http://example.com/" + strings.Repeat("%41", 600), want: "http://example.com/" + strings.Repeat("A", 600)},
	}
	for _, tt := range tests {
		got, err := Normalize(tt.in)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Normalize(%q) = %q, %v; want error %v", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			continue
		}
		again, err := Normalize(got)
		if err != nil || again != got {
			t.Errorf("not idempotent: Normalize(%q) = %q, %v", got, again, err)
		}
		checkURLRoundTrip(t, got)
	}
}

// checkURLRoundTrip checks that net/url reads a normalized URL back unchanged
// (scope regexps and the client see exactly the normalized string).
func checkURLRoundTrip(t *testing.T, norm string) {
	t.Helper()
	u, err := url.Parse(norm)
	if err != nil {
		t.Errorf("url.Parse(%q): %v", norm, err)
		return
	}
	if s := u.String(); s != norm {
		t.Errorf("url.Parse(%q).String() = %q", norm, s)
	}
	if again, err := Normalize(u.String()); err != nil || again != norm {
		t.Errorf("Normalize(url.Parse(%q).String()) = %q, %v", norm, again, err)
	}
}

func TestResolve(t *testing.T) {
	base, _ := url.Parse("http://a.example/b/c/d;p?q")
	tests := []struct {
		ref, want string
		err       error
	}{
		// RFC 3986 §5.4.1 normal examples (with base host a.example)
		{"g", "http://a.example/b/c/g", nil},
		{"./g", "http://a.example/b/c/g", nil},
		{"g/", "http://a.example/b/c/g/", nil},
		{"/g", "http://a.example/g", nil},
		{"//g", "http://g/", nil},
		{"?y", "http://a.example/b/c/d;p?y", nil},
		{"g?y", "http://a.example/b/c/g?y", nil},
		{"#s", "http://a.example/b/c/d;p?q", nil},
		{"g#s", "http://a.example/b/c/g", nil},
		{"g?y#s", "http://a.example/b/c/g?y", nil},
		{";x", "http://a.example/b/c/;x", nil},
		{"g;x", "http://a.example/b/c/g;x", nil},
		{"", "http://a.example/b/c/d;p?q", nil},
		{".", "http://a.example/b/c/", nil},
		{"./", "http://a.example/b/c/", nil},
		{"..", "http://a.example/b/", nil},
		{"../", "http://a.example/b/", nil},
		{"../g", "http://a.example/b/g", nil},
		{"../..", "http://a.example/", nil},
		{"../../g", "http://a.example/g", nil},
		// §5.4.2 abnormal examples
		{"../../../g", "http://a.example/g", nil},
		{"../../../../g", "http://a.example/g", nil},
		{"/./g", "http://a.example/g", nil},
		{"/../g", "http://a.example/g", nil},
		{"g.", "http://a.example/b/c/g.", nil},
		{".g", "http://a.example/b/c/.g", nil},
		{"g..", "http://a.example/b/c/g..", nil},
		{"..g", "http://a.example/b/c/..g", nil},
		{"./../g", "http://a.example/b/g", nil},
		{"./g/.", "http://a.example/b/c/g/", nil},
		{"g/./h", "http://a.example/b/c/g/h", nil},
		{"g/../h", "http://a.example/b/c/h", nil},
		{"g;x=1/./y", "http://a.example/b/c/g;x=1/y", nil},
		{"g;x=1/../y", "http://a.example/b/c/y", nil},
		{"g?y/./x", "http://a.example/b/c/g?y/./x", nil},
		{"g#s/../x", "http://a.example/b/c/g", nil},
		{"http:g", "http://a.example/b/c/g", nil}, // browsers: same-scheme relative
		{"https:g", "https://g/", nil},
		// whitespace, entities already decoded, odd input
		{"  /x y  ", "http://a.example/x%20y", nil},
		{"\n/x\ty\n", "http://a.example/xy", nil},
		{`\\other.example\p`, "http://other.example/p", nil},
		{"///other.example/p", "http://other.example/p", nil},
		{"HTTPS://Other.Example:443/p?a=1&b=2", "https://other.example/p?a=1&b=2", nil},
		{"?", "http://a.example/b/c/d;p", nil},
		{"ü", "http://a.example/b/c/%C3%BC", nil},
		// skipped schemes
		{"javascript:void(0)", "", ErrScheme},
		{" JavaScript:alert(1)", "", ErrScheme},
		{"mailto:x@y.z", "", ErrScheme},
		{"data:text/html,hi", "", ErrScheme},
		{"tel:+123", "", ErrScheme},
		{"ftp://x/", "", ErrScheme},
		{"//", "", ErrHost},
		{"http://", "", ErrHost},
		{"//h:99999/", "", ErrPort},
	}
	for _, tt := range tests {
		got, err := Resolve(base, tt.ref)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Resolve(%q) = %q, %v; want error %v", tt.ref, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.ref, got, err, tt.want)
		}
	}
	// no base: only absolute references resolve
	if _, err := Resolve(nil, "/x"); !errors.Is(err, ErrRelative) {
		t.Errorf("Resolve(nil, /x): err %v, want ErrRelative", err)
	}
	if got, err := Resolve(nil, "http://x.example/"); err != nil || got != "http://x.example/" {
		t.Errorf("Resolve(nil, abs) = %q, %v", got, err)
	}
	// a non-http base makes relative references unresolvable
	ftp, _ := url.Parse("ftp://x.example/a/")
	if _, err := Resolve(ftp, "b"); !errors.Is(err, ErrRelative) {
		t.Errorf("Resolve(ftp base, b): err %v, want ErrRelative", err)
	}
	// an unnormalized base is normalized first
	odd, _ := url.Parse("HTTP://u:p@X.Example:80/a/./b/c")
	if got, err := Resolve(odd, "d"); err != nil || got != "http://x.example/a/b/d" {
		t.Errorf("Resolve(odd base, d) = %q, %v", got, err)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"http://example.com/", "HTTPS://Ex.COM:443/a/../b?x=1#f", "http://[::1]:80/%7e",
		"http://bücher.example/ä?ö#ü", "http://a/%2e%2E/./x/..", "http:\\\\x\\y", "http://a:b@c:0d/",
		"http://x/%", "http://x/%%41", "  http://x/ a\tb\n", "http://x/?", "http://ex%41mple.com/",
		"http://例え.テスト/", "http://x./..%2F..", "http://[fe80::1%25x]/", "javascript:x", "http:x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Normalize(s)
		if err != nil {
			return
		}
		if len(n) > MaxURLLength {
			t.Fatalf("Normalize(%q) = %q: longer than MaxURLLength", s, n)
		}
		if !utf8.ValidString(n) || strings.ContainsAny(n, " #\\\t\n\x00") {
			t.Fatalf("Normalize(%q) = %q: bad characters", s, n)
		}
		again, err := Normalize(n)
		if err != nil || again != n {
			t.Fatalf("not idempotent: Normalize(%q) = %q; Normalize(%q) = %q, %v", s, n, n, again, err)
		}
		checkURLRoundTrip(t, n)
		// resolving the normalized URL against itself or as absolute is stable
		u, err := url.Parse(n)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", n, err)
		}
		if r, err := Resolve(u, ""); err != nil || r != n {
			t.Fatalf("Resolve(%q, \"\") = %q, %v", n, r, err)
		}
		if r, err := Resolve(nil, s); err != nil || r != n {
			t.Fatalf("Resolve(nil, %q) = %q, %v; want %q", s, r, err, n)
		}
	})
}
