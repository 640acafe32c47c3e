package node

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/clock"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"120", 2 * time.Minute, true},
		{" 3 ", 3 * time.Second, true},
		{"0", 0, true},
		{"-5", 0, false},
		{"soon", 0, false},
		{"Wed, 25 Nov 2026 09:00:30 GMT", 30 * time.Second, true},
		{"Wednesday, 25-Nov-26 09:01:00 GMT", time.Minute, true}, // RFC 850
		{"Wed, 25 Nov 2026 08:00:00 GMT", 0, true},               // past: at once
		{"99999999999999999999", 0, false},                       // overflows int64
	}
	for _, tc := range tests {
		got, ok := retryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %s %v, want %s %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// The back-off state machine: a 429's Retry-After or the grown delay,
// whichever is larger; 5xx only on the second in a row; good answers relax
// it; park after park_after back-offs in a row.
func TestBackoffsAnswered(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	ra := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	type step struct {
		status     int
		h          http.Header
		wantReason string
		wantPause  time.Duration
		wantParked bool
		wantLevel  int
	}
	tests := []struct {
		name  string
		delay time.Duration
		park  int // park_after; 0: 3
		steps []step
	}{
		{"429 honours Retry-After", 100 * time.Millisecond, 0, []step{
			{429, ra("7"), backoffRateLimited, 7 * time.Second, false, 1},
		}},
		{"429 without Retry-After: grown delay", 0, 10, []step{
			{429, nil, backoffRateLimited, time.Second, false, 1},
			{429, nil, backoffRateLimited, 2 * time.Second, false, 2},
			{429, nil, backoffRateLimited, 4 * time.Second, false, 3},
		}},
		{"Crawl-delay larger than Retry-After wins", 5 * time.Second, 0, []step{
			{429, ra("1"), backoffRateLimited, 5 * time.Second, false, 1},
		}},
		{"Retry-After capped at backoff_max", 0, 0, []step{
			{503, ra("86400"), backoffUnavailable, time.Minute, false, 1},
		}},
		{"503 without Retry-After is a 5xx", 0, 0, []step{
			{503, nil, "", 0, false, 0},
			{500, nil, backoffServerErrors, time.Second, false, 1},
		}},
		{"a good answer resets the 5xx run and relaxes", 0, 0, []step{
			{500, nil, "", 0, false, 0},
			{200, nil, "", 0, false, 0},
			{502, nil, "", 0, false, 0},
			{429, nil, backoffRateLimited, time.Second, false, 1},
			{429, nil, backoffRateLimited, 2 * time.Second, false, 2},
			{200, nil, "", 0, false, 0},
			{429, nil, backoffRateLimited, 2 * time.Second, false, 2}, // level 2-1+1
		}},
		{"4xx other than 429 asks nothing", 0, 0, []step{
			{404, ra("9"), "", 0, false, 0},
			{403, nil, "", 0, false, 0},
		}},
		{"parked after park_after back-offs in a row", 0, 0, []step{
			{429, ra("0"), backoffRateLimited, 0, false, 1},
			{429, ra("0"), backoffRateLimited, 0, false, 2},
			{429, ra("0"), backoffRateLimited, time.Hour, true, 3},
			{429, ra("0"), backoffRateLimited, 0, false, 4}, // strikes start again after a park
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			park := tc.park
			if park == 0 {
				park = 3
			}
			b := newBackoffs(time.Minute, park, time.Hour)
			for i, s := range tc.steps {
				at := now.Add(time.Duration(i) * 24 * time.Hour) // every pause is over by the next step
				v := b.answered("h.test", s.status, s.h, tc.delay, at)
				if v.reason != s.wantReason || v.parked != s.wantParked {
					t.Fatalf("step %d (%d): reason %q parked %v, want %q %v", i, s.status, v.reason, v.parked, s.wantReason, s.wantParked)
				}
				if v.reason == "" {
					continue
				}
				if got := v.until.Sub(at); got != s.wantPause || v.level != s.wantLevel {
					t.Fatalf("step %d (%d): pause %s level %d, want %s %d", i, s.status, got, v.level, s.wantPause, s.wantLevel)
				}
			}
		})
	}
}

// reqLog is a web server's own record of the requests it answered.
type reqLog struct {
	mu  sync.Mutex
	all []loggedReq
}

type loggedReq struct {
	at     time.Time
	path   string
	status int
}

func (l *reqLog) add(path string, status int) {
	l.mu.Lock()
	l.all = append(l.all, loggedReq{time.Now(), path, status})
	l.mu.Unlock()
}

func (l *reqLog) snapshot() []loggedReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedReq(nil), l.all...)
}

