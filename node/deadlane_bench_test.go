package node

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// BenchmarkDeadLane reproduces seed 003's speedup formula,
// S ≈ 1 + P_f/(1−P_f)·α with α = T_f/T_s, on a synthetic web where a share
// of the hosts never answer a page (they accept the connection and hang;
// their robots.txt answers 404 at once). Each paper timeout (1, 5, 10, 15,
// 30, 60 s against the paper's T_s of 73.08 ms) is scaled by deadLaneScale
// and set as fetch.header_timeout. Both arms crawl the same web with the
// same live workers: "fork-join" without the dead-link lane
// (fetch.inactive_workers 0), "lane" with it (1 worker), and "adaptive":
// the lane and fetch.adaptive_timeouts (floor 250 ms, scaled). The collection
// time is from the first request to the last live page answered, both from
// the web servers' own records; T_s is the worker time per live page of a
// run without the dead hosts, P_f the share of dead URLs. Each arm runs
// three times, interleaved, and its median is kept. Run:
//
//	go test -run '^$' -bench DeadLane -benchtime 1x -timeout 30m ./node/
func BenchmarkDeadLane(b *testing.B) {
	for _, paper := range []time.Duration{1, 5, 10, 15, 30, 60} {
		tf := paper * time.Second / deadLaneScale
		b.Run(fmt.Sprintf("timeout=%ds", paper), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				// Each arm deadLaneReps times, interleaved; the median of each.
				var runs [4][]deadLaneResult
				for r := 0; r < deadLaneReps; r++ {
					runs[0] = append(runs[0], deadLaneRun(b, tf, 0, false, 0))
					runs[1] = append(runs[1], deadLaneRun(b, tf, 0, false, deadLaneDead))
					runs[2] = append(runs[2], deadLaneRun(b, tf, 1, false, deadLaneDead))
					runs[3] = append(runs[3], deadLaneRun(b, tf, 1, true, deadLaneDead))
				}
				live, fj, ma, ad := median(runs[0]), median(runs[1]), median(runs[2]), median(runs[3])
				ts := live.elapsed * time.Duration(deadLaneWorkers) / time.Duration(live.live)
				ns, nf := float64(ma.live), float64(ma.dead)
				pf := nf / (nf + ns)
				alpha := float64(tf) / float64(ts)
				formula := 1 + pf/(1-pf)*alpha
				// The formula's steady state with the initial state added:
				// a live worker still pays one timeout per dead host.
				initial := (ns + nf*alpha) / (ns + deadLaneDead*alpha)
				speedup := float64(fj.elapsed) / float64(ma.elapsed)
				adaptive := float64(fj.elapsed) / float64(ad.elapsed)
				b.ReportMetric(speedup, "speedup")
				b.ReportMetric(formula, "formula")
				b.ReportMetric(initial, "formula_initial")
				b.ReportMetric(adaptive, "speedup_adaptive")
				b.ReportMetric(alpha, "alpha")
				b.Logf("| %ds | %v | %v | %.0f | %v | %v | %v | **%.2f** | %.2f | %.2f | %v | %.2f |",
					paper, tf, ts.Round(10*time.Microsecond), alpha, live.elapsed.Round(time.Millisecond),
					fj.elapsed.Round(time.Millisecond), ma.elapsed.Round(time.Millisecond), speedup, formula, initial,
					ad.elapsed.Round(time.Millisecond), adaptive)
			}
		})
	}
}

const (
	// deadLaneScale: one second of the paper is 1/10 s here. Its T_s of
	// 73.08 ms would be 7.3 ms, of the order of what a live page costs a
	// worker here (T_s is measured), so α is of the paper's order.
	deadLaneScale     = 10
	deadLaneWorkers   = 2
	deadLaneLive      = 4   // live hosts
	deadLanePages     = 100 // pages per live host, besides its /
	deadLaneDead      = 2   // dead hosts
	deadLaneDeadPages = 4   // URLs per dead host
)

type deadLaneResult struct {
	elapsed    time.Duration
	live, dead int
}

// deadLaneReps is how many times each arm runs (the machine is shared: the
// median of three is steadier than one run).
const deadLaneReps = 3

// median returns the run of median elapsed time.
func median(rs []deadLaneResult) deadLaneResult {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b deadLaneResult) int { return cmp.Compare(a.elapsed, b.elapsed) })
	return s[len(s)/2]
}

