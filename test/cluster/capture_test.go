package cluster_test

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/testpki"
)

// tcpdump is a packet capture on the loopback interface.
type tcpdump struct {
	cmd    *exec.Cmd
	path   string
	mu     sync.Mutex
	stderr []string
	ready  chan struct{} // closed once tcpdump says it is listening
	done   chan struct{} // closed once it exited
}

// needCapture fails the test (under CI=true) or skips it (elsewhere) when
// packets cannot be captured here; what says why.
func needCapture(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("packet capture unavailable: %s (CI needs the Debian package tcpdump, see .ci/run, and the right to capture on lo: root or CAP_NET_RAW)", what)
	}
	t.Skipf("packet capture unavailable: %s (install tcpdump and run as root to run this test; under CI=true it fails)", what)
}

// startTcpdump captures, on lo, the packets to or from the given
// addresses (IP:port; a port alone would also catch unrelated connections
// whose ephemeral port on another address happens to be the same).
func startTcpdump(t *testing.T, addrs []netip.AddrPort) *tcpdump {
	t.Helper()
	bin, err := exec.LookPath("tcpdump")
	if err != nil {
		for _, p := range []string{"/usr/sbin/tcpdump", "/usr/bin/tcpdump"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
				break
			}
		}
	}
	if err != nil {
		needCapture(t, "tcpdump is not installed")
	}
	var terms []string
	for _, a := range addrs {
		ip, p := a.Addr().String(), strconv.Itoa(int(a.Port()))
		terms = append(terms, fmt.Sprintf("(src host %s and src port %s) or (dst host %s and dst port %s)", ip, p, ip, p))
	}
	d := &tcpdump{path: filepath.Join(t.TempDir(), "cluster.pcap"), ready: make(chan struct{}), done: make(chan struct{})}
	args := []string{"-i", "lo", "-n", "-U", "-s", "0", "-B", "16384", "-w", d.path}
	if os.Geteuid() == 0 {
		args = append(args, "-Z", "root") // write into the test's directory, not as the tcpdump user
	}
	args = append(args, "(tcp or udp) and ("+strings.Join(terms, " or ")+")")
	d.cmd = exec.Command(bin, args...)
	errPipe, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		needCapture(t, fmt.Sprintf("start %s: %v", bin, err))
	}
	go func() { // ends when tcpdump exits (its stderr closes)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			d.mu.Lock()
			d.stderr = append(d.stderr, sc.Text())
			d.mu.Unlock()
			if strings.Contains(sc.Text(), "listening on") {
				close(d.ready)
			}
		}
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
	})
	select {
	case <-d.ready:
	case <-d.done:
		needCapture(t, "tcpdump exited: "+d.output())
	case <-time.After(15 * time.Second):
		needCapture(t, "tcpdump did not start listening within 15s: "+d.output())
	}
	return d
}

func (d *tcpdump) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.stderr, "; ")
}

