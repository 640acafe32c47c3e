package exchange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

var (
	testKey  = bytes.Repeat([]byte{0x42}, 32)
	otherKey = bytes.Repeat([]byte{0x17}, 32)
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeInserter is a map-based URLStore with dedup, like the frontier.
type fakeInserter struct {
	mu    sync.Mutex
	seen  map[string]int // URL -> times delivered
	done  map[string]int // completed records
	added int            // URLs reported new (must end == distinct URLs)
	gate  chan struct{}  // if set, the first Add blocks until it is closed
	fail  atomic.Int32   // fail this many Adds
}

func newFakeInserter() *fakeInserter {
	return &fakeInserter{seen: map[string]int{}, done: map[string]int{}}
}

func (f *fakeInserter) failing() bool {
	for {
		n := f.fail.Load()
		if n <= 0 {
			return false
		}
		if f.fail.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (f *fakeInserter) Add(ctx context.Context, urls []frontier.NewURL) (int, error) {
	if f.failing() {
		return 0, errors.New("disk full (fake)")
	}
	f.mu.Lock()
	gate := f.gate
	f.gate = nil
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, u := range urls {
		if f.seen[u.URL] == 0 {
			n++
		}
		f.seen[u.URL]++
	}
	f.added += n
	return n, nil
}

func (f *fakeInserter) AddDone(ctx context.Context, urls []frontier.NewURL) (int, error) {
	if f.failing() {
		return 0, errors.New("disk full (fake)")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range urls {
		f.done[u.URL]++
	}
	return len(urls), nil
}

func (f *fakeInserter) distinct() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

func (f *fakeInserter) check(t *testing.T, n int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	dups := 0
	for _, c := range f.seen {
		dups += c - 1
	}
	if len(f.seen) != n || f.added != n {
		t.Errorf("inserter has %d distinct URLs, %d added; want %d", len(f.seen), f.added, n)
	}
	t.Logf("delivered %d URLs exactly once into the inserter (%d duplicate deliveries absorbed by dedup)", n, dups)
}

func testURLs(prefix string, n int) []frontier.NewURL {
	us := make([]frontier.NewURL, n)
	for i := range us {
		h := fmt.Sprintf("h%d.synth.test", i%97)
		us[i] = frontier.NewURL{URL: fmt.Sprintf("http://%s/%s/%d", h, prefix, i), Host: h, Depth: i % 5}
	}
	return us
}

// addrBook maps member names to exchange addresses (the members' metadata).
type addrBook struct {
	mu sync.Mutex
	m  map[string]string
}

func (a *addrBook) set(name, addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]string{}
	}
	if addr == "" {
		delete(a.m, name)
	} else {
		a.m[name] = addr
	}
}

func (a *addrBook) get(name string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.m[name]
	return s, ok
}

type testNode struct {
	name string
	ob   *Outbox
	x    *Stream
	ins  *fakeInserter
}

func openTestOutbox(t *testing.T, path string) *Outbox {
	t.Helper()
	ob, err := OpenOutbox(OutboxConfig{Path: path, NoSync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

func startTestExchange(t *testing.T, name, listen string, key []byte, ob *Outbox, ins *fakeInserter,
	owner func(frontier.NewURL) string, book *addrBook, hook ...func(string, Batch)) *Stream {
	t.Helper()
	var onBatch func(string, Batch)
	if len(hook) > 0 {
		onBatch = hook[0]
	}
	x, err := New(Config{
		onBatch: onBatch,
		Name:    name, Listen: listen, Key: key, Outbox: ob, Local: StoreReceiver(ins), Directory: testDir{owner: owner, addr: book.get},
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, AckTimeout: 10 * time.Second,
		Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	book.set(name, x.Addr())
	return x
}

func newTestNode(t *testing.T, name string, key []byte, owner func(frontier.NewURL) string, book *addrBook, hook ...func(string, Batch)) *testNode {
	t.Helper()
	return newTestNodeIns(t, name, key, owner, book, newFakeInserter(), hook...)
}

func newTestNodeIns(t *testing.T, name string, key []byte, owner func(frontier.NewURL) string, book *addrBook, ins *fakeInserter, hook ...func(string, Batch)) *testNode {
	t.Helper()
	n := &testNode{name: name, ins: ins}
	n.ob = openTestOutbox(t, filepath.Join(t.TempDir(), "outbox.db"))
	n.x = startTestExchange(t, name, "127.0.0.1:0", key, n.ob, n.ins, owner, book, hook...)
	t.Cleanup(func() { n.x.Close(); n.ob.Close() })
	return n
}

// testDir is a Directory of two functions.
type testDir struct {
	owner func(frontier.NewURL) string
	addr  func(string) (string, bool)
}

func (d testDir) OwnerOf(u frontier.NewURL) string  { return d.owner(u) }
func (d testDir) AddrOf(peer string) (string, bool) { return d.addr(peer) }

func allTo(name string) func(frontier.NewURL) string {
	return func(frontier.NewURL) string { return name }
}

func route(t *testing.T, x *Stream, urls []frontier.NewURL, chunk int) {
	t.Helper()
	for i := 0; i < len(urls); i += chunk {
		if _, err := x.Route(context.Background(), urls[i:min(i+chunk, len(urls))]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExchange100kMessagesPer100(t *testing.T) {
	book := &addrBook{}
	a := newTestNode(t, "a", testKey, allTo("b"), book)
	b := newTestNode(t, "b", testKey, allTo("b"), book)
	const n = 100_000
	route(t, a.x, testURLs("flow", n), 500)
	wait.For(t, 60*time.Second, "100k URLs at b", func() bool { return b.ins.distinct() == n })
	wait.For(t, 10*time.Second, "empty outbox", func() bool { return a.ob.Len() == 0 })
	b.ins.check(t, n)
	sa, sb := a.x.Stats(), b.x.Stats()
	if sa.URLsForwarded != n || sb.URLsReceived != n || sb.URLsAdded != n {
		t.Errorf("forwarded %d, received %d, added %d; want %d", sa.URLsForwarded, sb.URLsReceived, sb.URLsAdded, n)
	}
	per100 := float64(sa.BatchesSent) * 100 / n
	t.Logf("%d URLs in %d batches (+%d acks): %.3f batch messages per 100 URLs, %d dials",
		n, sa.BatchesSent, sa.AcksReceived, per100, sa.Dials)
	if per100 > 1 {
		t.Errorf("%.3f messages per 100 URLs, want <= 1", per100)
	}
	if sa.Dials != 1 {
		t.Errorf("%d connections, want 1 long-lived", sa.Dials)
	}
}

// proxy forwards TCP between a sender and a receiver and can cut them.
type proxy struct {
	ln       net.Listener
	target   string
	dropAcks atomic.Bool // close the connection instead of forwarding the next reply
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startProxy(t *testing.T, listen, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(d, c); d.Close(); c.Close() }()
			go func() {
				defer p.wg.Done()
				defer c.Close()
				defer d.Close()
				buf := make([]byte, 32<<10)
				for {
					k, err := d.Read(buf)
					if k > 0 {
						if p.dropAcks.CompareAndSwap(true, false) {
							return // the ack is lost
						}
						if _, werr := c.Write(buf[:k]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *proxy) kill() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func TestExchangeSurvivesKilledConnections(t *testing.T) {
	book := &addrBook{}
	a := newTestNode(t, "a", testKey, allTo("b"), book)
	bIns := newFakeInserter()
	bOb := openTestOutbox(t, filepath.Join(t.TempDir(), "b.db"))
	defer bOb.Close()
	hook := func(from string, b Batch) {}
	bx := startTestExchange(t, "b", "127.0.0.1:0", testKey, bOb, bIns, allTo("b"), book, hook)
	bAddr := bx.Addr()
	px := startProxy(t, "127.0.0.1:0", bAddr)
	pAddr := px.ln.Addr().String()
	book.set("b", pAddr)

	const n = 100_000
	urls := testURLs("kill", n)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i += 1000 {
			if _, err := a.x.Route(context.Background(), urls[i:i+1000]); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()

	// 1. A lost ack: the batch is stored but the sender never hears of it.
	wait.For(t, 30*time.Second, "20k at b", func() bool { return bIns.distinct() >= 20_000 })
	px.dropAcks.Store(true)
	// 2. Kill the proxy (every connection) and bring it back.
	wait.For(t, 30*time.Second, "40k at b", func() bool { return bIns.distinct() >= 40_000 })
	px.kill()
	time.Sleep(100 * time.Millisecond)
	px = startProxy(t, pAddr, bAddr)
	// 3. Restart the receiver itself on the same address.
	wait.For(t, 30*time.Second, "60k at b", func() bool { return bIns.distinct() >= 60_000 })
	bx.Close()
	time.Sleep(100 * time.Millisecond)
	bx = startTestExchange(t, "b", bAddr, testKey, bOb, bIns, allTo("b"), &addrBook{}, hook)
	defer bx.Close()
	defer px.kill()

	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wait.For(t, 60*time.Second, "all URLs at b", func() bool { return bIns.distinct() == n })
	wait.For(t, 10*time.Second, "empty outbox", func() bool { return a.ob.Len() == 0 })
	bIns.check(t, n)
	s := a.x.Stats()
	bIns.mu.Lock()
	twice := 0
	for _, c := range bIns.seen {
		if c > 1 {
			twice++
		}
	}
	bIns.mu.Unlock()
	t.Logf("sender: %d batches (%d resent), %d dials, %d failures", s.BatchesSent, s.BatchesResent, s.Dials, s.DialErrors)
	if s.BatchesResent == 0 || twice == 0 {
		t.Errorf("expected the batch of a lost ack sent again (resent=%d, URLs delivered twice=%d)", s.BatchesResent, twice)
	}
	if s.Dials < 3 {
		t.Errorf("dials = %d, want >= 3 (reconnects)", s.Dials)
	}
}

func TestExchangeSenderRestartResends(t *testing.T) {
	book := &addrBook{}
	gate := make(chan struct{})
	ins := newFakeInserter()
	ins.gate = gate // the first batch is received but not acked until a is gone
	var first atomic.Pointer[Batch]
	b := newTestNodeIns(t, "b", testKey, allTo("b"), book, ins, func(from string, bt Batch) {
		first.CompareAndSwap(nil, &bt)
	})

	path := filepath.Join(t.TempDir(), "a.db")
	aOb := openTestOutbox(t, path)
	ax := startTestExchange(t, "a", "127.0.0.1:0", testKey, aOb, newFakeInserter(), allTo("b"), book)
	const n = 5000
	route(t, ax, testURLs("restart", n), 1000)
	wait.For(t, 10*time.Second, "first batch at b", func() bool { return first.Load() != nil })
	ax.Close() // the sender dies while waiting for the ack
	aOb.Close()
	close(gate) // b stores the batch; its ack goes nowhere

	aOb = openTestOutbox(t, path)
	defer aOb.Close()
	if got := aOb.Pending()["b"]; got != n {
		t.Fatalf("reopened outbox has %d URLs for b, want %d (the unacked batch stays queued)", got, n)
	}
	ax = startTestExchange(t, "a", "127.0.0.1:0", testKey, aOb, newFakeInserter(), allTo("b"), book)
	defer ax.Close()
	wait.For(t, 30*time.Second, "all URLs at b", func() bool { return b.ins.distinct() == n })
	wait.For(t, 10*time.Second, "empty outbox", func() bool { return aOb.Len() == 0 })
	b.ins.check(t, n)
	// The unacked batch was sent again after the restart: each of its URLs
	// reached b twice, and no other URL did.
	inFirst := map[string]bool{}
	for _, e := range first.Load().Entries {
		inFirst[e.URL] = true
	}
	b.ins.mu.Lock()
	defer b.ins.mu.Unlock()
	for u, k := range b.ins.seen {
		if want := 1 + btoi(inFirst[u]); k != want {
			t.Errorf("%s delivered %d times, want %d", u, k, want)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestExchangeWrongKeyRefused(t *testing.T) {
	book := &addrBook{}
	a := newTestNode(t, "a", otherKey, allTo("b"), book)
	b := newTestNode(t, "b", testKey, allTo("b"), book)
	route(t, a.x, testURLs("key", 100), 100)
	wait.For(t, 10*time.Second, "refusals", func() bool {
		return a.x.Stats().DialErrors >= 2 && b.x.Stats().HandshakeErrors >= 2
	})
	if b.ins.distinct() != 0 || b.x.Stats().BatchesReceived != 0 || a.x.Stats().BatchesSent != 0 {
		t.Errorf("a batch crossed a wrong key: received %d, sent %d", b.x.Stats().BatchesReceived, a.x.Stats().BatchesSent)
	}
	if a.ob.Len() != 100 {
		t.Errorf("outbox has %d, want 100 kept for later", a.ob.Len())
	}

	// b, the side with the key, cannot send to a either.
	b2 := newTestNode(t, "b2", testKey, allTo("a"), book)
	route(t, b2.x, testURLs("key2", 10), 10)
	wait.For(t, 10*time.Second, "refusal", func() bool { return b2.x.Stats().DialErrors >= 1 })
	if a.ins.distinct() != 0 || b2.x.Stats().BatchesSent != 0 {
		t.Error("a keyless receiver got a batch")
	}
}

func TestExchangeRejectsGarbage(t *testing.T) {
	book := &addrBook{}
	b := newTestNode(t, "b", testKey, allTo("b"), book)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", b.x.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Garbage instead of a handshake.
	c := dial()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + string(make([]byte, 100))))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("want the connection closed, got %v", err)
	}
	wait.For(t, 5*time.Second, "handshake error", func() bool { return b.x.Stats().HandshakeErrors == 1 })

	// Authenticated, then a frame with a good MAC but a garbage payload,
	// then a forged frame, then an oversized one: each closes the connection.
	for i, send := range []func(x *xconn){
		func(x *xconn) { x.writeFrame([]byte{msgBatch, 1, 200, 7, 7}) },
		func(x *xconn) {
			x.sendSeq++
			x.writeFrame(EncodeBatch(Batch{ID: 1, Entries: []Entry{{NewURL: frontier.NewURL{URL: "http://x/"}}}}))
		},
		func(x *xconn) { x.w.Write([]byte{0xff, 0xff, 0xff, 0xff}); x.w.Flush() },
	} {
		x, err := clientHandshake(dial(), testKey, "evil", DefaultMaxFrame, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		send(x)
		x.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := x.readFrame(); err == nil {
			t.Fatalf("case %d: got an answer to garbage", i)
		}
		wait.For(t, 5*time.Second, "bad frame counted", func() bool { return b.x.Stats().BadFrames == uint64(i+1) })
	}
	if b.ins.distinct() != 0 || b.x.Stats().BatchesReceived != 0 {
		t.Error("garbage was stored")
	}
}

func TestHandshake(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ckey, skey []byte
		ok         bool
	}{
		{"same key", testKey, testKey, true},
		{"client without the key", otherKey, testKey, false},
		{"server without the key", testKey, otherKey, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c1, c2 := net.Pipe()
			defer c1.Close()
			defer c2.Close()
			type res struct {
				x   *xconn
				err error
			}
			sch := make(chan res, 1)
			go func() {
				x, err := serverHandshake(c2, tc.skey, "srv", DefaultMaxFrame, 2*time.Second)
				if err != nil {
					c2.Close()
				}
				sch <- res{x, err}
			}()
			cx, cerr := clientHandshake(c1, tc.ckey, "cli", DefaultMaxFrame, 2*time.Second)
			if cerr != nil {
				c1.Close()
			}
			s := <-sch
			if !tc.ok {
				if cerr == nil || s.err == nil {
					t.Fatalf("client err %v, server err %v: both sides must refuse", cerr, s.err)
				}
				if !errors.Is(cerr, ErrHandshake) || !errors.Is(s.err, ErrHandshake) {
					t.Errorf("errors should wrap ErrHandshake: %v / %v", cerr, s.err)
				}
				return
			}
			if cerr != nil || s.err != nil || cx.peer != "srv" || s.x.peer != "cli" {
				t.Fatalf("handshake: %v %v", cerr, s.err)
			}
			go cx.writeFrame([]byte("hello"))
			p, err := s.x.readFrame()
			if err != nil || string(p) != "hello" {
				t.Fatalf("frame: %q %v", p, err)
			}
			go s.x.writeFrame([]byte("back"))
			if p, err := cx.readFrame(); err != nil || string(p) != "back" {
				t.Fatalf("frame back: %q %v", p, err)
			}
		})
	}
}

func TestExchangeReroutesAtSendTime(t *testing.T) {
	book := &addrBook{}
	var mu sync.Mutex
	owner := "c" // a peer that is gone: no address
	ownerOf := func(u frontier.NewURL) string {
		mu.Lock()
		defer mu.Unlock()
		if owner == "split" {
			if len(u.URL)%2 == 0 {
				return "a"
			}
			return "b"
		}
		return owner
	}
	a := newTestNode(t, "a", testKey, ownerOf, book)
	b := newTestNode(t, "b", testKey, allTo("b"), book)
	const n = 3000
	urls := testURLs("reroute", n)
	route(t, a.x, urls, 1000)
	wait.For(t, 5*time.Second, "a failed attempt", func() bool { return a.x.Stats().DialErrors > 0 })
	if a.ob.Pending()["c"] != n {
		t.Fatalf("pending %v", a.ob.Pending())
	}
	mu.Lock()
	owner = "split" // c left: its share now belongs to a and b
	mu.Unlock()
	a.x.Kick()
	wait.For(t, 20*time.Second, "all URLs placed", func() bool { return a.ins.distinct()+b.ins.distinct() == n })
	wait.For(t, 10*time.Second, "empty outbox", func() bool { return a.ob.Len() == 0 })
	s := a.x.Stats()
	if s.URLsRerouted != n || int(s.URLsLocal) != a.ins.distinct() || a.ins.distinct() == 0 || b.ins.distinct() == 0 {
		t.Errorf("rerouted %d, local %d, a %d, b %d", s.URLsRerouted, s.URLsLocal, a.ins.distinct(), b.ins.distinct())
	}

	// Completed records travel too, and a nack (receiver error) is retried.
	b.ins.fail.Store(2)
	if _, err := a.x.RouteDone(context.Background(), []frontier.NewURL{{URL: "http://x/1"}, {URL: "http://x/22"}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "done records", func() bool {
		b.ins.mu.Lock()
		defer b.ins.mu.Unlock()
		a.ins.mu.Lock()
		defer a.ins.mu.Unlock()
		return len(b.ins.done) == 1 && len(a.ins.done) == 1
	})
	if a.x.Stats().Nacks < 1 {
		t.Errorf("nacks = %d, want >= 1", a.x.Stats().Nacks)
	}
}

func TestExchangeConfigErrors(t *testing.T) {
	ob := openTestOutbox(t, filepath.Join(t.TempDir(), "o.db"))
	defer ob.Close()
	base := Config{Name: "a", Listen: "127.0.0.1:0", Key: testKey, Outbox: ob, Local: StoreReceiver(newFakeInserter()),
		Directory: testDir{owner: allTo("a"), addr: (&addrBook{}).get}}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"name", func(c *Config) { c.Name = "" }, "name"},
		{"key", func(c *Config) { c.Key = []byte("x") }, "--cluster-key-file"},
		{"batch", func(c *Config) { c.MaxBatch = -1 }, "max_batch"},
		{"frame", func(c *Config) { c.MaxFrame = 10 }, "max_frame"},
		{"delay", func(c *Config) { c.MaxDelay = time.Hour }, "max_delay"},
		{"outbox", func(c *Config) { c.Outbox = nil }, "required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mod(&c)
			x, err := New(c)
			if err == nil {
				x.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestExchangeBatchPacing: after a quiet spell the first URLs go at once; a
// partial batch (below MinBatch) waits MaxDelay after the previous batch;
// MinBatch URLs go at once.
func TestExchangeBatchPacing(t *testing.T) {
	book := &addrBook{}
	b := newTestNode(t, "b", testKey, allTo("b"), book)
	ob := openTestOutbox(t, filepath.Join(t.TempDir(), "outbox.db"))
	x, err := New(Config{
		Name: "a", Listen: "127.0.0.1:0", Key: testKey, Outbox: ob, Local: StoreReceiver(newFakeInserter()), Directory: testDir{owner: allTo("b"), addr: book.get},
		MinBatch: 10, MaxDelay: time.Minute, AckTimeout: 10 * time.Second, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(); ob.Close() })
	urls := testURLs("pace", 11)
	route(t, x, urls[:1], 1)
	wait.For(t, 10*time.Second, "the first URL after a quiet spell", func() bool { return b.ins.distinct() == 1 })
	route(t, x, urls[1:4], 3)
	time.Sleep(300 * time.Millisecond)
	if got := b.ins.distinct(); got != 1 {
		t.Fatalf("a partial batch went before MaxDelay (1m): %d URLs at b, want 1", got)
	}
	route(t, x, urls[4:11], 7)
	wait.For(t, 10*time.Second, "MinBatch URLs", func() bool { return b.ins.distinct() == 11 })
	if st := x.Stats(); st.BatchesSent != 2 {
		t.Fatalf("%d batches sent, want 2", st.BatchesSent)
	}
}

// lendEvery is a Lender that stores into ins and lends back to the sender
// every URL whose index in its batch is a multiple of every.
type lendEvery struct {
	ins   *fakeInserter
	every int
	mu    sync.Mutex
	peers map[string]int // URLs received per sender
	lent  map[string]bool
}

func (l *lendEvery) ReceiveNew(ctx context.Context, peer string, urls []frontier.NewURL, maxBytes int) (int, []frontier.NewURL, error) {
	n, err := l.ins.Add(ctx, urls)
	if err != nil {
		return n, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.peers[peer] += len(urls)
	var lent []frontier.NewURL
	for i, u := range urls {
		if i%l.every == 0 && !l.lent[u.URL] {
			l.lent[u.URL] = true
			lent = append(lent, frontier.NewURL{URL: u.URL, Host: u.Host + "\n7 0 b", Depth: u.Depth})
		}
	}
	return n, lent, nil
}

// lendRecorder is a Receiver that keeps the URLs it gets as KindLend.
type lendRecorder struct {
	mu     sync.Mutex
	lent   map[string]int
	others int
}

func (r *lendRecorder) Receive(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range urls {
		if kind == KindLend {
			r.lent[u.URL]++
		} else {
			r.others++
		}
	}
	return len(urls), nil
}

func (r *lendRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lent)
}

// TestExchangeLendsBackInAck: the new URLs a receiver's Lender lends back
// travel in the batch's ack and reach the sender's Local as KindLend, each
// once and with the lend's host line; the Lender learns who sent them;
// the URLs a node keeps itself never go through its Lender.
func TestExchangeLendsBackInAck(t *testing.T) {
	book := &addrBook{}
	bIns := newFakeInserter()
	lender := &lendEvery{ins: bIns, every: 3, peers: map[string]int{}, lent: map[string]bool{}}
	bOb := openTestOutbox(t, filepath.Join(t.TempDir(), "b.db"))
	bx, err := New(Config{Name: "b", Listen: "127.0.0.1:0", Key: testKey, Outbox: bOb, Local: StoreReceiver(bIns),
		Lender: lender, Directory: testDir{owner: allTo("b"), addr: book.get}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	book.set("b", bx.Addr())
	t.Cleanup(func() { bx.Close(); bOb.Close() })
	rec := &lendRecorder{lent: map[string]int{}}
	aOb := openTestOutbox(t, filepath.Join(t.TempDir(), "a.db"))
	ax, err := New(Config{Name: "a", Listen: "127.0.0.1:0", Key: testKey, Outbox: aOb, Local: rec,
		Directory: testDir{owner: allTo("b"), addr: book.get}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	book.set("a", ax.Addr())
	t.Cleanup(func() { ax.Close(); aOb.Close() })

	const n = 3000
	route(t, ax, testURLs("lendback", n), 100)
	wait.For(t, 20*time.Second, "all URLs at b", func() bool { return bIns.distinct() == n })
	wait.For(t, 10*time.Second, "empty outbox", func() bool { return aOb.Len() == 0 })
	lender.mu.Lock()
	want := len(lender.lent)
	peers := maps.Clone(lender.peers)
	lender.mu.Unlock()
	wait.For(t, 10*time.Second, "the lent URLs at a", func() bool { return rec.count() == want })
	if want == 0 || peers["a"] != n || len(peers) != 1 {
		t.Fatalf("lender saw %v and lent %d; want %d URLs from a, some lent", peers, want, n)
	}
	rec.mu.Lock()
	for u, k := range rec.lent {
		if k != 1 || !lender.lent[u] {
			t.Errorf("%s reached a %d times as lent (lent by b: %v)", u, k, lender.lent[u])
		}
	}
	others := rec.others
	rec.mu.Unlock()
	if others != 0 {
		t.Errorf("a's Local got %d URLs of other kinds", others)
	}
	if got, sent := ax.Stats().URLsLentInAcks, bx.Stats().URLsLentBack; got != uint64(want) || sent != uint64(want) {
		t.Errorf("a took %d URLs lent in acks, b lent back %d; want %d", got, sent, want)
	}

	// b's own URLs (its owner is itself) are stored without its Lender.
	if _, err := bx.Route(context.Background(), testURLs("own", 10)); err != nil {
		t.Fatal(err)
	}
	lender.mu.Lock()
	defer lender.mu.Unlock()
	if len(lender.peers) != 1 {
		t.Errorf("b's own URLs went through its Lender: %v", lender.peers)
	}
}

// kindRecorder is a Receiver that records the kinds it was called with.
// A New call waits until an Outcome call has started (or gives up after
// wait): kinds stored one after the other would never let it go on.
type kindRecorder struct {
	mu        sync.Mutex
	started   []Kind
	finished  []Kind
	outcome   chan struct{}
	once      sync.Once
	wait      time.Duration
	newWaited bool
}

func (r *kindRecorder) Receive(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	r.mu.Lock()
	r.started = append(r.started, kind)
	r.mu.Unlock()
	switch kind {
	case KindOutcome:
		r.once.Do(func() { close(r.outcome) })
	case KindNew:
		select {
		case <-r.outcome:
			r.mu.Lock()
			r.newWaited = true
			r.mu.Unlock()
		case <-time.After(r.wait):
		}
	}
	r.mu.Lock()
	r.finished = append(r.finished, kind)
	r.mu.Unlock()
	return len(urls), nil
}

// TestStoreEntriesKinds: a batch's moved records (KindDone, KindMoved) are
// stored before anything else, and its other kinds are stored at once
// rather than one after the other; every entry is counted, and an error
// of one kind is returned.
func TestStoreEntriesKinds(t *testing.T) {
	rec := &kindRecorder{outcome: make(chan struct{}), wait: 30 * time.Second}
	x := &Stream{cfg: Config{Local: rec}}
	var es []Entry
	for i, k := range []Kind{KindOutcome, KindNew, KindReplica, KindMoved, KindLend, KindDone, KindNew} {
		es = append(es, Entry{Kind: k, NewURL: frontier.NewURL{URL: fmt.Sprintf("http://a.test/%d", i), Host: "a.test"}})
	}
	n, _, err := x.storeEntries(context.Background(), "b", es)
	if err != nil || n != len(es) {
		t.Fatalf("storeEntries = %d, %v; want %d, nil", n, err, len(es))
	}
	if !slices.Equal(rec.started[:2], []Kind{KindDone, KindMoved}) || !slices.Equal(rec.finished[:2], []Kind{KindDone, KindMoved}) {
		t.Errorf("started %v, finished %v: want KindDone then KindMoved stored first", rec.started, rec.finished)
	}
	if len(rec.started) != 6 {
		t.Errorf("%d Receive calls (%v), want 6: one per kind", len(rec.started), rec.started)
	}
	if !rec.newWaited {
		t.Error("the new URLs were stored before the outcome's store started: kinds stored one after the other")
	}

	failing := errReceiver{kind: KindReplica}
	x = &Stream{cfg: Config{Local: failing}}
	if _, _, err := x.storeEntries(context.Background(), "b", es); err == nil {
		t.Error("storeEntries hid the error of one kind")
	}
}

type errReceiver struct{ kind Kind }

func (r errReceiver) Receive(ctx context.Context, kind Kind, urls []frontier.NewURL) (int, error) {
	if kind == r.kind {
		return 0, fmt.Errorf("kind %d: disk full (test)", kind)
	}
	return len(urls), nil
}
