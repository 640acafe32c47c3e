package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestBodyBudgetQueue: fetches that hold nothing wait in order; a body
// already being read grows without waiting; a request larger than the
// budget is granted once nothing is held; a canceled waiter leaves the
// queue and lets the ones behind it in.
func TestBodyBudgetQueue(t *testing.T) {
	ctx := context.Background()
	b := NewBodyBudget(100)
	if err := b.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	granted := make(chan int64, 4)
	go func() {
		if err := b.acquire(ctx, 60); err == nil {
			granted <- 60
		}
	}()
	wait.For(t, 5*time.Second, "a fetch waiting for room", func() bool { return b.Waits() == 1 })
	h := &bodyHold{b: b}
	if !h.grow(30) {
		t.Fatal("a growing body was refused room the budget has (30 of 40 free)")
	}
	if h.grow(20) {
		t.Fatal("a growing body got room past the budget")
	}
	select {
	case <-granted:
		t.Fatal("a waiter was granted 60 with 10 free")
	case <-time.After(20 * time.Millisecond):
	}
	b.release(60)
	if got := <-granted; got != 60 || b.InFlight() != 90 {
		t.Fatalf("after a release: granted %d, in flight %d; want 60, 90", got, b.InFlight())
	}
	h.give(30)
	b.release(60)
	if b.InFlight() != 0 {
		t.Fatalf("in flight %d after every release, want 0", b.InFlight())
	}

	// Larger than the budget: granted alone.
	if err := b.acquire(ctx, 250); err != nil {
		t.Fatal(err)
	}
	// A canceled waiter leaves the queue; the one behind it gets in.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- b.acquire(cctx, 80) }()
	wait.For(t, 5*time.Second, "two fetches waiting for room", func() bool { return b.Waits() == 2 })
	go func() {
		if err := b.acquire(ctx, 10); err == nil {
			granted <- 10
		}
	}()
	wait.For(t, 5*time.Second, "three fetches waiting for room", func() bool { return b.Waits() == 3 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled waiter: %v, want context.Canceled", err)
	}
	b.release(250)
	if got := <-granted; got != 10 || b.InFlight() != 10 {
		t.Fatalf("after the canceled waiter: granted %d, in flight %d; want 10, 10", got, b.InFlight())
	}
	if b.Peak() != 250 {
		t.Errorf("peak %d, want 250 (the lone oversize body)", b.Peak())
	}
}

// budgetServer serves /<kind>/<size>: a body of size pseudo-random bytes
// (seeded by the path), with a Content-Length ("length"), chunked without
// one ("chunked"), gzip'd with a length ("gzip"), or a Content-Length
// larger than the body ("short"). Each body pauses half way, so that
// concurrent fetches overlap.
func budgetServer(t *testing.T) (*httptest.Server, func(kind string, size int) []byte) {
	return budgetServerGated(t, func() { time.Sleep(10 * time.Millisecond) }) // a slow body: the fetches overlap
}

// budgetServerGated is budgetServer with gate called half way through each
// body instead of the pause.
func budgetServerGated(t *testing.T, gate func()) (*httptest.Server, func(kind string, size int) []byte) {
	var cache sync.Map // "kind/size" -> []byte served
	body := func(kind string, size int) []byte {
		b := make([]byte, size)
		rand.New(rand.NewSource(int64(size) + int64(len(kind)))).Read(b)
		if kind == "gzip" { // compressible: decoded it is 4x the transfer
			for i := range b {
				b[i] = 'a' + b[i]%4
			}
		}
		return b
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var kind string
		var size int
		for _, k := range []string{"length", "chunked", "gzip", "short", "reset"} {
			if p := "/" + k + "/"; len(r.URL.Path) > len(p) && r.URL.Path[:len(p)] == p {
				kind = k
				size, _ = strconv.Atoi(r.URL.Path[len(p):])
			}
		}
		data := body(kind, size)
		switch kind {
		case "gzip":
			key := kind + "/" + strconv.Itoa(size)
			if z, ok := cache.Load(key); ok {
				data = z.([]byte)
			} else {
				var zb bytes.Buffer
				zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
				zw.Write(data)
				zw.Close()
				data = zb.Bytes()
				cache.Store(key, data)
			}
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		case "length":
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		case "short":
			w.Header().Set("Content-Length", strconv.Itoa(len(data)+1000))
		}
		half := len(data) / 2
		w.Write(data[:half])
		w.(http.Flusher).Flush()
		gate()
		w.Write(data[half:])
		if kind == "short" || kind == "reset" {
			w.(http.Flusher).Flush()
			hj, ok := w.(http.Hijacker)
			if ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, body
}

// budgetClient is a client with a body budget whose hosts *.budget.test
// all go to srv (one connection per host: distinct hosts fetch at once).
func budgetClient(t *testing.T, srv *httptest.Server, budget, maxBody int64) (*Client, string) {
	c := testClientConfig()
	c.MaxBodySize = maxBody
	c.MaxInflightBytes = budget
	c.SpoolDir = t.TempDir()
	// The server compresses a gzip body before its headers: slow under -race.
	c.HeaderTimeout, c.BodyTimeout = 20*time.Second, 20*time.Second
	rule, err := ParseResolve("*.budget.test=" + srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Resolve = []ResolveRule{rule}
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return newTestClient(t, c), port
}

func spoolFiles(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestFetchBodyBudget: many fetches of bodies that together exceed the
// budget many times over all complete with their exact bodies, the body
// bytes held never exceed the budget, some bodies waited or spooled, and
// every share and temp file is given back.
func TestFetchBodyBudget(t *testing.T) {
	// Every body stops half way until some fetch has waited or spooled
	// (at most 5 s): the fetches' shares are all held meanwhile, so the
	// budget must make the others wait or spool. The gate polls in the
	// server's handlers, not the test's goroutine, and its time limit
	// is no failure (the assertions below are), hence no wait.For.
	var budget atomic.Pointer[BodyBudget]
	srv, want := budgetServerGated(t, func() {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if b := budget.Load(); b == nil || b.Waits()+b.Spools() > 0 {
				return
			}
		}
	})
	const (
		fetches = 16
		limit   = 512 << 10
	)
	for _, tc := range []struct {
		kind string
		size int // 16 transfers of it exceed the limit
	}{
		{"length", 100 << 10},
		{"chunked", 100 << 10},
		{"gzip", 200 << 10}, // about 60 KiB as transferred
	} {
		kind, size := tc.kind, tc.size
		t.Run(kind, func(t *testing.T) {
			cl, port := budgetClient(t, srv, limit, 1<<20)
			ctx := clientTestCtx(t)
			// One fetch first: the server compresses its gzip body once.
			r, err := cl.Fetch(ctx, fmt.Sprintf("http://warm.budget.test:%s/%s/%d", port, kind, size))
			if err != nil {
				t.Fatal(err)
			}
			r.Release()
			budget.Store(cl.Budget())
			defer budget.Store(nil)
			var wg sync.WaitGroup
			errs := make(chan error, fetches)
			for i := range fetches {
				wg.Add(1)
				go func() {
					defer wg.Done()
					u := fmt.Sprintf("http://h%d.budget.test:%s/%s/%d", i, port, kind, size)
					r, err := cl.Fetch(ctx, u)
					if err != nil {
						errs <- err
						return
					}
					defer r.Release()
					if !bytes.Equal(r.Body, want(kind, size)) || r.Truncated {
						errs <- fmt.Errorf("%s: body of %d bytes (truncated %v) differs from the %d served", u, len(r.Body), r.Truncated, size)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			b := cl.Budget()
			if b.Peak() > limit {
				t.Errorf("peak of body bytes held %d > budget %d", b.Peak(), limit)
			}
			if b.Waits()+b.Spools() == 0 {
				t.Errorf("no body waited or spooled though %d bodies of %d bytes were fetched at once under %d", fetches, size, limit)
			}
			if b.InFlight() != 0 {
				t.Errorf("%d bytes still held after every response was released", b.InFlight())
			}
			if n := spoolFiles(t, cl.cfg.SpoolDir); n != 0 {
				t.Errorf("%d spool files left", n)
			}
			t.Logf("peak %d, waits %d, spools %d", b.Peak(), b.Waits(), b.Spools())
		})
	}
}

// TestFetchBodyBudgetEdges: a body larger than the whole budget is still
// read (alone); a failed or canceled fetch gives its share and its temp
// file back.
func TestFetchBodyBudgetEdges(t *testing.T) {
	srv, want := budgetServer(t)
	const budget = 64 << 10
	for _, kind := range []string{"length", "chunked", "gzip"} {
		t.Run("oversize_"+kind, func(t *testing.T) {
			cl, port := budgetClient(t, srv, budget, 1<<20)
			r, err := cl.Fetch(clientTestCtx(t), fmt.Sprintf("http://a.budget.test:%s/%s/%d", port, kind, 300<<10))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Body, want(kind, 300<<10)) {
				t.Errorf("body of %d bytes differs from the %d served", len(r.Body), 300<<10)
			}
			r.Release()
			if b := cl.Budget(); b.InFlight() != 0 {
				t.Errorf("%d bytes held after Release", b.InFlight())
			}
			if n := spoolFiles(t, cl.cfg.SpoolDir); n != 0 {
				t.Errorf("%d spool files left", n)
			}
		})
	}
	for _, tc := range []struct {
		kind   string
		spools bool // the body went past the budget before it failed
	}{
		{"short", false}, // its Content-Length was reserved up front
		{"reset", true},  // chunked, cut before its end
	} {
		t.Run(tc.kind+"_body", func(t *testing.T) {
			cl, port := budgetClient(t, srv, budget, 1<<20)
			_, err := cl.Fetch(clientTestCtx(t), fmt.Sprintf("http://a.budget.test:%s/%s/%d", port, tc.kind, 200<<10))
			if err == nil {
				t.Fatal("a body cut before its end was fetched without an error")
			}
			if b := cl.Budget(); b.InFlight() != 0 || (b.Spools() > 0) != tc.spools {
				t.Errorf("after a failed body: %d bytes held (want 0), %d spools (want >0: %v)", b.InFlight(), b.Spools(), tc.spools)
			}
			if n := spoolFiles(t, cl.cfg.SpoolDir); n != 0 {
				t.Errorf("%d spool files left after a failed body", n)
			}
		})
	}
	t.Run("canceled_wait", func(t *testing.T) {
		cl, port := budgetClient(t, srv, budget, 1<<20)
		b := cl.Budget()
		if err := b.acquire(context.Background(), budget); err != nil { // all of it, elsewhere
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := cl.Fetch(ctx, fmt.Sprintf("http://a.budget.test:%s/length/%d", port, 10<<10))
		if kind := ErrorKind(err); kind != "timeout" {
			t.Errorf("fetch waiting for body memory past its deadline: %v (kind %q), want kind timeout", err, kind)
		}
		if b.Waits() != 1 || b.InFlight() != budget {
			t.Errorf("waits %d (want 1), held %d (want %d: the canceled fetch holds nothing)", b.Waits(), b.InFlight(), budget)
		}
		b.release(budget)
		r, err := cl.Fetch(clientTestCtx(t), fmt.Sprintf("http://a.budget.test:%s/length/%d", port, 10<<10))
		if err != nil {
			t.Fatalf("fetch after the budget was freed: %v", err)
		}
		r.Release()
		if b.InFlight() != 0 {
			t.Errorf("%d bytes held after Release", b.InFlight())
		}
	})
}
