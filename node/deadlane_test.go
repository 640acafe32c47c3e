package node

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// hangServer accepts connections on loopback and never answers (a dead
// server whose port is open). accepted counts the connections.
func hangServer(t testing.TB) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String(), accepted
}

// liveSite serves / linking to /p0../p(pages-1); the last page links to
// each of extra. The pages (not /) answer after wait.
func liveSite(t testing.TB, pages int, extra []string, wait time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if wait > 0 && r.URL.Path != "/" {
			time.Sleep(wait) // the pages' latency
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := 0; i < pages; i++ {
				fmt.Fprintf(w, `<a href="/p%d">p</a>`, i)
			}
			return
		}
		if r.URL.Path == fmt.Sprintf("/p%d", pages-1) {
			for _, u := range extra {
				fmt.Fprintf(w, `<a href="%s">x</a>`, u)
			}
		}
		fmt.Fprint(w, "page")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A host that timed out is served by the dead-link lane from then on: its
// retries are trips of the inactive lane, the live host's pages are all
// fetched, and the dead URLs end with their tries used up.
func TestDeadLane(t *testing.T) {
	dead, accepted := hangServer(t)
	deadURLs := []string{"http://" + dead + "/a", "http://" + dead + "/b"}
	srv := liveSite(t, 10, deadURLs, 0)
	c := testConfig(t, srv)
	c.Workers = 2
	c.Fetch.InactiveWorkers = 1
	c.Fetch.MaxTries = 3
	c.Fetch.RetryBackoff = 0
	c.Fetch.HeaderTimeout = 300 * time.Millisecond
	c.Bucket.ListCap = 1
	c.Robots.ErrorTTL = time.Second // every retry of the dead host tries its robots.txt again
	c.Seeds = append(c.Seeds, deadURLs...)
	n, stop := start(t, c)
	defer stop()
	wait.For(t, 30*time.Second, "crawl", func() bool {
		cn := n.Frontier().Counts()
		return cn.Completed == 13 && cn.InList == 0 && cn.InProgress == 0 && cn.Stalled == 0
	})
	t.Logf("%+v", n.Frontier().Counts())
	for _, u := range deadURLs {
		r, ok, err := n.Frontier().Get(frontier.RefOf(u))
		if err != nil || !ok || r.State != frontier.Completed || r.Reason != "robots_unavailable" || r.Tries != 3 {
			t.Errorf("%s: %+v %v %v, want COMPLETED robots_unavailable (its robots.txt timed out) after 3 tries", u, r, ok, err)
		}
	}
	for _, p := range append([]string{"/"}, pagePaths(10)...) {
		r, ok, err := n.Frontier().Get(frontier.RefOf(srv.URL + p))
		if err != nil || !ok || r.Reason != "ok" {
			t.Errorf("%s: %+v %v %v, want ok", p, r, ok, err)
		}
	}
	// Every try after a host's first timeout is the lane's: the first
	// timeout makes the host inactive, so at most the trips dispatched
	// before it ran on the live workers.
	inactive := labelledCounter(t, n, "phasecrawl_host_trips_total", "inactive")
	if inactive < 2 {
		t.Errorf("inactive lane trips = %g, want at least 2 (of %d connections to the dead host)", inactive, accepted.Load())
	}
	if !n.inactive.has(dead) {
		t.Errorf("dead host %s not in the inactive set", dead)
	}
}

func hostOf(rawURL string) string { return strings.TrimPrefix(rawURL, "http://") }

func TestInactiveLaneSize(t *testing.T) {
	c := testConfig(t, liveSite(t, 0, nil, 0))
	tests := []struct{ workers, set, want int }{
		{256, -1, 25}, {4, -1, 1}, {1, -1, 1}, {30, 0, 0}, {30, 7, 7},
	}
	for _, tc := range tests {
		c.Workers, c.Fetch.InactiveWorkers = tc.workers, tc.set
		if got := c.Fetch.InactiveLane(c.Workers); got != tc.want {
			t.Errorf("workers %d inactive_workers %d: lane of %d, want %d", tc.workers, tc.set, got, tc.want)
		}
	}
}

func TestAdaptiveTimeouts(t *testing.T) {
	const floor, maxC, maxH = 250 * time.Millisecond, 15 * time.Second, 10 * time.Second
	tests := []struct {
		base         time.Duration
		factor       int
		wantC, wantH time.Duration
	}{
		{10 * time.Millisecond, 4, floor, floor}, // fast host: the floor
		{200 * time.Millisecond, 4, 800 * time.Millisecond, 800 * time.Millisecond},
		{3 * time.Second, 4, 12 * time.Second, maxH}, // clamped to header_timeout
		{time.Minute, 4, maxC, maxH},                 // clamped to both
		{100 * time.Millisecond, 1, floor, floor},
	}
	for _, tc := range tests {
		got := adaptiveTimeouts(tc.base, tc.factor, floor, maxC, maxH)
		if got.Connect != tc.wantC || got.Header != tc.wantH {
			t.Errorf("base %s ×%d: %+v, want connect %s header %s", tc.base, tc.factor, got, tc.wantC, tc.wantH)
		}
	}
	h := newHostTimes()
	if _, ok := h.base("a"); ok {
		t.Error("a base with no answer at all")
	}
	for i := 0; i < minNodeTimes; i++ {
		h.observe("a", time.Duration(i+1)*time.Millisecond)
	}
	h.observe("slow", 900*time.Millisecond)
	if d, ok := h.base("new"); !ok || d != 900*time.Millisecond {
		t.Errorf("new host's base %s %v, want the node's longest 900ms", d, ok)
	}
	if d, _ := h.base("a"); d != minNodeTimes*time.Millisecond {
		t.Errorf("a's base %s, want its own longest %s", d, minNodeTimes*time.Millisecond)
	}
	if h.cut("never") {
		t.Error("a host never answered counted as answered before")
	}
	if !h.cut("a") {
		t.Error("a answered before, cut says no")
	}
	if _, ok := h.base("a"); ok {
		t.Error("a cut host that answered before keeps a derived timeout (want the full ones)")
	}
	h.observe("a", time.Millisecond)
	if _, ok := h.base("a"); !ok {
		t.Error("a answered again: its derived timeout should be back")
	}
}

// With adaptive timeouts, a slow live host is not lost: its / answers at
// once, so its first page is cut by the timeout derived from that, but as
// it answered before, the live workers try it again with the full
// timeouts, and from then on its own response times set its timeout:
// every page ends COMPLETED ok, none uses up a try. A dead host (robots.txt
// included) linked from the fast host's last page is cut too: its
// robots.txt failure is not cached, the dead-link lane takes it, and its
// URL ends after its tries.
func TestAdaptiveTimeoutsSlowHost(t *testing.T) {
	dead, _ := hangServer(t)
	deadURL := "http://" + dead + "/x"
	fast := liveSite(t, 20, []string{deadURL}, 0)
	slow := liveSite(t, 5, nil, 120*time.Millisecond)
	c := testConfig(t, fast)
	c.Seeds = append(c.Seeds, slow.URL+"/")
	c.Scope.AllowHosts = []string{hostOf(fast.URL), hostOf(slow.URL), dead}
	c.Fetch.MaxTries = 2
	c.Workers = 2
	c.Fetch.InactiveWorkers = 1
	c.Fetch.AdaptiveTimeouts = true
	c.Fetch.AdaptiveFloor = 20 * time.Millisecond
	// The dead host's robots.txt is cut only while 4× the node's longest
	// answer is under the header timeout: room for a loaded machine.
	c.Fetch.HeaderTimeout = 2 * time.Second
	c.Fetch.RetryBackoff = 0
	c.Robots.ErrorTTL = time.Second
	n, stop := start(t, c)
	defer stop()
	wait.For(t, 30*time.Second, "crawl", func() bool {
		cn := n.Frontier().Counts()
		return cn.Completed == 28 && cn.InList == 0 && cn.InProgress == 0 && cn.Stalled == 0
	})
	if r, ok, err := n.Frontier().Get(frontier.RefOf(deadURL)); err != nil || !ok || r.State != frontier.Completed || r.Tries != 2 {
		t.Errorf("dead %s: %+v %v %v, want COMPLETED after 2 tries", deadURL, r, ok, err)
	}
	for _, p := range append([]string{"/"}, pagePaths(5)...) {
		r, ok, err := n.Frontier().Get(frontier.RefOf(slow.URL + p))
		if err != nil || !ok || r.Reason != "ok" || r.Tries != 1 {
			t.Errorf("slow %s: %+v %v %v, want ok in 1 try", p, r, ok, err)
		}
	}
	if got := counterValue(t, n, "phasecrawl_adaptive_timeouts_total"); got < 2 {
		t.Errorf("adaptive timeout cuts = %g, want at least 2 (the slow host's first page, the dead host's robots.txt)", got)
	}
	if got := labelledCounter(t, n, "phasecrawl_host_trips_total", "inactive"); got < 1 {
		t.Errorf("inactive lane trips = %g: the dead host never reached the lane", got)
	}
}

// countingSite serves / linking to /p0../p(pages-1), each page linking to
// each of extra, and counts the requests of each path (robots.txt: 404).
func countingSite(pages int, extra []string) (http.Handler, func(path string) int) {
	var mu sync.Mutex
	hits := map[string]int{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := 0; i < pages; i++ {
				fmt.Fprintf(w, `<a href="/p%d">p</a>`, i)
			}
			return
		}
		for _, u := range extra {
			fmt.Fprintf(w, `<a href="%s">x</a>`, u)
		}
		fmt.Fprint(w, "page")
	})
	return h, func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return hits[path]
	}
}

