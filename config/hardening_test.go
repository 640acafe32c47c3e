package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"
)

func TestHardeningKeys(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		yaml    string
		check   func(Config) string
		wantErr string
	}{
		{"defaults", nil, nil, "", func(c Config) string {
			f := c.Fetch
			if f.MinRate != 512 || f.RateWindow != 5*time.Second || f.MaxRedirects != 10 || f.MaxOutlinks != 10000 || c.APITokenFile != "" {
				return fmt.Sprintf("defaults changed: %+v token %q", f, c.APITokenFile)
			}
			return ""
		}, ""},
		{"yaml", nil, nil, "fetch:\n  min_rate: 0\n  rate_window: 1s\n  max_redirects: 3\n  max_outlinks: 0\napi_token_file: /t\n", func(c Config) string {
			f := c.Fetch
			if f.MinRate != 0 || f.RateWindow != time.Second || f.MaxRedirects != 3 || f.MaxOutlinks != 0 || c.APITokenFile != "/t" {
				return fmt.Sprintf("yaml not applied: %+v", f)
			}
			return ""
		}, ""},
		{"env", nil, map[string]string{"PHASECRAWL_FETCH_MIN_RATE": "100", "PHASECRAWL_API_TOKEN_FILE": "/tok"}, "", func(c Config) string {
			if c.Fetch.MinRate != 100 || c.APITokenFile != "/tok" {
				return "env not applied"
			}
			return ""
		}, ""},
		{"flag", []string{"--api-token-file", "/f", "--http", "0.0.0.0:7070"}, nil, "", func(c Config) string {
			if c.APITokenFile != "/f" || c.HTTP != "0.0.0.0:7070" {
				return "flag not applied"
			}
			return ""
		}, ""},
		{"allow_link_local default", []string{"--allow-private"}, nil, "", func(c Config) string {
			if !c.AllowPrivate || c.Fetch.AllowLinkLocal {
				return fmt.Sprintf("allow_private %v allow_link_local %v, want true and false", c.AllowPrivate, c.Fetch.AllowLinkLocal)
			}
			return ""
		}, ""},
		{"allow_link_local yaml", nil, nil, "fetch: {allow_link_local: true}\n", func(c Config) string {
			if !c.Fetch.AllowLinkLocal || c.AllowPrivate {
				return "fetch.allow_link_local not applied (or allow_private set with it)"
			}
			return ""
		}, ""},
		{"allow_link_local flag", []string{"--allow-link-local"}, nil, "", func(c Config) string {
			if !c.Fetch.AllowLinkLocal {
				return "--allow-link-local not applied"
			}
			return ""
		}, ""},
		{"allow_link_local env", nil, map[string]string{"PHASECRAWL_FETCH_ALLOW_LINK_LOCAL": "true"}, "", func(c Config) string {
			if !c.Fetch.AllowLinkLocal {
				return "PHASECRAWL_FETCH_ALLOW_LINK_LOCAL not applied"
			}
			return ""
		}, ""},
		{"min_rate range", nil, map[string]string{"PHASECRAWL_FETCH_MIN_RATE": "-1"}, "", nil, "fetch.min_rate=-1"},
		{"rate_window range", nil, map[string]string{"PHASECRAWL_FETCH_RATE_WINDOW": "1ms"}, "", nil, "fetch.rate_window=1ms"},
		{"max_redirects range", nil, nil, "fetch: {max_redirects: 101}\n", nil, "fetch.max_redirects=101"},
		{"max_outlinks range", nil, nil, "fetch: {max_outlinks: -5}\n", nil, "fetch.max_outlinks=-5"},
		{"max_inflight_bytes default", nil, nil, "", func(c Config) string {
			if c.Fetch.MaxInflightBytes != 256<<20 {
				return fmt.Sprintf("max_inflight_bytes %d, want 256 MiB", c.Fetch.MaxInflightBytes)
			}
			return ""
		}, ""},
		{"max_inflight_bytes flag", []string{"--max-inflight-bytes", "1048576"}, nil, "fetch: {max_inflight_bytes: 5}\n", func(c Config) string {
			if c.Fetch.MaxInflightBytes != 1<<20 {
				return fmt.Sprintf("max_inflight_bytes %d, want the flag's 1048576", c.Fetch.MaxInflightBytes)
			}
			return ""
		}, ""},
		{"max_inflight_bytes off", nil, map[string]string{"PHASECRAWL_FETCH_MAX_INFLIGHT_BYTES": "0"}, "", func(c Config) string {
			if c.Fetch.MaxInflightBytes != 0 {
				return "env not applied"
			}
			return ""
		}, ""},
		{"max_inflight_bytes range", nil, nil, "fetch: {max_inflight_bytes: -1}\n", nil, "fetch.max_inflight_bytes=-1: must be in 0..1099511627776"},
		{"max_idle_conns range", nil, map[string]string{"PHASECRAWL_FETCH_MAX_IDLE_CONNS": "0"}, "", nil, "fetch.max_idle_conns=0"},
		{"max_idle_conns", nil, nil, "fetch: {max_idle_conns: 100}\n", func(c Config) string {
			if c.Fetch.MaxIdleConns != 100 {
				return fmt.Sprintf("max_idle_conns %d, want 100", c.Fetch.MaxIdleConns)
			}
			return ""
		}, ""},
		{"sitemaps value", nil, map[string]string{"PHASECRAWL_FETCH_SITEMAPS": "some"}, "", nil, "fetch.sitemaps=\"some\": must be robots, all or off"},
		{"requisites and sitemaps", []string{"--requisites", "--sitemaps", "all"}, nil, "", func(c Config) string {
			if !c.Fetch.Requisites || c.Fetch.Sitemaps != "all" {
				return fmt.Sprintf("requisites %v sitemaps %q", c.Fetch.Requisites, c.Fetch.Sitemaps)
			}
			return ""
		}, ""},
		{"requisites by env, sitemaps default", nil, map[string]string{"PHASECRAWL_FETCH_REQUISITES": "true"}, "", func(c Config) string {
			if !c.Fetch.Requisites || c.Fetch.Sitemaps != "robots" {
				return fmt.Sprintf("requisites %v sitemaps %q", c.Fetch.Requisites, c.Fetch.Sitemaps)
			}
			return ""
		}, ""},
		{"public http needs a token", []string{"--http", "0.0.0.0:7070"}, nil, "", nil, "api_token_file: required when http=\"0.0.0.0:7070\""},
		{"all interfaces needs a token", []string{"--http", ":7070"}, nil, "", nil, "api_token_file"},
		{"a name needs a token", []string{"--http", "crawler.example:7070"}, nil, "", nil, "api_token_file"},
		{"ipv6 loopback is fine", []string{"--http", "[::1]:7070"}, nil, "", func(Config) string { return "" }, ""},
		{"localhost is fine", []string{"--http", "localhost:7070"}, nil, "", func(Config) string { return "" }, ""},
		{"127.0.0.2 is fine", []string{"--http", "127.0.0.2:7070"}, nil, "", func(Config) string { return "" }, ""},
		// yaml type errors name the key, however deep.
		{"yaml type error names key", nil, nil, "fetch:\n  parser: fast\n  min_rate: lots\n", nil, "fetch.min_rate: line 3"},
		{"yaml duration names key", nil, nil, "delay: soon\n", nil, "delay: line 1"},
		{"yaml map for scalar names key", nil, nil, "workers:\n  a: 1\n", nil, "workers: line 2"},
		{"yaml seq item names key", nil, nil, "seeds:\n  - http://a/\n  - {x: 1}\n", nil, "seeds[1]: line 3"},
		{"yaml unknown nested key", nil, nil, "fetch:\n  min_rat: 5\n", nil, "fetch.min_rat: line 2"},
		{"yaml scalar for section", nil, nil, "fetch: 5\n", nil, "fetch: line 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			read := func(string) ([]byte, error) { return []byte(tc.yaml), nil }
			if tc.yaml != "" {
				args = append([]string{"--config", "c.yaml"}, args...)
			}
			c, err := load(args, env(tc.env), io.Discard, read, LoadOptions{})
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

func TestIsLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "127.9.9.9:1": true, "[::1]:7070": true, "localhost:1": true, "LOCALHOST.:1": true,
		"[::ffff:127.0.0.1]:1": true,
		"0.0.0.0:7070":         false, ":7070": false, "[::]:1": false, "10.0.0.1:1": false, "example.com:1": false, "nonsense": false,
	} {
		if got := IsLoopbackAddr(addr); got != want {
			t.Errorf("IsLoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

// fuzzNames are the words an error may use to name what it is about: every key, its
// environment variable and its flag.
func fuzzNames() []string {
	var names []string
	sections := map[string]bool{}
	for _, k := range Keys() {
		names = append(names, k, EnvName(k))
		if sec, _, ok := strings.Cut(k, "."); ok && !sections[sec] {
			sections[sec] = true
			names = append(names, sec) // "fetch: line 1: cannot unmarshal ..." names the section
		}
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c := Default()
	BindFlags(fs, &c)
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "-"+f.Name) })
	return names
}

// namesSomething reports whether msg names a key, variable or flag as a word of its own.
func namesSomething(msg string, names []string) bool {
	for _, n := range names {
		for i := 0; ; {
			j := strings.Index(msg[i:], n)
			if j < 0 {
				break
			}
			j += i
			before := j == 0 || strings.IndexByte("abcdefghijklmnopqrstuvwxyz_.ABCDEFGHIJKLMNOPQRSTUVWXYZ-", msg[j-1]) < 0
			end := j + len(n)
			after := end == len(msg) || strings.IndexByte("=:[ (,;\"", msg[end]) >= 0
			if before && after {
				return true
			}
			i = j + 1
		}
	}
	return false
}

// FuzzLoad feeds Load a YAML file, flags and PHASECRAWL_* variables. It must never panic, and
// every error must say what it is about: a key, its variable or flag, or the file (syntax).
func FuzzLoad(f *testing.F) {
	f.Add([]byte("delay: 3s\nworkers: 7\nbucket:\n  rows: 12\n"), "--delay\n2s", "workers=9")
	f.Add([]byte("fetch:\n  min_rate: x\n"), "", "")
	f.Add([]byte("seeds: [http://a/, {b: 1}]\n"), "--seed\nhttp://b/", "")
	f.Add([]byte("cluster:\n  gossip: 127.0.0.1:1\n  key_file: k\n  join: [a:b:c]\n"), "--phases\n3", "cluster.guard=1h")
	f.Add([]byte("- a\n- b\n"), "", "")
	f.Add([]byte("&a x: *a\n"), "", "")
	f.Add([]byte("bucket: {columns: 1999999999999}\n"), "--http\n0.0.0.0:1", "fetch.rate_window=0")
	f.Add([]byte(""), "--workers\nmany", "")
	f.Add([]byte("fetch:\n  min_rat: 5\n"), "-h", "")
	f.Add([]byte("delay: !!binary aGVsbG8=\n"), "--resolve\nnope", "scope.allow_domains=,,")
	f.Add([]byte("scope:\n  max_depth: 99999999999999999999\n"), "oops", "log.level=trace")
	names := fuzzNames()
	f.Fuzz(func(t *testing.T, yml []byte, argLines, envLines string) {
		var args []string
		if len(yml) > 0 {
			args = append(args, "--config", "fuzz.yaml")
		}
		if argLines != "" {
			args = append(args, strings.Split(argLines, "\n")...)
		}
		envs := map[string]string{}
		for _, l := range strings.Split(envLines, "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				if !strings.HasPrefix(k, EnvPrefix) {
					k = EnvName(strings.ToLower(k))
				}
				envs[k] = v
			}
		}
		read := func(p string) ([]byte, error) {
			if p == "fuzz.yaml" {
				return yml, nil
			}
			return nil, fs.ErrNotExist
		}
		c, err := load(args, env(envs), io.Discard, read, LoadOptions{})
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Load accepted a config that does not validate: %v", verr)
			}
			return
		}
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		msg := err.Error()
		switch {
		case namesSomething(msg, names):
		case strings.Contains(msg, " not found in type "): // an unknown key, named with its path
		case strings.Contains(msg, "mapping key \"") && strings.Contains(msg, "\" already defined at line "): // a repeated key, named (before an unknown one is reported)
		case strings.Contains(msg, "flag"), strings.Contains(msg, "unexpected argument"): // the flag package names the flag or argument
		case strings.Contains(msg, "fuzz.yaml: yaml:"), strings.Contains(msg, "into config.Config"): // syntax, or a file that is not a mapping
		case strings.Contains(msg, "read ") && strings.Contains(msg, "file does not exist"): // --config names a file that is not there
		default:
			t.Fatalf("error names no key: %v\nyaml=%q args=%q env=%q", err, yml, args, envs)
		}
	})
}
