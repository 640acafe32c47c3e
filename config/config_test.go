package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsValidate(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.Data != "./phasecrawl-data" || c.HTTP != "127.0.0.1:7070" || c.Delay != time.Second {
		t.Fatalf("defaults changed: data=%q http=%q delay=%s", c.Data, c.HTTP, c.Delay)
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	yml := "delay: 3s\nworkers: 7\nuser_agent: fromfile\nseeds: [http://a.example/]\nbucket:\n  rows: 12\n"
	if err := os.WriteFile(file, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(Config) string
		wantErr string
	}{
		{"file only", []string{"--config", file}, nil, func(c Config) string {
			if c.Delay != 3*time.Second || c.Workers != 7 || c.Bucket.Rows != 12 || c.UserAgent != "fromfile" {
				return "file values not applied"
			}
			return ""
		}, ""},
		{"flag beats file", []string{"--config=" + file, "--delay", "2s", "--seed", "http://b.example/"}, nil, func(c Config) string {
			if c.Delay != 2*time.Second || c.Workers != 7 {
				return "flag did not override file"
			}
			if len(c.Seeds) != 2 {
				return "seed flag should add to file seeds"
			}
			return ""
		}, ""},
		{"env beats flag", []string{"--config", file, "--delay", "2s"}, map[string]string{"PHASECRAWL_DELAY": "5s", "PHASECRAWL_BUCKET_ROWS": "5", "PHASECRAWL_SCOPE_ALLOW_DOMAINS": "x.test, y.test"}, func(c Config) string {
			if c.Delay != 5*time.Second || c.Bucket.Rows != 5 || len(c.Scope.AllowDomains) != 2 {
				return "env did not override"
			}
			return ""
		}, ""},
		{"bad env names key", nil, map[string]string{"PHASECRAWL_WORKERS": "many"}, nil, "workers"},
		{"politeness flags", []string{"--politeness-key", "domain", "--delay-factor", "2.5", "--private-suffix", "a.test", "--private-suffix", "b.test", "--max-hosts-per-domain", "50"}, nil, func(c Config) string {
			if c.Politeness.Key != "domain" || c.Politeness.DelayFactor != 2.5 || len(c.Scope.PrivateSuffixes) != 2 || c.Scope.MaxHostsPerDomain != 50 {
				return fmt.Sprintf("politeness flags not applied: %+v %+v", c.Politeness, c.Scope)
			}
			return ""
		}, ""},
		{"politeness env", nil, map[string]string{"PHASECRAWL_POLITENESS_KEY": "domain", "PHASECRAWL_SCOPE_PRIVATE_SUFFIXES": "a.test,b.test"}, func(c Config) string {
			if c.Politeness.Key != "domain" || len(c.Scope.PrivateSuffixes) != 2 || c.Scope.MaxHostsPerDomain != 1000 || c.Politeness.DelayFactor != 0 {
				return fmt.Sprintf("politeness env not applied, or defaults wrong: %+v %+v", c.Politeness, c.Scope)
			}
			return ""
		}, ""},
		{"bad politeness key", []string{"--politeness-key", "ip"}, nil, nil, `politeness.key="ip": must be host or domain`},
		{"bad delay factor", []string{"--delay-factor", "-1"}, nil, nil, "politeness.delay_factor=-1: must be in 0..100"},
		{"bad max hosts per domain", []string{"--max-hosts-per-domain", "-1"}, nil, nil, "scope.max_hosts_per_domain=-1: must be in 0..1000000"},
		{"range names key", []string{"--workers", "0"}, nil, nil, "workers=0: must be in 1..4096"},
		{"bucket columns not prime", nil, map[string]string{"PHASECRAWL_BUCKET_COLUMNS": "2000"}, nil, "bucket.columns"},
		{"unknown yaml key", []string{"--config", writeFile(t, dir, "bad.yaml", "delya: 1s\n")}, nil, nil, "delya"},
		{"missing file", []string{"--config", filepath.Join(dir, "nope.yaml")}, nil, nil, "nope.yaml"},
		{"bad log format", []string{"--log-format", "xml"}, nil, nil, "log.format"},
		{"canonical from yaml", []string{"--config", writeFile(t, dir, "canon.yaml", "scope:\n  canonical:\n    strip_params: [ref, trk*]\n    sort_query: false\n  max_pattern_depth: 4\n")}, nil, func(c Config) string {
			if len(c.Scope.Canonical.StripParams) != 2 || c.Scope.Canonical.SortQuery || c.Scope.MaxPatternDepth != 4 {
				return fmt.Sprintf("scope.canonical %+v, max_pattern_depth %d", c.Scope.Canonical, c.Scope.MaxPatternDepth)
			}
			return ""
		}, ""},
		{"canonical off from env", nil, map[string]string{"PHASECRAWL_SCOPE_CANONICAL_SORT_QUERY": "false", "PHASECRAWL_SCOPE_MAX_QUERY_SETS": "0"}, func(c Config) string {
			if c.Scope.Canonical.SortQuery || c.Scope.MaxQuerySets != 0 || len(c.Scope.Canonical.StripParams) == 0 {
				return fmt.Sprintf("scope %+v", c.Scope)
			}
			return ""
		}, ""},
		{"trap limits default", nil, nil, func(c Config) string {
			s := c.Scope
			if s.MaxSegmentRepeats != 2 || s.MaxPathDepth != 20 || s.MaxQueryParams != 16 || s.MaxPatternDepth != 10 || s.MaxQuerySets != 32 || !s.Canonical.SortQuery {
				return fmt.Sprintf("scope %+v", s)
			}
			return ""
		}, ""},
		{"bad strip param names key", []string{"--config", writeFile(t, dir, "canonbad.yaml", "scope:\n  canonical:\n    strip_params: [\"a=b\"]\n")}, nil, nil, "scope.canonical.strip_params[0]"},
		{"trap limit range names key", []string{"--max-pattern-depth", "-1"}, nil, nil, "scope.max_pattern_depth=-1: must be in 0..100000"},
		{"bad warc compression", nil, map[string]string{"PHASECRAWL_WARC_COMPRESSION": "zstd"}, nil, `warc.compression="zstd": must be responses or all`},
		{"warc compression all", nil, map[string]string{"PHASECRAWL_WARC_COMPRESSION": "all"}, func(c Config) string {
			if c.WARC.Compression != WARCCompressAll {
				return "warc.compression not applied: " + c.WARC.Compression
			}
			return ""
		}, ""},
		{"bad warc compression level", nil, map[string]string{"PHASECRAWL_WARC_COMPRESSION_LEVEL": "0"}, nil, `warc.compression_level=0: must be -2 (Huffman only) or 1..9`},
		{"warc compression level", nil, map[string]string{"PHASECRAWL_WARC_COMPRESSION_LEVEL": "1"}, func(c Config) string {
			if c.WARC.CompressionLevel != 1 {
				return "warc.compression_level not applied: " + strconv.Itoa(c.WARC.CompressionLevel)
			}
			return ""
		}, ""},
		{"stray arg", []string{"oops"}, nil, nil, "unexpected argument"},
		{"bad resolve", []string{"--resolve", "nope"}, nil, nil, "resolve[0]"},
		{"cluster flags", []string{"--gossip", "127.0.0.2:7946", "--join", "127.0.0.3:7946,127.0.0.4", "--join", "127.0.0.5:1",
			"--cluster-key-file", "k", "--phases", "4", "--phase-duration", "2s", "--ntp", "a", "--ntp", "b:123"}, nil, func(c Config) string {
			k := c.Cluster
			if !k.Enabled() || len(k.Join) != 3 || k.Phases != 4 || k.PhaseDuration != 2*time.Second || len(k.NTP) != 2 || k.KeyFile != "k" {
				return "cluster flags not applied"
			}
			if k.PhaseGuard() != 250*time.Millisecond {
				return "auto guard: " + k.PhaseGuard().String()
			}
			if g := (Cluster{PhaseDuration: 800 * time.Millisecond}).PhaseGuard(); g != 200*time.Millisecond {
				return "auto guard of 800ms phases: " + g.String()
			}
			if g := Default().Cluster.PhaseGuard(); g != 250*time.Millisecond {
				return "auto guard of the shipped 30s phases: " + g.String()
			}
			if k.ExchangeAddr() != "127.0.0.2:7947" {
				return "default exchange address: " + k.ExchangeAddr()
			}
			return ""
		}, ""},
		{"cluster env", nil, map[string]string{"PHASECRAWL_CLUSTER_GOSSIP": "127.0.0.2:0", "PHASECRAWL_CLUSTER_KEY_FILE": "k",
			"PHASECRAWL_CLUSTER_EXCHANGE": "127.0.0.2:9000", "PHASECRAWL_CLUSTER_GUARD": "1s"}, func(c Config) string {
			if c.Cluster.ExchangeAddr() != "127.0.0.2:9000" || c.Cluster.PhaseGuard() != time.Second || c.Cluster.Join != nil {
				return "cluster env not applied"
			}
			return ""
		}, ""},
		{"single node default", nil, nil, func(c Config) string {
			if c.Cluster.Enabled() || c.Cluster.Phases != 1 || c.Cluster.PhaseDuration != 30*time.Second {
				return "cluster defaults changed"
			}
			return ""
		}, ""},
		{"cluster key required", []string{"--gossip", "127.0.0.1:7946"}, nil, nil, "cluster.key_file"},
		{"cluster phases range", []string{"--phases", "0"}, nil, nil, "cluster.phases=0: must be in 1..65536"},
		{"cluster phase duration range", []string{"--phase-duration", "10ms"}, nil, nil, "cluster.phase_duration=10ms"},
		{"cluster guard range", []string{"--phase-duration", "2s"}, map[string]string{"PHASECRAWL_CLUSTER_GUARD": "1500ms"}, nil, "cluster.guard=1.5s"},
		{"cluster takeover range", nil, map[string]string{"PHASECRAWL_CLUSTER_TAKEOVER_AFTER": "25h"}, nil, "cluster.takeover_after=25h0m0s: must be in 0..24h"},
		{"cluster takeover env", nil, map[string]string{"PHASECRAWL_CLUSTER_TAKEOVER_AFTER": "0s"}, func(c Config) string {
			if c.Cluster.TakeoverAfter != 0 {
				return "takeover_after " + c.Cluster.TakeoverAfter.String() + ", want 0"
			}
			return ""
		}, ""},
		{"cluster fence_after range", nil, map[string]string{"PHASECRAWL_CLUSTER_FENCE_AFTER": "50ms"}, nil, "cluster.fence_after=50ms: must be in 100ms..10m"},
		{"cluster reconnect_interval range", nil, map[string]string{"PHASECRAWL_CLUSTER_RECONNECT_INTERVAL": "2h"}, nil, "cluster.reconnect_interval=2h0m0s: must be in 100ms..1h"},
		{"cluster reconnect_timeout range", nil, map[string]string{"PHASECRAWL_CLUSTER_RECONNECT_TIMEOUT": "-1s"}, nil, "cluster.reconnect_timeout=-1s: must be in 0..8760h"},
		{"cluster partition defaults", nil, nil, func(c Config) string {
			if k := c.Cluster; k.FenceAfter != 5*time.Second || k.ReconnectInterval != 10*time.Second || k.ReconnectTimeout != 24*time.Hour {
				return fmt.Sprintf("fence_after %s, reconnect_interval %s, reconnect_timeout %s; want 5s, 10s, 24h", k.FenceAfter, k.ReconnectInterval, k.ReconnectTimeout)
			}
			return ""
		}, ""},
		{"dead-link and back-off defaults", nil, nil, func(c Config) string {
			if f := c.Fetch; f.InactiveLane(c.Workers) != 25 || f.AdaptiveTimeouts || !f.AdaptiveConnect || f.AdaptiveFactor != 4 || f.AdaptiveFloor != 250*time.Millisecond ||
				f.BackoffMax != 10*time.Minute || f.ParkAfter != 6 || f.ParkDuration != time.Hour {
				return fmt.Sprintf("lane %d adaptive %v connect %v ×%d floor %s backoff_max %s park %d/%s", f.InactiveLane(c.Workers), f.AdaptiveTimeouts, f.AdaptiveConnect, f.AdaptiveFactor, f.AdaptiveFloor, f.BackoffMax, f.ParkAfter, f.ParkDuration)
			}
			return ""
		}, ""},
		{"inactive_workers range", nil, map[string]string{"PHASECRAWL_FETCH_INACTIVE_WORKERS": "-2"}, nil, "fetch.inactive_workers=-2: must be in -1..4096"},
		{"adaptive_factor range", nil, map[string]string{"PHASECRAWL_FETCH_ADAPTIVE_FACTOR": "0"}, nil, "fetch.adaptive_factor=0: must be in 1..100"},
		{"adaptive_floor range", nil, map[string]string{"PHASECRAWL_FETCH_ADAPTIVE_FLOOR": "0s"}, nil, "fetch.adaptive_floor=0s: must be in 1ms..10m"},
		{"backoff_max range", nil, map[string]string{"PHASECRAWL_FETCH_BACKOFF_MAX": "100ms"}, nil, "fetch.backoff_max=100ms: must be in 1s..24h"},
		{"park_after range", nil, map[string]string{"PHASECRAWL_FETCH_PARK_AFTER": "0"}, nil, "fetch.park_after=0: must be in 1..1000"},
		{"park_duration range", nil, map[string]string{"PHASECRAWL_FETCH_PARK_DURATION": "200h"}, nil, "fetch.park_duration=200h0m0s: must be in 1s..168h"},
		{"adaptive from env", nil, map[string]string{"PHASECRAWL_FETCH_ADAPTIVE_TIMEOUTS": "true", "PHASECRAWL_FETCH_ADAPTIVE_CONNECT": "false", "PHASECRAWL_FETCH_INACTIVE_WORKERS": "0"}, func(c Config) string {
			if !c.Fetch.AdaptiveTimeouts || c.Fetch.AdaptiveConnect || c.Fetch.InactiveLane(c.Workers) != 0 {
				return "fetch.adaptive_timeouts / adaptive_connect / inactive_workers not applied"
			}
			return ""
		}, ""},
		{"cluster bad join", []string{"--gossip", ":1", "--cluster-key-file", "k", "--join", "a:b:c"}, nil, nil, "cluster.join[0]"},
		{"cluster bad exchange", []string{"--gossip", ":1", "--cluster-key-file", "k", "--exchange", "nope"}, nil, nil, "cluster.exchange"},
		{"join without gossip", []string{"--join", "127.0.0.1:7946"}, nil, nil, "cluster.join: needs cluster.gossip"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, env(tc.env), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg := tc.check(c); msg != "" {
				t.Fatal(msg)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	_, err := Load([]string{"-h"}, nil, io.Discard)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
}

func TestKeysAndEnvNames(t *testing.T) {
	keys := Keys()
	want := map[string]bool{"delay": false, "bucket.columns": false, "scope.max_depth": false, "fetch.max_body_size": false}
	for _, k := range keys {
		if _, ok := want[k]; ok {
			want[k] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("key %s missing from Keys()", k)
		}
	}
	if got := EnvName("bucket.max_queue_wait"); got != "PHASECRAWL_BUCKET_MAX_QUEUE_WAIT" {
		t.Fatalf("EnvName = %s", got)
	}
}

func TestReadSeeds(t *testing.T) {
	dir := t.TempDir()
	c := Default()
	c.Seeds = []string{"http://a.example/"}
	c.SeedsFile = writeFile(t, dir, "seeds.txt", "# comment\n\nhttp://b.example/\n  http://c.example/x  \n")
	got, err := c.ReadSeeds()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "http://a.example/ http://b.example/ http://c.example/x" {
		t.Fatalf("seeds = %q", got)
	}
	c.SeedsFile = filepath.Join(dir, "missing")
	if _, err := c.ReadSeeds(); err == nil || !strings.Contains(err.Error(), "seeds_file") {
		t.Fatalf("err = %v, want it to name seeds_file", err)
	}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
