package ops

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// fakeDNS answers every name under synth.test with a documentation address
// (nothing is ever sent there: the proxy sends every request to the web on
// loopback), private.synth.test with a private one, and counts the queries.
type fakeDNS struct {
	addr string
	mu   sync.Mutex
	a    map[string]int // A queries by name
}

func startFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDNS{addr: pc.LocalAddr().String(), a: map[string]int{}}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		m := new(dns.Msg)
		m.SetReply(req)
		ip := "203.0.113.10"
		if q.Name == "private.synth.test." {
			ip = "10.0.0.5"
		}
		switch {
		case !strings.HasSuffix(q.Name, ".synth.test."):
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			f.mu.Lock()
			f.a[q.Name]++
			f.mu.Unlock()
			rr, _ := dns.NewRR(q.Name + " 300 IN A " + ip)
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return f
}

// forwardProxy is a loopback forward proxy that sends every request to
// backend and records the request lines.
type forwardProxy struct {
	mu    sync.Mutex
	lines []string
}

func (p *forwardProxy) handler(backend string) http.Handler {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", backend)
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.lines = append(p.lines, r.Method+" "+r.RequestURI)
		p.mu.Unlock()
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}

// TestProxyAndDNSCache crawls the synthetic web through a forward proxy,
// with the private-address guard on and host names resolved by the DNS
// cache from a loopback DNS server: every page comes through the proxy,
// each host's name is asked once (its TTL is 5 minutes), and a host whose
// name resolves to a private address is refused before the proxy hears
// of it.
func TestProxyAndDNSCache(t *testing.T) {
	srv := web(t, 5, 300)
	exp := srv.Web.Expected(srv.Scope(config.Default().UserAgent))
	fd := startFakeDNS(t)
	fp := &forwardProxy{}
	proxy := httptest.NewServer(fp.handler(srv.Addr))
	defer proxy.Close()

	cfg := srv.NodeConfig("proxied", t.TempDir(), time.Millisecond)
	cfg.Workers = 8
	cfg.Resolve, cfg.AllowPrivate = nil, false
	cfg.Fetch.Proxy = proxy.URL
	cfg.DNS.Servers = []string{fd.addr}
	cfg.Seeds = append(cfg.Seeds, "http://private.synth.test/")
	n, stop := runNode(t, cfg, nil)
	wait.For(t, 3*time.Minute, "crawl done", func() bool { return n.Done() })
	st := status(t, n)
	stop()

	if st.PagesFetched != int64(exp.Fetches) {
		t.Fatalf("pages fetched %d, want %d", st.PagesFetched, exp.Fetches)
	}
	fp.mu.Lock()
	lines := append([]string(nil), fp.lines...)
	fp.mu.Unlock()
	if len(lines) < exp.Fetches {
		t.Fatalf("the proxy saw %d requests, fewer than the %d pages", len(lines), exp.Fetches)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "GET http://h") || !strings.Contains(l, ".synth.test/") {
			t.Fatalf("proxy request %q", l)
		}
	}
	fd.mu.Lock()
	for name, k := range fd.a {
		if k != 1 {
			t.Errorf("%s asked %d times, want once within its TTL", name, k)
		}
	}
	hosts := len(fd.a)
	fd.mu.Unlock()
	if hosts < 5 {
		t.Fatalf("the DNS server was asked for %d names, want the web's 5 hosts and more", hosts)
	}

	var private archive.LogEntry
	if _, err := archive.ReadCrawlLog(cfg.Data+"/crawl.log", func(e archive.LogEntry) error {
		if e.URL == "http://private.synth.test/" {
			private = e
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if private.Reason != "private_address" {
		t.Fatalf("private.synth.test: crawl log %+v, want refused as private_address", private)
	}
	if st.ErrorsByKind["robots_private_address"]+st.ErrorsByKind["private_address"] == 0 {
		t.Fatalf("errors by kind %v: no private address refusal", st.ErrorsByKind)
	}
}