// stop ends the capture and returns the packets the kernel dropped.
func (d *tcpdump) stop(t *testing.T) int {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("tcpdump did not stop within 30s of SIGINT: %s", d.output())
	}
	m := regexp.MustCompile(`(\d+) packets? dropped by kernel`).FindStringSubmatch(d.output())
	if m == nil {
		t.Fatalf("tcpdump did not report its drops: %s", d.output())
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func addrOf(t *testing.T, hostPort string) netip.AddrPort {
	t.Helper()
	a, err := netip.ParseAddrPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestProcCaptureSealed captures, with tcpdump on lo, every packet on the
// exchange and gossip ports of three node processes crawling the synthetic
// web, and finds none of the web's URLs, paths or host names (nor the
// member names) in the packets or in any reassembled TCP stream, although
// the members did forward URLs to each other through those ports. A clear
// canary (web URLs sent over a captured port in clear, split over two TCP
// segments) proves that the capture and the search would see them.
func TestProcCaptureSealed(t *testing.T) {
	captureCrawl(t, false)
}

// TestProcCaptureSealedTLS is TestProcCaptureSealed with the exchange over
// mutual TLS (cluster.tls_*: one certificate naming the three members):
// every exchange connection starts with a TLS record.
func TestProcCaptureSealedTLS(t *testing.T) {
	captureCrawl(t, true)
}

func captureCrawl(t *testing.T, withTLS bool) {
	if testing.Short() {
		t.Skip("multi-process cluster crawl in -short mode")
	}
	web, webAddr, exp := clusterWeb(t)
	c := newProcCluster(t, web, webAddr)
	const n = 3
	var ps []*proc
	var addrs []netip.AddrPort
	exchangeAddrs, gossipAddrs := map[netip.AddrPort]bool{}, map[netip.AddrPort]bool{}
	for i := 0; i < n; i++ {
		p := c.add(i)
		p.name = fmt.Sprintf("capture-member-%d", i) // long enough to search for
		ps = append(ps, p)
		exchangeAddrs[addrOf(t, p.exchange)] = true
		gossipAddrs[addrOf(t, p.gossip)] = true
		addrs = append(addrs, addrOf(t, p.exchange), addrOf(t, p.gossip))
	}
	if withTLS {
		ca, err := testpki.NewCA("capture test CA")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range ps {
			names = append(names, p.name)
		}
		l, err := ca.Issue(names)
		if err != nil {
			t.Fatal(err)
		}
		cert, key, caFile, err := ca.Files(c.dir, "member", l)
		if err != nil {
			t.Fatal(err)
		}
		c.env = append(c.env, "PHASECRAWL_CLUSTER_TLS_CERT="+cert, "PHASECRAWL_CLUSTER_TLS_KEY="+key, "PHASECRAWL_CLUSTER_TLS_CA="+caFile)
	}
	canary, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer canary.Close()
	canaryAddr := addrOf(t, canary.Addr().String())
	addrs = append(addrs, canaryAddr)

	// The needles: every page URL the crawl may forward, its path (when
	// long enough not to occur in random bytes by chance), every host
	// name, every member name.
	var needles []string
	hosts := map[string]bool{}
	for u := range exp.Pages {
		needles = append(needles, u)
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		hosts[pu.Host] = true
		if p := pu.RequestURI(); len(p) >= 8 {
			needles = append(needles, p)
		}
	}
	for _, h := range web.HostNames() {
		hosts[h] = true
	}
	for h := range hosts {
		needles = append(needles, h)
	}
	for _, p := range ps {
		needles = append(needles, p.name)
	}
	fd := newFinder(needles)
	seeds := web.Seeds()
	clear := exchange.EncodeBatch(exchange.Batch{ID: 1, Entries: []exchange.Entry{{NewURL: frontier.NewURL{URL: seeds[0], Host: hostOf(t, seeds[0])}}}})
	if got := fd.find(clear); len(got) < 2 {
		t.Fatalf("the search finds %q in a clear-text batch of %s: want its URL and host", got, seeds[0])
	}

	dump := startTcpdump(t, addrs)
	// The canary: two web URLs in clear over a captured port, in two segments.
	canaryText := seeds[1] + " " + seeds[2]
	go func() {
		if cc, err := canary.Accept(); err == nil {
			buf := make([]byte, 4096)
			for {
				if _, err := cc.Read(buf); err != nil {
					break
				}
			}
			cc.Close()
		}
	}()
	cc, err := net.Dial("tcp", canary.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc.(*net.TCPConn).SetNoDelay(true)
	half := len(seeds[1]) / 2
	cc.Write([]byte(canaryText[:half]))
	time.Sleep(50 * time.Millisecond) // two segments apart in time, as a slow peer sends them
	cc.Write([]byte(canaryText[half:]))
	cc.Close()

	start := time.Now()
	for i, p := range ps {
		if i == 0 {
			p.start()
		} else {
			p.start(ps[0].gossip)
		}
		p.waitUp()
	}
	wait.For(t, 60*time.Second, "cluster formed", func() bool { return c.formed(ps) })
	if err := ps[0].postSeeds(seeds); err != nil {
		t.Fatal(err)
	}
	// Bounded: crawl until the crawl is done or a third of the web is
	// fetched (plenty of URLs forwarded by then), at most 3 minutes.
	var pr progress
	wait.For(t, 3*time.Minute, "a third of the crawl", func() bool {
		return pr.total(ps) >= int64(exp.Fetches)/3 || crawlDone(ps)
	})
	var forwarded, received float64
	for _, p := range ps {
		m, err := p.metrics()
		if err != nil {
			t.Fatal(err)
		}
		forwarded += metricSum(m, "phasecrawl_urls_forwarded_total")
		received += metricSum(m, "phasecrawl_urls_received_total")
	}
	dropped := dump.stop(t)
	t.Logf("crawled %d pages in %s; %.0f URLs forwarded, %.0f received; tcpdump: %s",
		pr.total(ps), time.Since(start).Round(time.Millisecond), forwarded, received, dump.output())
	if forwarded < 100 {
		t.Fatalf("only %.0f URLs forwarded between the members: the capture proves nothing", forwarded)
	}
	if dropped > 0 {
		t.Fatalf("the kernel dropped %d packets of the capture: it is incomplete", dropped)
	}

	cp, err := readPcap(dump.path)
	if err != nil {
		t.Fatal(err)
	}
	var exchangeBytes, gossipBytes, canaryBytes int
	var canaryFound []string
	for f, s := range cp.streams {
		switch {
		case f.src == canaryAddr || f.dst == canaryAddr:
			canaryBytes += len(s.data)
			canaryFound = append(canaryFound, fd.find(s.data)...)
			continue
		case exchangeAddrs[f.src] || exchangeAddrs[f.dst]:
			exchangeBytes += len(s.data)
			if withTLS && len(s.data) > 0 && s.data[0] != 0x16 {
				t.Errorf("%s: the exchange connection starts with % x, not a TLS record", f, s.data[:min(4, len(s.data))])
			}
		case gossipAddrs[f.src] || gossipAddrs[f.dst]:
			gossipBytes += len(s.data)
		default:
			t.Errorf("%s: captured, but not to or from a member's exchange or gossip address", f)
		}
		if got := fd.find(s.data); len(got) > 0 {
			t.Errorf("%s (%d bytes, %d packets): %d readable, e.g. %q", f, len(s.data), s.packets, len(got), got[:min(5, len(got))])
		}
	}
	if !slices.Contains(canaryFound, seeds[1]) || !slices.Contains(canaryFound, seeds[2]) {
		t.Fatalf("the clear canary's URLs, split over 2 segments, not found in the capture (%d bytes, found %q): the capture or its reading is broken", canaryBytes, canaryFound)
	}
	// Raw packets too (a stream could have been misassembled), the canary's
	// own packets aside: its URLs are the only ones allowed.
	var rawFound []string
	for _, s := range fd.find(cp.raw) {
		if !strings.Contains(canaryText, s) {
			rawFound = append(rawFound, s)
		}
	}
	if len(rawFound) > 0 {
		t.Errorf("%d readable in the raw capture, e.g. %q", len(rawFound), rawFound[:min(5, len(rawFound))])
	}
	// Each forwarded URL crossed an exchange port as at least its own
	// bytes (the shortest page URL is well over 20 bytes).
	if exchangeBytes < int(forwarded)*20 || gossipBytes == 0 {
		t.Fatalf("the capture holds %d exchange payload bytes for %.0f forwarded URLs and %d gossip bytes: it missed the traffic",
			exchangeBytes, forwarded, gossipBytes)
	}
	t.Logf("capture: %d packets, %d bytes; %d flows; %d exchange and %d gossip payload bytes; %d needles (URLs, paths, hosts, member names) searched",
		cp.packets, len(cp.raw), len(cp.streams), exchangeBytes, gossipBytes, len(needles))
}

func hostOf(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Host
}
