package config

import (
	"strings"
	"testing"
	"time"
)

func TestRecrawlFromFileFlagAndSites(t *testing.T) {
	const file = `
recrawl:
  interval: 2h
  adaptive: true
  min_interval: 30m
  max_interval: 48h
sites:
  - match: "news.example.org"
    revisit: 10m
`
	read := func(string) ([]byte, error) { return []byte(file), nil }
	cfg, err := load([]string{"--config", "c.yaml"}, nil, nil, read, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Recrawl.Interval != 2*time.Hour || !cfg.Recrawl.Adaptive || cfg.Recrawl.MinInterval != 30*time.Minute || cfg.Recrawl.MaxInterval != 48*time.Hour {
		t.Fatalf("recrawl = %+v", cfg.Recrawl)
	}
	for _, tc := range []struct {
		host string
		want time.Duration
	}{{"news.example.org", 10 * time.Minute}, {"NEWS.example.org:8080", 10 * time.Minute}, {"docs.example.org", 2 * time.Hour}} {
		if got := cfg.RevisitFor(tc.host); got != tc.want {
			t.Errorf("RevisitFor(%q) = %s, want %s", tc.host, got, tc.want)
		}
	}
	cfg, err = load([]string{"--config", "c.yaml", "--revisit", "90s"}, nil, nil, read, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Recrawl.Interval != 90*time.Second {
		t.Fatalf("--revisit 90s: interval = %s", cfg.Recrawl.Interval)
	}
	if d := Default().Recrawl.Interval; d != 0 {
		t.Fatalf("default recrawl.interval = %s, want 0 (crawl once)", d)
	}
}

func TestRecrawlValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Recrawl
		want string
	}{
		{"negative interval", Recrawl{Interval: -time.Second}, "recrawl.interval=-1s: must be in 0s..8760h0m0s"},
		{"min above max", Recrawl{MinInterval: time.Hour, MaxInterval: time.Minute}, "recrawl.min_interval=1h0m0s: must not exceed recrawl.max_interval=1m0s"},
		{"too long max", Recrawl{MaxInterval: 9000 * time.Hour}, "recrawl.max_interval=9000h0m0s: must be in"},
	} {
		cfg := Default()
		cfg.Recrawl = tc.r
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}
