package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/clock"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/plan"
)

// TestSchedulerRoundCost: in a recurring crawl, dispatched elements wait by
// site priority first, then by their host's round cost, largest first
// (dispatch order among equals; a host without a cost counts 0), in each
// part of the queue. Over whole rounds taken by the first free worker, that
// order's makespan is LPT's, and shorter than dispatch order's.
func TestSchedulerRoundCost(t *testing.T) {
	b, err := bucket.New(bucket.Config{Columns: 199, Rows: 4, ListCap: 20, MaxQueueWait: time.Second, Phases: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{bkt: b, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clock.Real}
	n.cfg.Sites = []config.Site{{Match: "vip*", Priority: 10}}
	s := newScheduler(n)
	s.costs, s.started = make(map[string]time.Duration), make(map[bucket.ElementID]time.Time)
	now := time.Now()
	batch := func(host string) bucket.Batch {
		t.Helper()
		if o := b.Add(now, host, frontier.HostHash(host), bucket.Item{FP: frontier.HostHash(host)}); o != bucket.Placed {
			t.Fatalf("add %s: %v", host, o)
		}
		bt, ok := b.DispatchHost(host, frontier.HostHash(host))
		if !ok {
			t.Fatalf("DispatchHost(%s): none", host)
		}
		return bt
	}
	pending := func() []string {
		var hs []string
		for _, bt := range s.pending {
			hs = append(hs, bt.Host)
		}
		return hs
	}
	sec := time.Second
	for h, c := range map[string]time.Duration{"a": 1 * sec, "b": 5 * sec, "c": 3 * sec, "e": 3 * sec, "vip1": sec, "vip2": 4 * sec} {
		s.costs[h] = c
	}
	for _, h := range []string{"a", "b", "c", "d", "e", "vip1", "vip2"} {
		s.tripDone(h) // known: no new-host lane
	}
	for i, st := range []struct {
		enqueue []string
		handOut int
		want    string
	}{
		{enqueue: []string{"a", "b", "c"}, want: "b c a (0 prio)"},
		{enqueue: []string{"d", "vip1", "e"}, want: "vip1 b c e a d (1 prio)"}, // c before e: same cost, dispatch order
		{enqueue: []string{"vip2"}, want: "vip2 vip1 b c e a d (2 prio)"},
		{handOut: 3, want: "c e a d (0 prio)"},
		{enqueue: []string{"new"}, want: "new c e a d (1 prio)"}, // a new host: the lane, whatever its cost
	} {
		var bs []bucket.Batch
		for _, h := range st.enqueue {
			bs = append(bs, batch(h))
		}
		s.enqueue(bs)
		for range st.handOut {
			s.handedOut()
		}
		if got := fmt.Sprintf("%s (%d prio)", strings.Join(pending(), " "), s.nprio); got != st.want {
			t.Fatalf("step %d: pending %s, want %s", i, got, st.want)
		}
	}
	if len(s.started) != 3 {
		t.Fatalf("%d trips timed, want the 3 handed out", len(s.started))
	}

	// Makespan, in units of work: hosts dispatched small ones first (the
	// queue's order), two workers, each taking the next host's round when
	// free.
	cost := []float64{2, 1, 2, 1, 8, 1, 9}
	s = newScheduler(n)
	s.costs, s.started = make(map[string]time.Duration), make(map[bucket.ElementID]time.Time)
	var bs []bucket.Batch
	hashOrder := make([]int, len(cost))
	for z, c := range cost {
		h := fmt.Sprintf("h%d", z)
		s.costs[h] = time.Duration(c * float64(time.Second))
		s.tripDone(h)
		bs = append(bs, batch(h))
		hashOrder[z] = z
	}
	s.enqueue(bs)
	var order []int
	for _, h := range pending() {
		var z int
		fmt.Sscanf(h, "h%d", &z)
		order = append(order, z)
	}
	if want := plan.ByCost(cost, true); !slices.Equal(order, want) {
		t.Fatalf("order %v, want largest first %v", order, want)
	}
	r := []float64{1, 1}
	got := plan.Makespan(plan.RoundRobin(order, cost, r), cost, r)
	hash := plan.Makespan(plan.RoundRobin(hashOrder, cost, r), cost, r)
	lpt := plan.Makespan(plan.LPT(cost, r), cost, r)
	if got != lpt || got >= hash {
		t.Fatalf("makespan %v by cost, %v in dispatch order, LPT %v; want LPT's, below dispatch order's", got, hash, lpt)
	}
}

// TestRevisitLargestFirst: a node of two workers revisits five hosts of
// 24, 8, 2, 2 and 2 pages, found smallest first. Each host's first round
// is measured (the time its trips held a worker, kept in the frontier
// across a restart); when the whole second round is due at once the two
// workers start the two largest hosts' rounds, before any smaller host's
// (the web servers' records), and that order's makespan over whole rounds
// (pages as the work) is LPT's, below that of the order the hosts were
// found in.
func TestRevisitLargestFirst(t *testing.T) {
	sizes := []int{2, 2, 2, 8, 24} // in seed order
	type hit struct {
		host int
		path string
	}
	var mu sync.Mutex
	var log []hit
	var srvs []*httptest.Server
	for i, size := range sizes {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			log = append(log, hit{i, r.URL.Path})
			mu.Unlock()
			switch {
			case r.URL.Path == "/robots.txt":
				http.NotFound(w, r)
			case r.URL.Path == "/":
				w.Header().Set("Content-Type", "text/html")
				for p := 1; p < size; p++ {
					fmt.Fprintf(w, `<a href="/p%d">%d</a>`, p, p)
				}
			default:
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprint(w, "<!DOCTYPE html><html><body>page</body></html>")
			}
		}))
		t.Cleanup(srv.Close)
		srvs = append(srvs, srv)
	}
	c := testConfig(t, srvs[0])
	c.Seeds = nil
	for _, srv := range srvs {
		c.Seeds = append(c.Seeds, srv.URL+"/")
	}
	c.Scope.AllowHosts = []string{"127.0.0.1"}
	c.Workers = 2
	c.Delay = 20 * time.Millisecond
	c.Recrawl.Interval = time.Hour
	// The small hosts' home pages are the same bytes (their links resolve
	// to each host's own pages): each is archived and read in full.
	c.WARC.Dedup = false
	total := 0
	for _, s := range sizes {
		total += s
	}
	hostOf := func(i int) string { return strings.TrimPrefix(srvs[i].URL, "http://") }

	// The first round, measured.
	n, stop := start(t, c)
	wait.For(t, 30*time.Second, "the first round", func() bool {
		k := n.Frontier().Counts()
		sn := n.snap.Load()
		return k.Completed == int64(total) && k.InList == 0 && k.InProgress == 0 && sn != nil && sn.bucket.Fetching == 0 && sn.pending == 0
	})
	stop()

	// Restarted: the costs come from the frontier.
	n, stop = start(t, c)
	defer stop()
	for i := range sizes {
		hs, ok, err := n.Frontier().Host(hostOf(i))
		if _, _, took, measured := hs.LatestRound(); err != nil || !ok || !measured || took <= 0 || hs.Admitted != int64(sizes[i]) {
			t.Fatalf("host %d after a restart: %+v %v %v; want a measured round of %d pages", i, hs, ok, err, sizes[i])
		}
	}
	mu.Lock()
	mark := len(log)
	mu.Unlock()
	if !n.releaseDue(context.Background(), time.Now().Add(2*time.Hour)) {
		t.Fatal("no revisit released")
	}
	n.notify()
	pages := func() int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, h := range log[mark:] {
			if h.path != "/robots.txt" {
				k++
			}
		}
		return k
	}
	wait.For(t, 30*time.Second, "the second round", func() bool { return pages() >= total })

	mu.Lock()
	var started []int // hosts in the order their second round began
	for _, h := range log[mark:] {
		if !slices.Contains(started, h.host) {
			started = append(started, h.host)
		}
	}
	mu.Unlock()
	if len(started) != len(sizes) {
		t.Fatalf("second round began on hosts %v, want all %d", started, len(sizes))
	}
	// Two workers: the two largest hosts' rounds start at once (in either
	// order at the servers), the largest within them, before any other.
	if !slices.Contains(started[:2], 4) || !slices.Contains(started[:2], 3) {
		t.Fatalf("second round began in host order %v (sizes %v): not the two largest first", started, sizes)
	}
	cost := make([]float64, len(sizes))
	found := make([]int, len(sizes))
	for i, s := range sizes {
		cost[i], found[i] = float64(s), i
	}
	r := []float64{1, 1}
	got := plan.Makespan(plan.RoundRobin(started, cost, r), cost, r)
	hash := plan.Makespan(plan.RoundRobin(found, cost, r), cost, r)
	if got > hash || got != plan.Makespan(plan.LPT(cost, r), cost, r) {
		t.Fatalf("second round in host order %v: makespan %v pages, %v in the order found; want LPT's, not above", started, got, hash)
	}
}
