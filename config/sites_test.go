package config

import (
	"io"
	"strings"
	"testing"
)

func TestParseByteRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ByteRate
		err  bool
	}{
		{"0", 0, false},
		{"1500", 1500, false},
		{"64KB", 64000, false},
		{"2MB", 2000000, false},
		{"1.5MiB", 1572864, false},
		{"8KiB/s", 8192, false},
		{"1GB", 1000000000, false},
		{"fast", 0, true},
		{"-3MB", 0, true},
		{"", 0, true},
	} {
		got, err := ParseByteRate(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseByteRate(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSitesFromFile(t *testing.T) {
	const file = `
sites:
  - match: "docs.example.org"
    priority: 10
    revisit: 1h
    deadline: 20m
    bandwidth: 2MB
  - match: "*.example.org"
    revisit: 24h
`
	cfg, err := load([]string{"--config", "c.yaml"}, nil, nil, func(string) ([]byte, error) { return []byte(file), nil }, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := cfg.SiteFor("DOCS.example.org")
	if !ok || s.Priority != 10 || s.Bandwidth != 2000000 || s.Deadline.Minutes() != 20 {
		t.Fatalf("docs.example.org: got %+v, %v", s, ok)
	}
	s, ok = cfg.SiteFor("www.example.org")
	if !ok || s.Priority != 0 || s.Revisit.Hours() != 24 {
		t.Fatalf("www.example.org: got %+v, %v", s, ok)
	}
	if s, ok := cfg.SiteFor("docs.example.org:8443"); !ok || s.Priority != 10 {
		t.Fatalf("docs.example.org:8443 (a URL's host with its port): got %+v, %v", s, ok)
	}
	if _, ok := cfg.SiteFor("example.com"); ok {
		t.Fatal("example.com matched a site")
	}
}

func TestSitesValidate(t *testing.T) {
	cfg := Default()
	cfg.Sites = []Site{{Match: ""}, {Match: "[", Priority: 5000}, {Match: "a.org:80", Revisit: -1}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("bad sites passed validation")
	}
	for _, want := range []string{"sites[0].match: required", "sites[1].match=", "sites[1].priority=5000: must be in -1000..1000", "sites[2].match=", "sites[2].revisit=-1ns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestBandwidthSettings(t *testing.T) {
	file := func(s string) func(string) ([]byte, error) {
		return func(string) ([]byte, error) { return []byte(s), nil }
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name   string
		yaml   string
		args   []string
		env    map[string]string
		limit  ByteRate
		policy string
		err    string // a substring of the error; "" = none
	}{
		{name: "default", limit: 0, policy: "maxt"},
		{name: "scalar", yaml: "bandwidth: 2MB\n", limit: 2000000, policy: "maxt"},
		{name: "section", yaml: "bandwidth:\n  limit: 1.5MiB\n  policy: sumt\n", limit: 1572864, policy: "sumt"},
		{name: "flag", args: []string{"--bandwidth", "512KiB", "--bandwidth-policy", "sumt"}, limit: 524288, policy: "sumt"},
		{name: "flag over file", yaml: "bandwidth: 2MB\n", args: []string{"--bandwidth", "3MB"}, limit: 3000000, policy: "maxt"},
		{name: "env", env: map[string]string{"PHASECRAWL_BANDWIDTH": "64KB", "PHASECRAWL_BANDWIDTH_POLICY": "sumt"}, limit: 64000, policy: "sumt"},
		{name: "env limit key", env: map[string]string{"PHASECRAWL_BANDWIDTH_LIMIT": "1MB"}, limit: 1000000, policy: "maxt"},
		{name: "bad policy", yaml: "bandwidth:\n  policy: fastest\n", err: "bandwidth.policy"},
		{name: "unknown key", yaml: "bandwidth:\n  rate: 1MB\n", err: "bandwidth.rate"},
		{name: "bad rate", yaml: "bandwidth: fast\n", err: "bandwidth"},
		{name: "bad flag", args: []string{"--bandwidth", "-1MB"}, err: "bandwidth"},
		{name: "bad env", env: map[string]string{"PHASECRAWL_BANDWIDTH": "x"}, err: "PHASECRAWL_BANDWIDTH"},
	} {
		args := append([]string{"--data", t.TempDir()}, tc.args...)
		read := file("")
		if tc.yaml != "" {
			args = append([]string{"--config", "c.yaml"}, args...)
			read = file(tc.yaml)
		}
		cfg, err := load(args, env(tc.env), io.Discard, read, LoadOptions{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want one naming %s", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if cfg.Bandwidth.Limit != tc.limit || cfg.Bandwidth.Policy != tc.policy {
			t.Errorf("%s: bandwidth %+v, want limit %d policy %s", tc.name, cfg.Bandwidth, tc.limit, tc.policy)
		}
	}
}
