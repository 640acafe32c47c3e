package urlscope

import (
	"net/url"
	"strings"
	"testing"
)

func TestScopeAllow(t *testing.T) {
	type check struct {
		url    string
		depth  int
		ok     bool
		reason string
	}
	tests := []struct {
		name   string
		cfg    ScopeConfig
		checks []check
	}{
		{"zero value allows all", ScopeConfig{}, []check{
			{"http://any.example/", 0, true, ""},
			{"https://x.y.z/a?b", 99999, true, ""},
		}},
		{"hosts exact", ScopeConfig{AllowHosts: []string{"Example.COM", " bücher.example ", "[::1]:8080", "ports.example:8443", "p80.example:80"}}, []check{
			{"http://example.com/", 0, true, ""},
			{"http://example.com:8080/x", 0, true, ""},
			{"http://www.example.com/", 0, false, "host"},
			{"http://badexample.com/", 0, false, "host"},
			{"http://xn--bcher-kva.example/", 0, true, ""},
			{"http://[::1]:8080/", 0, true, ""},
			{"http://[::1]/", 0, false, "host"},
			{"https://ports.example:8443/", 0, true, ""},
			{"https://ports.example/", 0, false, "host"},
			{"http://p80.example/", 0, true, ""},
			{"https://p80.example/", 0, false, "host"},
		}},
		{"domains", ScopeConfig{AllowDomains: []string{"example.com", "*.wild.example", ".dot.example"}}, []check{
			{"http://example.com/", 0, true, ""},
			{"http://www.example.com:81/", 0, true, ""},
			{"http://a.b.example.com/", 0, true, ""},
			{"http://badexample.com/", 0, false, "host"},
			{"http://example.com.evil.net/", 0, false, "host"},
			{"http://wild.example/", 0, true, ""},
			{"http://x.wild.example/", 0, true, ""},
			{"http://x.dot.example/", 0, true, ""},
		}},
		{"hosts and domains combine", ScopeConfig{AllowHosts: []string{"one.example"}, AllowDomains: []string{"two.example"}}, []check{
			{"http://one.example/", 0, true, ""},
			{"http://sub.one.example/", 0, false, "host"},
			{"http://sub.two.example/", 0, true, ""},
		}},
		{"depth", ScopeConfig{MaxDepth: 2}, []check{
			{"http://a.example/", 0, true, ""},
			{"http://a.example/", 2, true, ""},
			{"http://a.example/", 3, false, "depth"},
		}},
		{"include exclude", ScopeConfig{
			AllowDomains: []string{"example.com"},
			Include:      []string{`^https?://[^/]+/(docs|blog)/`, `\.html$`},
			Exclude:      []string{`[?&]ref=`, `/private/`},
			MaxDepth:     3,
		}, []check{
			{"http://example.com/docs/a", 0, true, ""},
			{"http://example.com/x/y.html", 0, true, ""},
			{"http://example.com/other", 0, false, "include"},
			{"http://example.com/docs/a?ref=1", 0, false, "exclude"},
			{"http://example.com/docs/private/x.html", 0, false, "exclude"},
			{"http://other.com/docs/a", 0, false, "host"},
			{"http://example.com/docs/a", 4, false, "depth"},
			{"http://other.com/private/", 9, false, "host"}, // host is checked first
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewScope(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.checks {
				n, err := Normalize(c.url)
				if err != nil {
					t.Fatal(err)
				}
				u, _ := url.Parse(n)
				ok, reason := s.Allow(u, c.depth)
				if ok != c.ok || reason != c.reason {
					t.Errorf("Allow(%s, %d) = %v, %q; want %v, %q", c.url, c.depth, ok, reason, c.ok, c.reason)
				}
			}
		})
	}
	s, _ := NewScope(ScopeConfig{})
	if ok, reason := s.Allow(nil, 0); ok || reason != "host" {
		t.Errorf("Allow(nil) = %v, %q", ok, reason)
	}
}

func TestNewScopeErrors(t *testing.T) {
	tests := []struct {
		cfg  ScopeConfig
		want string
	}{
		{ScopeConfig{Include: []string{"ok", "("}}, `scope.include[1]="("`},
		{ScopeConfig{Exclude: []string{"[a-"}}, `scope.exclude[0]="[a-"`},
		{ScopeConfig{MaxDepth: -1}, "scope.max_depth=-1"},
		{ScopeConfig{AllowHosts: []string{"http://example.com/"}}, "scope.allow_hosts[0]"},
		{ScopeConfig{AllowHosts: []string{"bad host"}}, "scope.allow_hosts[0]"},
		{ScopeConfig{AllowHosts: []string{"example.com:99999"}}, "scope.allow_hosts[0]"},
		{ScopeConfig{AllowHosts: []string{""}}, "scope.allow_hosts[0]"},
		{ScopeConfig{AllowDomains: []string{"example.com:80"}}, "scope.allow_domains[0]"},
		{ScopeConfig{AllowDomains: []string{"a_b.example", "x y"}}, "scope.allow_domains[1]"},
	}
	for _, tt := range tests {
		_, err := NewScope(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewScope(%+v) error %v; want it to contain %q", tt.cfg, err, tt.want)
		}
	}
}
