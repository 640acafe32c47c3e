package config

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Site holds the settings of the hosts that match one entry of the
// configuration file's sites: list. Sites are set in the file only (no flag,
// no environment variable); the first entry whose Match matches a host wins.
//
//	sites:
//	  - match: "*.example.org"
//	    priority: 10
//	    revisit: 1h
//	    deadline: 20m
//	    bandwidth: 2MB
type Site struct {
	// Match is a host glob (path.Match syntax, lower case, no port):
	// "docs.example.org", "*.example.org", "*". Required.
	Match string `yaml:"match"`
	// Priority orders the sites when due work exceeds capacity: higher is
	// served first. Default 0, valid -1000..1000.
	Priority int `yaml:"priority"`
	// Revisit is how long after a page was fetched it is due again. Default
	// 0: recrawl.interval. Valid 0..8760h.
	Revisit time.Duration `yaml:"revisit"`
	// Deadline is how long after the site's round starts it should be
	// done. Default 0: none. Valid 0..8760h.
	Deadline time.Duration `yaml:"deadline"`
	// Bandwidth pins the site's download rate, in bytes per second (units
	// KB, MB, GB, KiB, MiB, GiB accepted). Default 0: a share of the node's
	// budget.
	Bandwidth ByteRate `yaml:"bandwidth"`
}

// SiteFor returns the first entry of c.Sites whose Match matches host (a
// host name, any case; a port, as in a URL's host, is ignored), and whether
// there was one.
func (c Config) SiteFor(host string) (Site, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	for _, s := range c.Sites {
		if ok, _ := path.Match(s.Match, host); ok {
			return s, true
		}
	}
	return Site{}, false
}

// validateSites returns one message per bad field of c.Sites, naming the
// entry by its index and the key.
func (c Config) validateSites() []string {
	var errs []string
	for i, s := range c.Sites {
		key := fmt.Sprintf("sites[%d]", i)
		if strings.TrimSpace(s.Match) == "" {
			errs = append(errs, key+".match: required (a host glob such as *.example.org)")
		} else if _, err := path.Match(s.Match, "x"); err != nil || s.Match != strings.ToLower(s.Match) || strings.Contains(s.Match, ":") {
			errs = append(errs, fmt.Sprintf("%s.match=%q: must be a lower-case host glob without port (path.Match syntax)", key, s.Match))
		}
		if s.Priority < -1000 || s.Priority > 1000 {
			errs = append(errs, fmt.Sprintf("%s.priority=%d: must be in -1000..1000", key, s.Priority))
		}
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"revisit", s.Revisit}, {"deadline", s.Deadline}} {
			if d.v < 0 || d.v > 8760*time.Hour {
				errs = append(errs, fmt.Sprintf("%s.%s=%s: must be in 0..8760h", key, d.name, d.v))
			}
		}
		if s.Bandwidth < 0 {
			errs = append(errs, fmt.Sprintf("%s.bandwidth=%d: must be 0 (a share of the budget) or more bytes per second", key, s.Bandwidth))
		}
	}
	return errs
}

// ByteRate is a download rate in bytes per second. It reads from a plain
// number of bytes or a number with a unit: KB, MB, GB (powers of 1000) or
// KiB, MiB, GiB (powers of 1024), optionally followed by "/s".
type ByteRate int64

// ParseByteRate parses s as a ByteRate ("1500", "64KB", "2.5MiB/s").
func ParseByteRate(s string) (ByteRate, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "/s"), "ps")
	mult := 1.0
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult > 1<<62 {
		return 0, fmt.Errorf("%q: want bytes per second, such as 500000, 64KB, 2MB or 1.5MiB", s)
	}
	return ByteRate(v * mult), nil
}

// String formats r as bytes per second.
func (r ByteRate) String() string { return strconv.FormatInt(int64(r), 10) }

// Set implements flag.Value.
func (r *ByteRate) Set(s string) error {
	v, err := ParseByteRate(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *ByteRate) UnmarshalYAML(n *yaml.Node) error {
	return r.Set(n.Value)
}

// Bandwidth is the node's download budget: at most Limit bytes per second
// over all its fetches, shared among the sites by Policy (package
// bandwidth). In the file it is either a rate or a section:
//
//	bandwidth: 2MB
//
//	bandwidth:
//	  limit: 2MB
//	  policy: sumt
type Bandwidth struct {
	// Limit caps the node's download rate, in bytes per second (KB, MB,
	// KiB, MiB, ... accepted). Default 0: unlimited.
	Limit ByteRate `yaml:"limit"`
	// Policy shares the budget while every site's deadline can be met:
	// "maxt" (the latest completion as early as possible: the sites finish
	// together) or "sumt" (the least sum of completion times). When the
	// deadlines cannot all be met the least total lateness is used instead.
	// Default maxt.
	Policy string `yaml:"policy"`
}

// BandwidthPolicies are the values of bandwidth.policy.
var BandwidthPolicies = []string{"maxt", "sumt"}

// UnmarshalYAML implements yaml.Unmarshaler: a scalar is the limit, a
// mapping holds limit and policy.
func (b *Bandwidth) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if err := b.Limit.Set(n.Value); err != nil {
			return fmt.Errorf("line %d: bandwidth: %w", n.Line, err)
		}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: bandwidth.%s: want a scalar", v.Line, k.Value)
			}
			switch k.Value {
			case "limit":
				if err := b.Limit.Set(v.Value); err != nil {
					return fmt.Errorf("line %d: bandwidth.limit: %w", v.Line, err)
				}
			case "policy":
				b.Policy = v.Value
			default:
				return fmt.Errorf("line %d: bandwidth.%s: unknown key (want limit or policy)", k.Line, k.Value)
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: bandwidth: want a rate (2MB) or a section with limit and policy", n.Line)
}

// validateBandwidth returns one message per bad bandwidth key.
func (c Config) validateBandwidth() []string {
	var errs []string
	if c.Bandwidth.Limit < 0 {
		errs = append(errs, fmt.Sprintf("bandwidth.limit=%d: must be 0 (unlimited) or more bytes per second", c.Bandwidth.Limit))
	}
	ok := false
	for _, p := range BandwidthPolicies {
		ok = ok || c.Bandwidth.Policy == p
	}
	if !ok {
		errs = append(errs, fmt.Sprintf("bandwidth.policy=%q: must be maxt or sumt", c.Bandwidth.Policy))
	}
	return errs
}
