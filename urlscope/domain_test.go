package urlscope

import (
	"fmt"
	"strings"
	"testing"
)

func TestRegisteredDomain(t *testing.T) {
	d, err := NewDomains([]string{"synth.test", "*.Wild.Example", ".shop.co.uk"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dom  *Domains
		host string
		want string
	}{
		{nil, "www.example.com", "example.com"},
		{nil, "a.b.example.co.uk", "example.co.uk"},
		{nil, "example.com:8080", "example.com"},
		{nil, "WWW.Example.COM", "example.com"},
		{nil, "alice.github.io", "alice.github.io"}, // the list's private section
		{nil, "x.alice.github.io", "alice.github.io"},
		{nil, "a.b.synth.test", "synth.test"}, // .test is not listed: the default rule "*"
		{nil, "com", "com"},                   // a public suffix itself
		{nil, "localhost", "localhost"},
		{nil, "127.0.0.1:8080", "127.0.0.1"},
		{nil, "[::1]:8080", "[::1]"},
		{nil, "xn--bcher-kva.example", "xn--bcher-kva.example"},
		{d, "a.b.synth.test", "b.synth.test"},
		{d, "b.synth.test:81", "b.synth.test"},
		{d, "synth.test", "synth.test"},
		{d, "other.test", "other.test"},
		{d, "deep.a.wild.example", "a.wild.example"},
		{d, "a.b.shop.co.uk", "b.shop.co.uk"},
		{d, "www.example.com", "example.com"},
	}
	for _, tc := range tests {
		if got := tc.dom.Registered(tc.host); got != tc.want {
			t.Errorf("Registered(%q) with %v = %q, want %q", tc.host, tc.dom.Suffixes(), got, tc.want)
		}
	}
}

func TestNewDomainsErrors(t *testing.T) {
	for _, s := range []string{"", "http://x.test/", "a b", "1.2.3.4", "x.test:80"} {
		_, err := NewDomains([]string{"ok.test", s})
		if err == nil || !strings.Contains(err.Error(), "scope.private_suffixes[1]") {
			t.Errorf("NewDomains(%q) err = %v, want one naming scope.private_suffixes[1]", s, err)
		}
	}
}

func TestHostCap(t *testing.T) {
	d, err := NewDomains([]string{"synth.test"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		dom    *Domains
		max    int
		hosts  []string
		exempt map[string]bool
		want   string // one letter per host: y admitted, n refused
	}{
		{"unlimited", nil, 0, []string{"a.x.test", "b.x.test", "c.x.test"}, nil, "yyy"},
		{"cap 2", nil, 2, []string{"a.x.test", "b.x.test", "c.x.test", "a.x.test", "x.test"}, nil, "yynyn"},
		{"port ignored", nil, 1, []string{"a.x.test:80", "a.x.test:81", "b.x.test"}, nil, "yyn"},
		{"per domain", nil, 1, []string{"a.x.test", "a.y.test", "b.y.test", "b.x.test"}, nil, "yynn"},
		{"private suffix splits", d, 1, []string{"a.h1.synth.test", "h1.synth.test", "b.h1.synth.test", "h2.synth.test"}, nil, "ynny"},
		{"private suffix", d, 1, []string{"h1.synth.test", "h2.synth.test", "h3.synth.test"}, nil, "yyy"},
		{"exempt do not count", nil, 1, []string{"seed.x.test", "a.x.test", "b.x.test", "seed.x.test:8080"}, map[string]bool{"seed.x.test:80": true}, "yyny"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewHostCap(tc.dom, tc.max)
			for h := range tc.exempt {
				c.Exempt(h)
			}
			var got strings.Builder
			for _, h := range tc.hosts {
				fmt.Fprint(&got, map[bool]string{true: "y", false: "n"}[c.Admit(h)])
			}
			if got.String() != tc.want {
				t.Errorf("admitted %s, want %s", got.String(), tc.want)
			}
		})
	}
	var nilCap *HostCap
	if !nilCap.Admit("a.test") {
		t.Error("nil HostCap refused a host")
	}
}