// Hosts that accept nothing on a node with fewer workers than such hosts
// (fetch.adaptive_connect, on by default): each first contact is cut after
// the connect timeout derived from the node's own connect times, and the
// host goes to the dead-link lane. Every live page is fetched exactly once
// and COMPLETED ok; every URL of the silent hosts ends STALLED after a try
// of the lane with the full connect timeout (none lost, none COMPLETED
// without a try); a host that is slow to connect at first (its listen queue
// full until its first contact was cut) is cut too, then crawled from the
// lane, every page ok in one try and fetched once.
func TestDeadLaneSilentHosts(t *testing.T) {
	var silent, silentURLs []string
	for i := 0; i < 2; i++ {
		h := silentHost(t)
		silent = append(silent, h)
		silentURLs = append(silentURLs, "http://"+h+"/", "http://"+h+"/x")
	}
	var live []*httptest.Server
	var liveHits []func(string) int
	for i := 0; i < 3; i++ {
		h, hits := countingSite(4, []string{"http://" + silent[i%2] + "/x"})
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		live, liveHits = append(live, srv), append(liveHits, hits)
	}
	slowAddr, listen := silentListener(t)
	slowHandler, slowHits := countingSite(3, nil)
	// The slow host accepts from 1.2 s on: a connect before then waits
	// for a SYN sent again (after 1 s, then 3 s more). The 1.2 s are the
	// host's behaviour, set against the kernel's SYN timer: a sleep.
	go func() {
		time.Sleep(1200 * time.Millisecond)
		if ln := listen(); ln != nil {
			srv := &http.Server{Handler: slowHandler}
			t.Cleanup(func() { srv.Close() })
			go srv.Serve(ln)
		}
	}()
	c := testConfig(t, live[0])
	c.Seeds = []string{live[0].URL + "/", "http://" + silent[0] + "/", "http://" + slowAddr + "/", live[1].URL + "/", "http://" + silent[1] + "/", live[2].URL + "/"}
	c.Scope.AllowHosts = append([]string{slowAddr}, silent...)
	for _, s := range live {
		c.Scope.AllowHosts = append(c.Scope.AllowHosts, hostOf(s.URL))
	}
	c.Workers = 2
	c.Fetch.InactiveWorkers = 3
	c.Fetch.ConnectTimeout = 4 * time.Second
	c.Fetch.HeaderTimeout = 2 * time.Second
	c.Fetch.AdaptiveFloor = 50 * time.Millisecond // 200ms for a first contact until 8 connects
	c.Fetch.MaxTries = 3
	c.Fetch.RetryBackoff = time.Hour // a silent URL stays STALLED after its first try
	c.ShutdownTimeout = 0
	// The live hosts' home pages are the same bytes (their links resolve
	// to each host's own pages): each is archived and read in full.
	c.WARC.Dedup = false
	if !c.Fetch.AdaptiveConnect {
		t.Fatal("fetch.adaptive_connect is off by default")
	}
	n, stop := start(t, c)
	defer stop()
	get := func(u string) frontier.Record {
		r, _, _ := n.Frontier().Get(frontier.RefOf(u))
		return r
	}
	paths := append([]string{"/"}, pagePaths(4)...)
	wait.For(t, 30*time.Second, "live pages, the slow host and a try of every silent URL", func() bool {
		for _, s := range live {
			for _, p := range paths {
				if get(s.URL+p).State != frontier.Completed {
					return false
				}
			}
		}
		for _, p := range append([]string{"/"}, pagePaths(3)...) {
			if get("http://"+slowAddr+p).State != frontier.Completed {
				return false
			}
		}
		for _, u := range silentURLs {
			if get(u).Tries == 0 {
				return false
			}
		}
		return true
	})
	for i, s := range live {
		for _, p := range paths {
			if r := get(s.URL + p); r.Reason != "ok" || r.Tries != 1 {
				t.Errorf("live %s%s: %+v, want ok in 1 try", s.URL, p, r)
			}
			if k := liveHits[i](p); k != 1 {
				t.Errorf("live %s%s requested %d times, want once", s.URL, p, k)
			}
		}
	}
	for _, p := range append([]string{"/"}, pagePaths(3)...) {
		if r := get("http://" + slowAddr + p); r.Reason != "ok" || r.Tries != 1 {
			t.Errorf("slow-to-connect %s: %+v, want ok in 1 try", p, r)
		}
		if k := slowHits(p); k != 1 {
			t.Errorf("slow-to-connect %s requested %d times, want once", p, k)
		}
	}
	for _, u := range silentURLs {
		r, ok, err := n.Frontier().Get(frontier.RefOf(u))
		if err != nil || !ok || r.State != frontier.Stalled || r.Tries != 1 || (r.Reason != "robots_unavailable" && r.Reason != "timeout") {
			t.Errorf("silent %s: %+v %v %v, want STALLED after 1 try (robots_unavailable or timeout)", u, r, ok, err)
		}
	}
	// Each silent host and the slow one: a first contact cut, then the lane.
	if got := counterValue(t, n, "phasecrawl_adaptive_timeouts_total"); got < 3 {
		t.Errorf("adaptive timeout cuts = %g, want at least 3 (two silent hosts, the slow one)", got)
	}
	if got := labelledCounter(t, n, "phasecrawl_host_trips_total", "inactive"); got < 3 {
		t.Errorf("inactive lane trips = %g, want at least 3", got)
	}
	for _, h := range silent {
		if !n.inactive.has(h) {
			t.Errorf("silent host %s not in the inactive set", h)
		}
	}
	if n.inactive.has(slowAddr) {
		t.Errorf("slow host %s still inactive after it answered", slowAddr)
	}
}

