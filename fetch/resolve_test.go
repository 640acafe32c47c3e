package fetch

import (
	"strings"
	"testing"
)

func TestParseResolve(t *testing.T) {
	tests := []struct {
		in      string
		want    ResolveRule
		wantErr string
	}{
		{in: "*.synth.test=127.0.0.1:8080", want: ResolveRule{Pattern: "*.synth.test", Addr: "127.0.0.1:8080"}},
		{in: " Example.COM=10.0.0.1:80 ", want: ResolveRule{Pattern: "example.com", Addr: "10.0.0.1:80"}},
		{in: "*.synth.test:443=127.0.0.1:8443", want: ResolveRule{Pattern: "*.synth.test", Port: "443", Addr: "127.0.0.1:8443"}},
		{in: "*=[::1]:80", want: ResolveRule{Pattern: "*", Addr: "[::1]:80"}},
		{in: "[::1]:80=127.0.0.1:81", want: ResolveRule{Pattern: "::1", Port: "80", Addr: "127.0.0.1:81"}},
		{in: "::1=127.0.0.1:81", want: ResolveRule{Pattern: "::1", Addr: "127.0.0.1:81"}},
		{in: "[ab].test:80=h:1", want: ResolveRule{Pattern: "[ab].test", Port: "80", Addr: "h:1"}},
		{in: "a.test=backend.internal:9000", want: ResolveRule{Pattern: "a.test", Addr: "backend.internal:9000"}},
		{in: "a.test:80:127.0.0.1", wantErr: "missing '='"},
		{in: "=127.0.0.1:80", wantErr: "empty PATTERN"},
		{in: ":80=127.0.0.1:80", wantErr: "empty PATTERN host"},
		{in: "a.test:x=127.0.0.1:80", wantErr: "pattern port"},
		{in: "a.test:=127.0.0.1:80", wantErr: "pattern port"},
		{in: "[a-=127.0.0.1:80", wantErr: "bad glob"},
		{in: "a.test=127.0.0.1", wantErr: "target"},
		{in: "a.test=:80", wantErr: "empty target HOST"},
		{in: "a.test=h:0", wantErr: "target port"},
		{in: "a.test=h:70000", wantErr: "target port"},
	}
	for _, tt := range tests {
		got, err := ParseResolve(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--resolve") ||
				!strings.Contains(err.Error(), "PATTERN=HOST:PORT") {
				t.Errorf("ParseResolve(%q) err = %v, want one containing %q, --resolve and the form", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseResolve(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			continue
		}
		if again, err := ParseResolve(got.String()); err != nil || again != got {
			t.Errorf("String round trip of %+v: %+v, %v", got, again, err)
		}
	}
}

func TestResolveRuleMatch(t *testing.T) {
	rules := []ResolveRule{
		{Pattern: "*.synth.test", Addr: "127.0.0.1:1"},
		{Pattern: "special.test", Port: "8080", Addr: "127.0.0.1:2"},
		{Pattern: "h?.test", Addr: "127.0.0.1:3"},
		{Pattern: "::1", Addr: "127.0.0.1:4"},
		{Pattern: "*", Port: "9999", Addr: "127.0.0.1:5"},
	}
	tests := []struct {
		host, port, want string
	}{
		{"a.synth.test", "80", "127.0.0.1:1"},
		{"A.SYNTH.TEST", "443", "127.0.0.1:1"},
		{"a.synth.test.", "80", "127.0.0.1:1"},
		{"synth.test", "80", ""},                // * needs at least the dot label
		{"a.b.synth.test", "80", "127.0.0.1:1"}, // path.Match: * does not cross '/', dots are fine
		{"special.test", "8080", "127.0.0.1:2"},
		{"special.test", "80", ""},
		{"h1.test", "80", "127.0.0.1:3"},
		{"h12.test", "80", ""},
		{"::1", "80", "127.0.0.1:4"},
		{"anything.example", "9999", "127.0.0.1:5"},
		{"anything.example", "80", ""},
	}
	for _, tt := range tests {
		got, ok := resolveTarget(rules, tt.host, tt.port)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("resolveTarget(%q, %q) = %q, %v; want %q", tt.host, tt.port, got, ok, tt.want)
		}
	}
}
