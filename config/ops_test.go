package config

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestOpsKeys: the crawl budget, proxy and DNS keys are read from flags,
// the file and the environment, and a bad value names its key and range.
func TestOpsKeys(t *testing.T) {
	c, err := Load([]string{"--max-pages", "500", "--max-duration", "90m", "--proxy", "http://u:p@proxy.test:3128"},
		env(map[string]string{"PHASECRAWL_DNS_SERVERS": "192.0.2.53, [2001:db8::53]:5353", "PHASECRAWL_DNS_MIN_TTL": "1s"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxPages != 500 || c.MaxDuration != 90*time.Minute || c.Fetch.Proxy != "http://u:p@proxy.test:3128" ||
		len(c.DNS.Servers) != 2 || c.DNS.MinTTL != time.Second || !c.DNS.Cache || c.DNS.MaxTTL != time.Hour {
		t.Fatalf("not applied: %+v %+v", c.MaxPages, c.DNS)
	}
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"negative max_pages", func(c *Config) { c.MaxPages = -1 }, "max_pages=-1: must be in 0..1000000000000"},
		{"negative max_duration", func(c *Config) { c.MaxDuration = -time.Second }, "max_duration=-1s: must be in 0s..8760h0m0s"},
		{"socks proxy", func(c *Config) { c.Fetch.Proxy = "socks5://p.test:1080" }, `fetch.proxy="socks5://p.test:1080": must be an http:// or https:// URL`},
		{"proxy without host", func(c *Config) { c.Fetch.Proxy = "http://" }, "fetch.proxy=\"http://\": must name the proxy's host"},
		{"proxy with a path", func(c *Config) { c.Fetch.Proxy = "http://p.test/x" }, "with no path"},
		{"proxy password not echoed", func(c *Config) { c.Fetch.Proxy = "ftp://u:secret@p.test" }, `fetch.proxy="ftp://u:xxxxx@p.test"`},
		{"min above max", func(c *Config) { c.DNS.MinTTL, c.DNS.MaxTTL = time.Hour, time.Minute }, "dns.max_ttl=1m0s: must be in 1h0m0s..24h0m0s"},
		{"bad server", func(c *Config) { c.DNS.Servers = []string{"1.2.3.4:99999"} }, `dns.servers[0]="1.2.3.4:99999"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.set(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("the proxy password is in the error: %v", err)
			}
		})
	}
	if got, err := DNSServerAddr("192.0.2.1"); err != nil || got != "192.0.2.1:53" {
		t.Fatalf("DNSServerAddr = %q, %v", got, err)
	}
}

// TestStorageMinFree: storage.min_free reads bytes with units or a share of
// the file system, from the file, the flag and the environment, and a bad
// value names the key and its range.
func TestStorageMinFree(t *testing.T) {
	const total = 1000 << 20
	for _, tc := range []struct {
		in   string
		want uint64
		err  string
	}{
		{"512MiB", 512 << 20, ""},
		{"2GB", 2e9, ""},
		{"1048576", 1 << 20, ""},
		{"0", 0, ""},
		{"5%", 50 << 20, ""},
		{" 10 % ", 100 << 20, ""},
		{"51%", 0, "storage.min_free=\"51%\": a share must be in 0%..50%"},
		{"-1", 0, "must be bytes (such as 512MiB, 2GB; 0..1PiB) or a share"},
		{"2PiB", 0, "must be bytes"},
		{"lots", 0, "must be bytes"},
		{"1MB/s", 0, "must be bytes"},
	} {
		got, err := Storage{MinFree: tc.in}.MinFreeBytes(total)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %d, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			c := Default()
			c.Storage.MinFree = tc.in
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "storage.min_free") {
				t.Errorf("%q: Validate = %v, want an error naming storage.min_free", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	if d := Default().Storage.MinFree; d != "128MiB" {
		t.Errorf("default storage.min_free %q, want 128MiB", d)
	}
	c, err := Load([]string{"--min-free", "5%"}, func(k string) (string, bool) { return "", false }, io.Discard)
	if err != nil || c.Storage.MinFree != "5%" {
		t.Fatalf("--min-free 5%%: %q, %v", c.Storage.MinFree, err)
	}
	c, err = Load(nil, func(k string) (string, bool) {
		if k == "PHASECRAWL_STORAGE_MIN_FREE" {
			return "1GiB", true
		}
		return "", false
	}, io.Discard)
	if err != nil || c.Storage.MinFree != "1GiB" {
		t.Fatalf("PHASECRAWL_STORAGE_MIN_FREE=1GiB: %q, %v", c.Storage.MinFree, err)
	}
}
