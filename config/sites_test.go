package config

import (
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
	cfg, err := load([]string{"--config", "c.yaml"}, nil, nil, func(string) ([]byte, error) { return []byte(file), nil })
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