// deadLaneRun crawls the synthetic web once with lane workers in the
// dead-link lane, with adaptive timeouts or not.
func deadLaneRun(b *testing.B, tf time.Duration, lane int, adaptive bool, deadHosts int) deadLaneResult {
	b.Helper()
	var mu sync.Mutex
	var first, last time.Time
	seen := map[string]bool{}
	note := func(key string, live bool) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		if live {
			seen[key] = true
			last = now
		}
	}
	var seeds, hosts, deadURLs []string
	for h := 0; h < deadHosts; h++ {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			note("", false)
			<-r.Context().Done() // accept and hang until the client gives up
		}))
		b.Cleanup(srv.Close)
		hosts = append(hosts, srv.Listener.Addr().String())
		for p := 0; p < deadLaneDeadPages; p++ {
			deadURLs = append(deadURLs, fmt.Sprintf("%s/d%d", srv.URL, p))
		}
	}
	// Dead URL j is linked from page p(20+j) of live host j%deadLaneLive:
	// found mid-crawl, as dead links are.
	deadLink := func(host int, path string) string {
		for j, u := range deadURLs {
			if j%deadLaneLive == host && path == fmt.Sprintf("/p%d", 20+j) {
				return u
			}
		}
		return ""
	}
	for h := 0; h < deadLaneLive; h++ {
		h := h
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			time.Sleep(time.Millisecond) // the server's share of T_s
			w.Header().Set("Content-Type", "text/html")
			if r.URL.Path == "/" {
				for i := 0; i < deadLanePages; i++ {
					fmt.Fprintf(w, `<a href="/p%d">p</a>`, i)
				}
			} else if u := deadLink(h, r.URL.Path); u != "" {
				fmt.Fprintf(w, `<a href="%s">dead</a>`, u)
			} else {
				fmt.Fprint(w, "page")
			}
			note(fmt.Sprintf("%d%s", h, r.URL.Path), true)
		}))
		b.Cleanup(srv.Close)
		hosts = append(hosts, srv.Listener.Addr().String())
		seeds = append(seeds, srv.URL+"/")
	}
	c := config.Default()
	c.Name, c.Data, c.HTTP, c.AllowPrivate = "bench", b.TempDir(), "127.0.0.1:0", true
	c.Delay = 0
	c.Workers = deadLaneWorkers
	c.Fetch.InactiveWorkers = lane
	c.Fetch.HeaderTimeout = tf
	c.Fetch.MaxTries = 1
	c.Fetch.AdaptiveTimeouts = adaptive
	c.Fetch.AdaptiveFloor = 250 * time.Millisecond / deadLaneScale
	c.ShutdownTimeout = 0 // the lane's requests in flight are cut at the end of the run
	c.Bucket.ListCap = 1  // one URL per trip: every dead URL is an attempt of its own
	c.Bucket.MaxQueueWait = time.Millisecond
	c.Frontier.BatchDelay = 0
	c.WARC.Enabled = false
	c.Seeds = seeds
	c.Scope.AllowHosts = hosts
	n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done }) // here, or when the wait fails
	defer stop()
	want := deadLaneLive * (deadLanePages + 1)
	var k int
	wait.For(b, 5*time.Minute, "the live pages answered, or the crawl over", func() (bool, string) {
		mu.Lock()
		k = len(seen)
		mu.Unlock()
		return k >= want || n.Done(), fmt.Sprintf("lane %d adaptive %v timeout %v: %d of %d live pages answered", lane, adaptive, tf, k, want)
	})
	if k < want {
		// A live page timed out (its host's robots.txt, or the page
		// itself): the run measures something else than the formula's.
		b.Fatalf("lane %d adaptive %v timeout %v: %d of %d live pages answered when the crawl ended", lane, adaptive, tf, k, want)
	}
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return deadLaneResult{elapsed: last.Sub(first), live: want, dead: deadHosts * deadLaneDeadPages}
}