// A first contact's connect timeout: factor × floor while the node has seen
// fewer than minNodeTimes connects, then factor × the longest of its last
// ones, at least floor; none for a host that answered.
func TestFirstConnect(t *testing.T) {
	const factor, floor = 4, 250 * time.Millisecond
	h := newHostTimes()
	want := func(step string, host string, wantD time.Duration, wantOK bool) {
		t.Helper()
		if d, ok := h.firstConnect(host, factor, floor); d != wantD || ok != wantOK {
			t.Errorf("%s: first connect of %s = %s %v, want %s %v", step, host, d, ok, wantD, wantOK)
		}
	}
	want("cold", "new", factor*floor, true)
	for i := 0; i < minNodeTimes-1; i++ {
		h.answer(fmt.Sprintf("h%d", i), time.Millisecond)
	}
	want("7 connects", "new", factor*floor, true)
	h.answer("h7", 0) // a reused connection: no connect time
	want("still 7 connects", "new", factor*floor, true)
	h.answer("h8", 2*time.Millisecond)
	want("8 fast connects", "new", floor, true)
	want("answered", "h7", 0, false)
	h.answer("far", 400*time.Millisecond)
	want("one slow connect", "new", factor*400*time.Millisecond, true)
	for i := 0; i < timesWindow; i++ {
		h.answer("h0", time.Millisecond)
	}
	want("the slow connect out of the window", "new", floor, true)
}
