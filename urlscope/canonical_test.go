package urlscope

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/phasecrawl/phasecrawl/config"
)

// withCanonical runs f with c in effect and restores the default after.
func withCanonical(t *testing.T, c CanonicalConfig, f func()) {
	t.Helper()
	if err := SetCanonical(c); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := SetCanonical(DefaultCanonical()); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}

// TestCanonicalDefault checks Normalize with the default scope.canonical
// against testdata/canonical/default.txt, and that the result is stable.
func TestCanonicalDefault(t *testing.T) {
	f, err := os.Open("testdata/canonical/default.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		in, want, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		want = strings.TrimLeft(want, "\t")
		n++
		got, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
			continue
		}
		if again, err := Normalize(got); err != nil || again != got {
			t.Errorf("not idempotent: Normalize(%q) = %q, %v", got, again, err)
		}
		checkURLRoundTrip(t, got)
	}
	if n < 20 {
		t.Fatalf("only %d cases read", n)
	}
}

// TestCanonicalConfigured checks other scope.canonical settings and that
// Resolve (link extraction) applies them as Normalize does.
func TestCanonicalConfigured(t *testing.T) {
	tests := []struct {
		name string
		c    CanonicalConfig
		in   string
		want string
	}{
		{"off keeps everything", CanonicalConfig{}, "http://e.com/p;jsessionid=1?utm_source=x&b=1&a=2", "http://e.com/p;jsessionid=1?utm_source=x&b=1&a=2"},
		{"off still drops empty query", CanonicalConfig{}, "http://e.com/p?", "http://e.com/p"},
		{"own list", CanonicalConfig{StripParams: []string{"ref", "trk*"}}, "http://e.com/p?ref=a&trkid=3&sid=5", "http://e.com/p?sid=5"},
		{"own list without sort", CanonicalConfig{StripParams: []string{"ref"}}, "http://e.com/p?z=1&ref=a&a=3", "http://e.com/p?z=1&a=3"},
		{"sort only", CanonicalConfig{SortQuery: true}, "http://e.com/p?utm_source=x&b=1&a=2", "http://e.com/p?a=2&b=1&utm_source=x"},
		{"all stripped", CanonicalConfig{StripParams: []string{"*x"}}, "http://e.com/p?*x=1", "http://e.com/p?*x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "all stripped" {
				if err := SetCanonical(tt.c); err == nil {
					t.Fatal("SetCanonical accepted a name with * inside")
				} else if !strings.Contains(err.Error(), "scope.canonical.strip_params[0]") {
					t.Fatalf("error %q does not name the key", err)
				}
				return
			}
			withCanonical(t, tt.c, func() {
				got, err := Normalize(tt.in)
				if err != nil || got != tt.want {
					t.Errorf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
				}
				b, _ := NewBase("http://e.com/dir/")
				if r, err := b.Resolve(tt.in); err != nil || r != tt.want {
					t.Errorf("resolve(%q) = %q, %v; want %q", tt.in, r, err, tt.want)
				}
			})
		})
	}
}

// TestCanonicalRelativeLinks: a session id added to relative links of a
// page is removed when the links are resolved (the page's other links and
// the page itself have one URL).
func TestCanonicalRelativeLinks(t *testing.T) {
	b, err := NewBase("http://shop.example/cat/list;jsessionid=AB12?PHPSESSID=77&page=2")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "http://shop.example/cat/list?page=2" {
		t.Errorf("base = %q", got)
	}
	for ref, want := range map[string]string{
		"item;jsessionid=AB12?id=3&sid=9":  "http://shop.example/cat/item?id=3",
		"?page=3&utm_medium=x&sessionid=1": "http://shop.example/cat/list?page=3",
		"":                                 "http://shop.example/cat/list?page=2",
	} {
		if got, err := b.Resolve(ref); err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
}

// TestCanonicalConfigDefault: the configuration's default
// scope.canonical is fetch's default.
func TestCanonicalConfigDefault(t *testing.T) {
	c := config.Default().Scope.Canonical
	if !slices.Equal(c.StripParams, DefaultStripParams) || !c.SortQuery {
		t.Errorf("config default %+v, fetch default %v", c, DefaultStripParams)
	}
	d := config.Default().Scope
	if got := (TrapConfig{MaxSegmentRepeats: d.MaxSegmentRepeats, MaxPathDepth: d.MaxPathDepth, MaxQueryParams: d.MaxQueryParams,
		MaxPatternDepth: d.MaxPatternDepth, MaxQuerySets: d.MaxQuerySets}); got != DefaultTraps() {
		t.Errorf("config trap defaults %+v, fetch %+v", got, DefaultTraps())
	}
}