// backoffSite serves / linking to /p0../p(pages-1); refuse decides, per
// page request (counted from 1, robots.txt excluded), whether to answer
// with the given refusal instead of the page.
func backoffSite(t *testing.T, pages int, refuse func(k int, w http.ResponseWriter) bool) (*httptest.Server, *reqLog) {
	t.Helper()
	log := &reqLog{}
	var mu sync.Mutex
	k := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		k++
		kk := k
		mu.Unlock()
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		defer func() { log.add(r.URL.Path, rec.status) }()
		if refuse(kk, rec) {
			return
		}
		rec.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := 0; i < pages; i++ {
				fmt.Fprintf(rec, `<a href="/p%d">p</a>`, i)
			}
			return
		}
		fmt.Fprint(rec, "page")
	}))
	t.Cleanup(srv.Close)
	return srv, log
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// A host that answers 429 or 503 with Retry-After, or 5xx twice in a row,
// gets no request before its pause ends (asserted from the web server's
// own request records), and every page is fetched in the end: no URL is
// recorded as a final 4xx or 5xx.
func TestServerBackoff(t *testing.T) {
	const pages = 6
	var dateAt time.Time // when the 503's Retry-After date says to come back
	tests := []struct {
		name   string
		refuse func(k int, w http.ResponseWriter) bool
		resume func(refused time.Time) time.Time // no request before
		reason string
	}{
		{"429 Retry-After seconds", func(k int, w http.ResponseWriter) bool {
			if k == 3 {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
				return true
			}
			return false
		}, func(at time.Time) time.Time { return at.Add(2 * time.Second) }, backoffRateLimited},
		{"503 Retry-After HTTP date", func(k int, w http.ResponseWriter) bool {
			if k == 2 {
				dateAt = time.Now().Add(3 * time.Second).Truncate(time.Second)
				w.Header().Set("Retry-After", dateAt.UTC().Format(http.TimeFormat))
				w.WriteHeader(http.StatusServiceUnavailable)
				return true
			}
			return false
		}, func(time.Time) time.Time { return dateAt }, backoffUnavailable},
		{"500 twice in a row", func(k int, w http.ResponseWriter) bool {
			if k == 2 || k == 3 {
				w.WriteHeader(http.StatusInternalServerError)
				return true
			}
			return false
		}, func(at time.Time) time.Time { return at.Add(minBackoffPause) }, backoffServerErrors},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, log := backoffSite(t, pages, tc.refuse)
			c := testConfig(t, srv)
			c.Fetch.RetryBackoff = 50 * time.Millisecond // the first 500 is an ordinary stall
			n, stop := start(t, c)
			defer stop()
			wait.For(t, 30*time.Second, "every page fetched", func() bool {
				cn := n.Frontier().Counts()
				return cn.Completed == pages+1 && cn.InList == 0 && cn.InProgress == 0 && cn.Stalled == 0
			})
			for _, p := range append([]string{"/"}, pagePaths(pages)...) {
				r, ok, err := n.Frontier().Get(frontier.RefOf(srv.URL + p))
				if err != nil || !ok || r.State != frontier.Completed || r.Reason != "ok" || r.Status != 200 {
					t.Errorf("%s: %+v %v %v, want COMPLETED ok 200", p, r, ok, err)
				}
			}
			stop()
			reqs := log.snapshot()
			last := -1 // the refusal that started the back-off
			for i, r := range reqs {
				if r.status != 200 {
					last = i
				}
			}
			if last < 0 || last == len(reqs)-1 {
				t.Fatalf("no request after the refusal: %+v", reqs)
			}
			notBefore := tc.resume(reqs[last].at)
			if next := reqs[last+1]; next.at.Before(notBefore) {
				t.Errorf("request for %s at %s, %s after the %d; want none before %s", next.path, next.at.Format("15:04:05.000"),
					next.at.Sub(reqs[last].at), reqs[last].status, notBefore.Format("15:04:05.000"))
			}
			if got := labelledCounter(t, n, "phasecrawl_host_backoffs_total", tc.reason); got != 1 {
				t.Errorf("phasecrawl_host_backoffs_total{reason=%q} = %g, want 1", tc.reason, got)
			}
		})
	}
}

