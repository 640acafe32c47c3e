package node

import (
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/fetch/dnscache"
)

// resolvConf and hostsFile are the system's resolver files.
const (
	resolvConf = "/etc/resolv.conf"
	hostsFile  = "/etc/hosts"
)

// newResolver builds the fetcher's DNS cache from the dns section; nil
// when dns.cache is off or no server is known (the system resolver then
// answers every lookup).
func newResolver(c config.DNS, log *slog.Logger) (*dnscache.Cache, error) {
	if !c.Cache {
		return nil, nil
	}
	var servers []string
	for _, s := range c.Servers {
		addr, err := config.DNSServerAddr(s)
		if err != nil {
			return nil, err
		}
		servers = append(servers, addr)
	}
	if len(servers) == 0 {
		var err error
		if servers, err = dnscache.SystemServers(resolvConf); err != nil {
			log.Warn("no DNS server for the DNS cache: host names are resolved by the system resolver, uncached (set dns.servers)", "error", err)
			return nil, nil
		}
	}
	return dnscache.New(dnscache.Config{Servers: servers, MinTTL: c.MinTTL, MaxTTL: c.MaxTTL, HostsFile: hostsFile})
}

// proxyFunc is the fetcher's proxy selection (fetch.proxy, else the
// environment); nil without a proxy.
func proxyFunc(cfg config.Config, log *slog.Logger) (fetch.ProxyFunc, error) {
	pf, err := fetch.NewProxyFunc(cfg.Fetch.Proxy, os.Getenv)
	if err != nil {
		return nil, err
	}
	if pf != nil {
		from := "the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY)"
		if cfg.Fetch.Proxy != "" {
			from = "fetch.proxy"
		}
		log.Info("fetching through a proxy", "from", from)
	}
	return pf, nil
}

// dnsCollectors are the DNS cache's series (0 while it is off).
func dnsCollectors(c *dnscache.Cache) []prometheus.Collector {
	read := func(f func(*dnscache.Cache) uint64) func() float64 {
		return func() float64 {
			if c == nil {
				return 0
			}
			return float64(f(c))
		}
	}
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "phasecrawl_dns_cache_hits_total", Help: "Host name lookups (per record type) answered from the DNS cache.",
		}, read((*dnscache.Cache).Hits)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "phasecrawl_dns_cache_misses_total", Help: "Host name lookups (per record type) the DNS cache had no live answer for.",
		}, read((*dnscache.Cache).Misses)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "phasecrawl_dns_queries_total", Help: "Queries the DNS cache sent to DNS servers.",
		}, read((*dnscache.Cache).Queries)),
	}
}
