package robots

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/urlscope"
	"github.com/temoto/robotstxt"
)

type fakeResp struct {
	status int
	loc    string
	body   string
	err    error
}

// fakeWeb serves robots.txt answers by URL and counts requests.
type fakeWeb struct {
	mu    sync.Mutex
	resp  map[string]fakeResp
	calls map[string]int
	total atomic.Int64
}

func newFakeWeb(resp map[string]fakeResp) *fakeWeb {
	return &fakeWeb{resp: resp, calls: map[string]int{}}
}

func (w *fakeWeb) get(ctx context.Context, u string) (int, http.Header, []byte, error) {
	w.total.Add(1)
	w.mu.Lock()
	w.calls[u]++
	r, ok := w.resp[u]
	w.mu.Unlock()
	if !ok {
		return 404, nil, nil, nil
	}
	if r.err != nil {
		return 0, nil, nil, r.err
	}
	h := http.Header{}
	if r.loc != "" {
		h.Set("Location", r.loc)
	}
	return r.status, h, []byte(r.body), nil
}

func (w *fakeWeb) set(u string, r fakeResp) {
	w.mu.Lock()
	w.resp[u] = r
	w.mu.Unlock()
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	n, err := urlscope.Normalize(s)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(n)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestRobotsCheck(t *testing.T) {
	const h = "http://h.example/robots.txt"
	type check struct {
		path    string
		allowed bool
		delay   time.Duration
		err     error // errors.Is target; allowed must be false
	}
	tests := []struct {
		name   string
		cfg    Config
		resp   map[string]fakeResp
		checks []check
		gets   int64 // expected get calls for all checks (0 = don't care)
	}{
		{name: "allow and disallow", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /private\nAllow: /private/ok\nDisallow: /*.pdf$\nDisallow: /*?ref=\n"}},
			checks: []check{
				{path: "/", allowed: true}, {path: "/public/x", allowed: true},
				{path: "/private", allowed: false}, {path: "/private/x", allowed: false}, {path: "/privateer", allowed: false},
				{path: "/private/ok/x", allowed: true},
				{path: "/a/b.pdf", allowed: false}, {path: "/a/b.pdf?x=1", allowed: true},
				{path: "/a?ref=3", allowed: false}, {path: "/a?b=1&ref=3", allowed: true},
				{path: "/robots.txt", allowed: true},
			}, gets: 1},
		{name: "disallow all still allows robots.txt", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /\n"}},
			checks: []check{{path: "/", allowed: false}, {path: "/x", allowed: false}, {path: "/robots.txt", allowed: true}}},
		{name: "empty file allows all", resp: map[string]fakeResp{h: {status: 200, body: "\n\n"}},
			checks: []check{{path: "/x", allowed: true}}},
		{name: "404 allows all", resp: map[string]fakeResp{},
			checks: []check{{path: "/x", allowed: true}, {path: "/y", allowed: true}}, gets: 1},
		{name: "403 allows all", resp: map[string]fakeResp{h: {status: 403, body: "User-agent: *\nDisallow: /"}},
			checks: []check{{path: "/x", allowed: true}}},
		{name: "500 disallows all", resp: map[string]fakeResp{h: {status: 503}},
			checks: []check{{path: "/x", err: ErrUnavailable}, {path: "/robots.txt", err: ErrUnavailable}}, gets: 1},
		{name: "429 disallows all", resp: map[string]fakeResp{h: {status: 429}},
			checks: []check{{path: "/x", err: ErrUnavailable}}},
		{name: "network error disallows all", resp: map[string]fakeResp{h: {err: errConnRefused}},
			checks: []check{{path: "/x", err: ErrUnavailable}, {path: "/y", err: errConnRefused}}, gets: 1},
		{name: "redirect chain of 5", resp: map[string]fakeResp{
			h:                           {status: 301, loc: "/r1"},
			"http://h.example/r1":       {status: 302, loc: "http://other.example/r2"},
			"http://other.example/r2":   {status: 307, loc: "r3"},
			"http://other.example/r3":   {status: 308, loc: "//third.example/r4"},
			"http://third.example/r4":   {status: 303, loc: "https://third.example:443/r5#frag"},
			"https://third.example/r5":  {status: 200, body: "User-agent: *\nDisallow: /no\n"},
			"http://unused.example/r99": {status: 200},
		}, checks: []check{{path: "/no", allowed: false}, {path: "/yes", allowed: true}}, gets: 6},
		{name: "6 redirects: allow all", resp: map[string]fakeResp{
			h:                     {status: 301, loc: "/r1"},
			"http://h.example/r1": {status: 301, loc: "/r2"}, "http://h.example/r2": {status: 301, loc: "/r3"},
			"http://h.example/r3": {status: 301, loc: "/r4"}, "http://h.example/r4": {status: 301, loc: "/r5"},
			"http://h.example/r5": {status: 301, loc: "/r6"},
			"http://h.example/r6": {status: 200, body: "User-agent: *\nDisallow: /\n"},
		}, checks: []check{{path: "/x", allowed: true}}, gets: 6},
		{name: "redirect loop: allow all", resp: map[string]fakeResp{
			h: {status: 301, loc: "/robots.txt"},
		}, checks: []check{{path: "/x", allowed: true}, {path: "/y", allowed: true}}, gets: 6},
		{name: "redirect without Location: allow all", resp: map[string]fakeResp{h: {status: 302}},
			checks: []check{{path: "/x", allowed: true}}},
		{name: "redirect to javascript: allow all", resp: map[string]fakeResp{h: {status: 302, loc: "javascript:x"}},
			checks: []check{{path: "/x", allowed: true}}},
		{name: "redirect to a 5xx", resp: map[string]fakeResp{h: {status: 302, loc: "/x"}, "http://h.example/x": {status: 500}},
			checks: []check{{path: "/x", err: ErrUnavailable}}},
		{name: "crawl-delay fractional", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nCrawl-delay: 0.5\n"}},
			checks: []check{{path: "/", allowed: true, delay: 500 * time.Millisecond}}},
		{name: "crawl-delay capped", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nCrawl-delay: 3600\n"}},
			checks: []check{{path: "/", allowed: true, delay: 30 * time.Second}}},
		{name: "crawl-delay huge", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nCrawl-delay: 1e300\n"}},
			checks: []check{{path: "/", allowed: true, delay: 30 * time.Second}}},
		{name: "crawl-delay ignored", cfg: Config{MaxCrawlDelay: -1}, resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nCrawl-delay: 5\n"}},
			checks: []check{{path: "/", allowed: true, delay: 0}}},
		{name: "bad lines do not spoil the file", resp: map[string]fakeResp{h: {status: 200, body: "Disallow: /x-before\nCrawl-delay: 9\n" +
			"User-agent: *\nCrawl-delay: soon\nCrawl-delay: -3\nDisallow: /a\nnonsense line\nSitemap: http://h.example/s.xml\nDisallow: /b # comment\n"}},
			checks: []check{{path: "/x-before", allowed: true}, {path: "/a", allowed: false}, {path: "/b", allowed: false}, {path: "/c", allowed: true, delay: 0}}},
		{name: "our group wins over *", cfg: Config{UserAgent: "PhaseCrawl/0.1 (+https://example.com/bot)"},
			resp:   map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /\n\nUser-agent: phasecrawl\nDisallow: /mine\nCrawl-delay: 2\n"}},
			checks: []check{{path: "/x", allowed: true, delay: 2 * time.Second}, {path: "/mine", allowed: false, delay: 2 * time.Second}}},
		{name: "product token matched exactly, not by prefix", cfg: Config{UserAgent: "phasecrawl/0.1"},
			resp:   map[string]fakeResp{h: {status: 200, body: "User-agent: phase\nDisallow: /\n\nUser-agent: phasecrawler\nDisallow: /\n\nUser-agent: *\nDisallow: /star\n"}},
			checks: []check{{path: "/x", allowed: true}, {path: "/star", allowed: false}}},
		{name: "UA line with version matches our token", cfg: Config{UserAgent: "phasecrawl"},
			resp:   map[string]fakeResp{h: {status: 200, body: "User-agent: PhaseCrawl/2.0\nDisallow: /v\n\nUser-agent: *\nDisallow: /\n"}},
			checks: []check{{path: "/x", allowed: true}, {path: "/v", allowed: false}}},
		{name: "consecutive agents share a group; groups merge", cfg: Config{UserAgent: "phasecrawl"},
			resp:   map[string]fakeResp{h: {status: 200, body: "User-agent: other\nUser-agent: phasecrawl\nDisallow: /a\n\nUser-agent: phasecrawl\nDisallow: /b\nUser-agent: *\nDisallow: /\n"}},
			checks: []check{{path: "/a", allowed: false}, {path: "/b", allowed: false}, {path: "/c", allowed: true}}},
		{name: "empty disallow ends the agent list", cfg: Config{UserAgent: "phasecrawl"},
			resp:   map[string]fakeResp{h: {status: 200, body: "User-agent: phasecrawl\nDisallow:\n\nUser-agent: *\nDisallow: /\n"}},
			checks: []check{{path: "/x", allowed: true}}},
		{name: "our group with no rules at end of file", cfg: Config{UserAgent: "phasecrawl"},
			resp:   map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /\n\nUser-agent: phasecrawl\n"}},
			checks: []check{{path: "/x", allowed: true}}},
		{name: "allow wins a tie", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /page\nAllow: /page\n"}},
			checks: []check{{path: "/page", allowed: true}}},
		{name: "longest match wins", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nAllow: /a\nDisallow: /a/b\nAllow: /a/b/c\n"}},
			checks: []check{{path: "/a/x", allowed: true}, {path: "/a/b/x", allowed: false}, {path: "/a/b/c/x", allowed: true}}},
		{name: "percent-encoding compared normalized", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /%7euser\nDisallow: /ü\nDisallow: /a b\n"}},
			checks: []check{{path: "/~user/x", allowed: false}, {path: "/%C3%BC", allowed: false}, {path: "/a%20b", allowed: false}, {path: "/ok", allowed: true}}},
		{name: "CR line endings and BOM", resp: map[string]fakeResp{h: {status: 200, body: "\xef\xbb\xbfUser-agent: *\rDisallow: /cr\r\nDisallow: /crlf\r\n"}},
			checks: []check{{path: "/cr", allowed: false}, {path: "/crlf", allowed: false}, {path: "/x", allowed: true}}},
		{name: "huge file: only the first MaxSize bytes", cfg: Config{MaxSize: 1000},
			resp:   map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /early\n" + strings.Repeat("# padding padding\n", 100) + "Disallow: /late\n"}},
			checks: []check{{path: "/early", allowed: false}, {path: "/late", allowed: true}}},
		{name: "huge file: default 500 KiB", resp: map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /early\n" +
			strings.Repeat("Disallow: /filler/"+strings.Repeat("x", 100)+"\n", 5000) + "Disallow: /late\n"}},
			checks: []check{{path: "/early", allowed: false}, {path: "/filler/" + strings.Repeat("x", 100), allowed: false}, {path: "/late", allowed: true}}},
		{name: "rule cut mid-line is dropped", cfg: Config{MaxSize: 30},
			resp:   map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /abcdefghijklmnop\n"}},
			checks: []check{{path: "/abc", allowed: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newFakeWeb(tt.resp)
			r := NewCache(tt.cfg)
			for _, c := range tt.checks {
				allowed, delay, err := r.Check(context.Background(), mustURL(t, "http://h.example"+c.path), w.get)
				if c.err != nil {
					if allowed || !errors.Is(err, c.err) {
						t.Errorf("%s: allowed=%v err=%v; want false, %v", c.path, allowed, err, c.err)
					}
					continue
				}
				if err != nil || allowed != c.allowed || delay != c.delay {
					t.Errorf("%s: got %v, %v, %v; want %v, %v", c.path, allowed, delay, err, c.allowed, c.delay)
				}
			}
			if tt.gets != 0 && w.total.Load() != tt.gets {
				t.Errorf("get called %d times, want %d: %v", w.total.Load(), tt.gets, w.calls)
			}
		})
	}
}

var errConnRefused = errors.New("connection refused")

func TestRobotsPerOrigin(t *testing.T) {
	w := newFakeWeb(map[string]fakeResp{
		"http://h.example/robots.txt":      {status: 200, body: "User-agent: *\nDisallow: /plain\n"},
		"https://h.example/robots.txt":     {status: 200, body: "User-agent: *\nDisallow: /secure\n"},
		"http://h.example:8080/robots.txt": {status: 200, body: "User-agent: *\nDisallow: /8080\n"},
	})
	r := NewCache(Config{})
	for _, c := range []struct {
		u  string
		ok bool
	}{
		{"http://h.example/plain", false}, {"http://h.example/secure", true},
		{"https://h.example/secure", false}, {"https://h.example/plain", true},
		{"http://h.example:8080/8080", false}, {"http://H.EXAMPLE:8080/plain", true},
	} {
		ok, _, err := r.Check(context.Background(), mustURL(t, c.u), w.get)
		if err != nil || ok != c.ok {
			t.Errorf("%s: %v, %v; want %v", c.u, ok, err, c.ok)
		}
	}
	if w.total.Load() != 3 {
		t.Errorf("gets = %d, want 3", w.total.Load())
	}
	for _, u := range []*url.URL{nil, {Scheme: "ftp", Host: "x"}, {Scheme: "http"}} {
		if ok, _, err := r.Check(context.Background(), u, w.get); ok || !errors.Is(err, urlscope.ErrScheme) {
			t.Errorf("Check(%v) = %v, %v", u, ok, err)
		}
	}
}

func TestRobotsTTL(t *testing.T) {
	const h = "http://h.example/robots.txt"
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	w := newFakeWeb(map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /a\n"}})
	r := NewCache(Config{Now: clk.Now, TTL: time.Hour, ErrorTTL: 10 * time.Minute})
	check := func(path string, wantOK bool, wantErr error, wantGets int64) {
		t.Helper()
		ok, _, err := r.Check(context.Background(), mustURL(t, "http://h.example"+path), w.get)
		if ok != wantOK || (wantErr == nil) != (err == nil) || (wantErr != nil && !errors.Is(err, wantErr)) {
			t.Errorf("%s at %v: %v, %v; want %v, %v", path, clk.Now(), ok, err, wantOK, wantErr)
		}
		if g := w.total.Load(); g != wantGets {
			t.Errorf("%s at %v: %d gets, want %d", path, clk.Now(), g, wantGets)
		}
	}
	check("/a", false, nil, 1)
	clk.Add(59 * time.Minute)
	check("/a", false, nil, 1) // cached
	w.set(h, fakeResp{status: 200, body: "User-agent: *\nDisallow: /b\n"})
	clk.Add(time.Minute)
	check("/a", true, nil, 2) // expired: refetched
	check("/b", false, nil, 2)

	// refresh fails: the expired copy is used for another ErrorTTL
	w.set(h, fakeResp{status: 500})
	clk.Add(time.Hour)
	check("/b", false, nil, 3)
	check("/a", true, nil, 3)
	clk.Add(10 * time.Minute)
	check("/a", true, nil, 4) // retried, still failing, still the old copy

	// a host with no copy: disallowed for ErrorTTL, then retried
	const h2 = "http://h2.example/robots.txt"
	w.set(h2, fakeResp{status: 502})
	check2 := func(wantOK bool, wantErr error, wantGets int64) {
		t.Helper()
		ok, _, err := r.Check(context.Background(), mustURL(t, "http://h2.example/x"), w.get)
		if ok != wantOK || !errors.Is(err, wantErr) || w.total.Load() != wantGets {
			t.Errorf("h2 at %v: %v, %v, %d gets; want %v, %v, %d", clk.Now(), ok, err, w.total.Load(), wantOK, wantErr, wantGets)
		}
	}
	check2(false, ErrUnavailable, 5)
	clk.Add(9 * time.Minute)
	check2(false, ErrUnavailable, 5)
	w.set(h2, fakeResp{status: 404})
	clk.Add(time.Minute)
	check2(true, nil, 6)
}

func TestRobotsLRU(t *testing.T) {
	w := newFakeWeb(map[string]fakeResp{})
	r := NewCache(Config{CacheSize: 2})
	for _, h := range []string{"a", "b", "a", "c", "a", "b"} {
		if _, _, err := r.Check(context.Background(), mustURL(t, "http://"+h+".example/"), w.get); err != nil {
			t.Fatal(err)
		}
	}
	// a, b fetched; a hit; c evicts b; a hit; b refetched (evicts c)
	if got := w.total.Load(); got != 4 {
		t.Errorf("gets = %d, want 4 (%v)", got, w.calls)
	}
}

func TestRobotsSingleflight(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	get := func(ctx context.Context, u string) (int, http.Header, []byte, error) {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return 0, nil, nil, ctx.Err()
		}
		return 200, nil, []byte("User-agent: *\nDisallow: /no\nCrawl-delay: 1\n"), nil
	}
	r := NewCache(Config{})
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			path := "/yes"
			if i%2 == 0 {
				path = "/no"
			}
			ok, d, err := r.Check(context.Background(), mustURL(t, "http://same.example"+path), get)
			if err != nil || ok != (i%2 == 1) || d != time.Second {
				errs <- fmt.Errorf("check %d: %v %v %v", i, ok, d, err)
			}
		}(i)
	}
	// wait until the leader is inside get, then let everyone pile up: no
	// state tells that a check waits on the leader, so a pause does
	wait.For(t, 10*time.Second, "the leader inside get", func() bool { return calls.Load() > 0 })
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("get called %d times, want 1", c)
	}
}

func TestRobotsContextCanceled(t *testing.T) {
	started := make(chan struct{})
	var calls atomic.Int64
	blocking := func(ctx context.Context, u string) (int, http.Header, []byte, error) {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-ctx.Done()
		return 0, nil, nil, ctx.Err()
	}
	r := NewCache(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	leaderDone := make(chan error, 1)
	go func() {
		_, _, err := r.Check(ctx, mustURL(t, "http://c.example/x"), blocking)
		leaderDone <- err
	}()
	<-started
	// a waiter with its own live context takes over after the leader gives up
	waiterDone := make(chan error, 1)
	go func() {
		ok, _, err := r.Check(context.Background(), mustURL(t, "http://c.example/x"), func(ctx context.Context, u string) (int, http.Header, []byte, error) {
			calls.Add(1)
			return 404, nil, nil, nil
		})
		if err == nil && !ok {
			err = errors.New("not allowed")
		}
		waiterDone <- err
	}()
	time.Sleep(10 * time.Millisecond) // the waiter joins the leader's call: no state tells when it does
	cancel()
	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Errorf("leader err = %v, want context.Canceled", err)
	}
	if err := <-waiterDone; err != nil {
		t.Errorf("waiter: %v", err)
	}
	// the cancellation was not cached as unavailability
	ok, _, err := r.Check(context.Background(), mustURL(t, "http://c.example/y"), blocking)
	if !ok || err != nil {
		t.Errorf("after cancel: %v, %v", ok, err)
	}
}

func TestCanonicalRobotsParses(t *testing.T) {
	// temoto rejects a whole file for one bad line; our pre-pass must not let that happen
	for _, body := range []string{
		"Disallow: /x\nUser-agent: *\nCrawl-delay: x\nCrawl-delay: -1\nCrawl-delay: NaN\nCrawl-delay: Inf\nDisallow: /a*b$\n",
		"User-agent: *\nDisallow: " + strings.Repeat("*a", 3000) + "\n",
		"User-agent: *\nDisallow: /a b c\nAllow: :x\nDisallow: $\n",
		"\x00\xff\xfeUser-agent:\x00*\n",
	} {
		if _, err := robotstxt.FromBytes(canonicalRobots([]byte(body), "phasecrawl")); err != nil {
			t.Errorf("canonical form of %q does not parse: %v", body, err)
		}
	}
}

func FuzzRobots(f *testing.F) {
	f.Add(200, []byte("User-agent: *\nDisallow: /a\nCrawl-delay: 0.5\n"), "/a?b")
	f.Add(200, []byte("User-agent: phasecrawl\nAllow: /*$\nDisallow: /\n"), "/x")
	f.Add(301, []byte(""), "/")
	f.Add(503, []byte(""), "/")
	f.Add(200, []byte("Disallow: /x\nUser-agent: *\nCrawl-delay: x\nDisallow: /%zz*$$**\n"), "/%25zz")
	f.Fuzz(func(t *testing.T, status int, body []byte, path string) {
		get := func(ctx context.Context, u string) (int, http.Header, []byte, error) {
			h := http.Header{}
			h.Set("Location", string(body))
			return status, h, body, nil
		}
		if _, err := robotstxt.FromBytes(canonicalRobots(body, "phasecrawl")); err != nil {
			t.Fatalf("canonical form does not parse: %v", err)
		}
		r := NewCache(Config{UserAgent: "phasecrawl/1.0"})
		n, err := urlscope.Normalize("http://f.example/" + path)
		if err != nil {
			return
		}
		u, _ := url.Parse(n)
		_, d, _ := r.Check(context.Background(), u, get)
		if d < 0 || d > 30*time.Second {
			t.Fatalf("crawl delay %v out of range", d)
		}
	})
}

// TestRobotsAborted: a get that declines to send (ErrAborted) is returned
// as an error and caches nothing: the next Check fetches robots.txt.
func TestRobotsAborted(t *testing.T) {
	const h = "http://h.example/robots.txt"
	w := newFakeWeb(map[string]fakeResp{h: {status: 200, body: "User-agent: *\nDisallow: /a\n"}})
	r := NewCache(Config{TTL: time.Hour, ErrorTTL: 10 * time.Minute})
	aborted := fmt.Errorf("phase closing: %w", ErrAborted)
	_, _, err := r.Check(context.Background(), mustURL(t, "http://h.example/a"), func(context.Context, string) (int, http.Header, []byte, error) {
		return 0, nil, nil, aborted
	})
	if !errors.Is(err, ErrAborted) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("aborted get: err = %v, want ErrAborted and not ErrUnavailable", err)
	}
	ok, _, err := r.Check(context.Background(), mustURL(t, "http://h.example/a"), w.get)
	if err != nil || ok || w.total.Load() != 1 {
		t.Fatalf("after an aborted get: ok=%v err=%v gets=%d; want the real robots.txt fetched (disallowed, 1 get)", ok, err, w.total.Load())
	}
}