// A host that keeps refusing is parked: the reason is in the crawl log,
// phasecrawl_hosts_parked counts it, and it gets no request while parked:
// its URL stays STALLED through the retry lane's ticks (on the node's
// clock, a fake one stopped and moved by hand once the host is parked).
func TestServerBackoffParks(t *testing.T) {
	srv, log := backoffSite(t, 3, func(k int, w http.ResponseWriter) bool {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	})
	c := testConfig(t, srv)
	c.Fetch.ParkAfter = 2
	f := clock.NewFake(time.Now())
	stopClock := runClock(t, f)
	n, stop := startWith(t, c, Options{Clock: f})
	defer stop()
	wait.For(t, 30*time.Second, "host parked", func() bool { return gaugeValue(t, n, "phasecrawl_hosts_parked") == 1 })
	stopClock()
	seen := len(log.snapshot())
	// Two retry lane ticks: the lane has taken the second once the first
	// one's pass is over, in which a parked host's URL would be released.
	for range 2 {
		f.Advance(time.Second)
		wait.For(t, 30*time.Second, "the node took the clock's ticks", func() bool { return f.Unread() == 0 })
	}
	if got := len(log.snapshot()); got != seen {
		t.Errorf("%d requests while parked", got-seen)
	}
	r, ok, err := n.Frontier().Get(frontier.RefOf(srv.URL + "/"))
	if err != nil || !ok || r.State != frontier.Stalled || r.Reason != "host_parked" || r.Tries != 1 {
		t.Errorf("/: %+v %v %v, want STALLED host_parked after 1 try", r, ok, err)
	}
	runClock(t, f) // the node's shutdown runs on it
	stop()
	var parked []string
	if _, err := archive.ReadCrawlLog(filepath.Join(c.Data, crawlLogName), func(e archive.LogEntry) error {
		if e.Reason == "host_parked" {
			parked = append(parked, e.Error)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(parked) != 1 || !strings.Contains(parked[0], "back-offs in a row") || !strings.Contains(parked[0], "HTTP 429") {
		t.Errorf("crawl log host_parked lines: %q", parked)
	}
}

func pagePaths(k int) []string {
	var ps []string
	for i := 0; i < k; i++ {
		ps = append(ps, fmt.Sprintf("/p%d", i))
	}
	return ps
}

// labelledCounter reads one series of a counter vector from the node's registry (0 when absent).
func labelledCounter(t *testing.T, n *Node, name, value string) float64 {
	t.Helper()
	mfs, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// gaugeValue reads an unlabelled gauge from the node's registry.
func gaugeValue(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	mfs, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0
}

// A robots.txt answering 429 is a back-off too: no request before its
// Retry-After, robots.txt is asked again then (the failure is not cached
// for robots.error_ttl), and every page is fetched.
func TestServerBackoffRobots(t *testing.T) {
	log := &reqLog{}
	var mu sync.Mutex
	robots := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := 200
		defer func() { log.add(r.URL.Path, status) }()
		if r.URL.Path == "/robots.txt" {
			mu.Lock()
			robots++
			first := robots == 1
			mu.Unlock()
			if first {
				status = http.StatusTooManyRequests
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(status)
				return
			}
			status = http.StatusNotFound
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(w, `<a href="/p0">p</a><a href="/p1">p</a>`)
			return
		}
		fmt.Fprint(w, "page")
	}))
	t.Cleanup(srv.Close)
	c := testConfig(t, srv)
	n, stop := start(t, c)
	defer stop()
	wait.For(t, 30*time.Second, "every page fetched", func() bool {
		cn := n.Frontier().Counts()
		return cn.Completed == 3 && cn.InList == 0 && cn.InProgress == 0 && cn.Stalled == 0
	})
	for _, p := range []string{"/", "/p0", "/p1"} {
		r, ok, err := n.Frontier().Get(frontier.RefOf(srv.URL + p))
		if err != nil || !ok || r.Reason != "ok" || r.Status != 200 {
			t.Errorf("%s: %+v %v %v, want COMPLETED ok 200", p, r, ok, err)
		}
	}
	stop()
	reqs := log.snapshot()
	if len(reqs) < 2 || reqs[0].status != http.StatusTooManyRequests {
		t.Fatalf("requests %+v, want a 429 first", reqs)
	}
	if next := reqs[1]; next.at.Before(reqs[0].at.Add(2 * time.Second)) {
		t.Errorf("request for %s %s after the robots.txt 429 with Retry-After 2", next.path, next.at.Sub(reqs[0].at))
	}
}