// BenchmarkDeadLaneSilent measures what hosts that never answer cost the
// live pages of a small node. 200 live hosts of 10 pages (each answered
// after 5 ms) and 20 dead hosts are crawled with the default timeouts; the
// dead hosts are seeds among the live ones (every eleventh) and each is
// linked from the first page of ten live hosts. "silent": the dead hosts
// accept nothing (a full listen queue, silentListener), so a connect waits
// for its timeout; "fail-fast": they refuse the connection at once (a
// closed port); "off": silent with fetch.adaptive_connect off (every
// first contact has the full 15 s connect timeout). The figure is the live pages' t95: the 95th
// percentile of the times at which the live pages were served, from the
// first request, by the web servers' own records. Each arm runs
// deadLaneReps times (interleaved; "off" once) and its median is kept.
// Run:
//
//	go test -run '^$' -bench DeadLaneSilent -benchtime 1x -timeout 30m ./node/
func BenchmarkDeadLaneSilent(b *testing.B) {
	for _, workers := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var silent, fast []time.Duration
				for r := 0; r < deadLaneReps; r++ {
					fast = append(fast, silentRun(b, workers, false, true))
					silent = append(silent, silentRun(b, workers, true, true))
				}
				off := silentRun(b, workers, true, false)
				ts, tf := medianDuration(silent), medianDuration(fast)
				ratio, ratioOff := ts.Seconds()/tf.Seconds(), off.Seconds()/tf.Seconds()
				b.ReportMetric(ts.Seconds(), "t95_silent_s")
				b.ReportMetric(tf.Seconds(), "t95_failfast_s")
				b.ReportMetric(ratio, "ratio")
				b.ReportMetric(off.Seconds(), "t95_off_s")
				b.ReportMetric(ratioOff, "ratio_off")
				b.Logf("| %d | %v | %v | **%.2f** | %v | %.2f |", workers, tf.Round(10*time.Millisecond), ts.Round(10*time.Millisecond), ratio,
					off.Round(10*time.Millisecond), ratioOff)
			}
		})
	}
}

const (
	silentLive  = 200 // live hosts
	silentPages = 9   // pages per live host, besides its /
	silentDead  = 20  // dead hosts
)

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// silentRun crawls the web of BenchmarkDeadLaneSilent once and returns the
// live pages' t95. silent: the dead hosts accept nothing (else they refuse
// at once); adaptiveConnect: fetch.adaptive_connect.
func silentRun(b *testing.B, workers int, silent, adaptiveConnect bool) time.Duration {
	b.Helper()
	var mu sync.Mutex
	var first time.Time
	at := map[string]time.Time{} // live page -> when it was first served
	var dead []string
	for d := 0; d < silentDead; d++ {
		if silent {
			dead = append(dead, silentHost(b))
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		dead = append(dead, ln.Addr().String())
		ln.Close() // a closed port: refused at once
	}
	var seeds, hosts []string
	hosts = append(hosts, dead...)
	for h := 0; h < silentLive; h++ {
		h := h
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := time.Now()
			mu.Lock()
			if first.IsZero() {
				first = now
			}
			mu.Unlock()
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			time.Sleep(5 * time.Millisecond) // the page's latency
			w.Header().Set("Content-Type", "text/html")
			if r.URL.Path == "/" {
				for i := 0; i < silentPages; i++ {
					fmt.Fprintf(w, `<a href="/p%d">p</a>`, i)
				}
			} else if r.URL.Path == "/p0" {
				// A dead link: live host h's first page links to dead host h%silentDead.
				fmt.Fprintf(w, `<a href="http://%s/from%d">dead</a>`, dead[h%silentDead], h)
			}
			mu.Lock()
			key := fmt.Sprintf("%d%s", h, r.URL.Path)
			if _, ok := at[key]; !ok {
				at[key] = time.Now()
			}
			mu.Unlock()
		}))
		b.Cleanup(srv.Close)
		hosts = append(hosts, srv.Listener.Addr().String())
		seeds = append(seeds, srv.URL+"/")
		if h%(silentLive/silentDead) == silentLive/silentDead-1 {
			seeds = append(seeds, "http://"+dead[h/(silentLive/silentDead)]+"/")
		}
	}
	c := config.Default()
	c.Name, c.Data, c.HTTP, c.AllowPrivate = "bench", b.TempDir(), "127.0.0.1:0", true
	c.Delay = 0 // the workers bound the crawl, not the hosts' delays
	c.Workers = workers
	c.Fetch.AdaptiveConnect = adaptiveConnect
	c.ShutdownTimeout = 0 // the dead hosts' requests in flight are cut at the end of the run
	c.WARC.Enabled = false
	c.Seeds = seeds
	c.Scope.AllowHosts = hosts
	n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done }) // here, or when the wait fails
	defer stop()
	want := silentLive * (silentPages + 1)
	wait.For(b, 5*time.Minute, "the live pages served", func() (bool, string) {
		mu.Lock()
		k := len(at)
		mu.Unlock()
		return k >= want, fmt.Sprintf("workers %d silent %v: %d of %d live pages served", workers, silent, k, want)
	})
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	times := make([]time.Duration, 0, len(at))
	for _, t := range at {
		times = append(times, t.Sub(first))
	}
	slices.Sort(times)
	return times[len(times)*95/100]
}
