package fetch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// countingLimiter records the Take calls; block makes Take wait for ctx.
type countingLimiter struct {
	chunk   int
	block   bool
	started chan struct{} // closed at the first Take when block
	mu      sync.Mutex
	takes   []int
}

func (c *countingLimiter) Chunk() int { return c.chunk }
func (c *countingLimiter) Take(ctx context.Context, n int) error {
	c.mu.Lock()
	c.takes = append(c.takes, n)
	c.mu.Unlock()
	if c.block {
		if len(c.takes) == 1 {
			close(c.started)
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func TestBodyLimiter(t *testing.T) {
	page := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(page)
	}))
	defer srv.Close()
	cl := newTestClient(t, testClientConfig())

	l := &countingLimiter{chunk: 10000}
	resp, err := cl.Fetch(WithBodyLimiter(context.Background(), l), srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp.Body, page) {
		t.Fatalf("body of %d bytes, want %d", len(resp.Body), len(page))
	}
	total := 0
	for _, n := range l.takes {
		if n > l.chunk {
			t.Fatalf("a read of %d bytes, over the chunk of %d", n, l.chunk)
		}
		total += n
	}
	if total != len(page) {
		t.Errorf("Take accounted %d bytes, want %d", total, len(page))
	}

	// A fetch whose context ends while the limiter holds it fails as cancelled.
	blk := &countingLimiter{chunk: 4096, block: true, started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-blk.started
		cancel()
	}()
	_, err = cl.Fetch(WithBodyLimiter(ctx, blk), srv.URL+"/")
	if err == nil || !errors.Is(err, context.Canceled) && ErrorKind(err) != "canceled" {
		t.Errorf("blocked fetch: err=%v kind=%s, want canceled", err, ErrorKind(err))
	}
	if WithBodyLimiter(ctx, nil) != ctx {
		t.Error("WithBodyLimiter(nil) changed the context")
	}
}

// sleepLimiter waits d at every Take.
type sleepLimiter struct {
	chunk int
	d     time.Duration
}

func (s sleepLimiter) Chunk() int { return s.chunk }
func (s sleepLimiter) Take(ctx context.Context, n int) error {
	select {
	case <-time.After(s.d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The time a body waits for its share does not count against
// body_timeout: four waits of 150ms each outlast a 300ms body timeout, and
// the fetch still succeeds; without the limiter's waits the same server
// answers in time.
func TestBodyLimiterWaitNotTimeout(t *testing.T) {
	page := bytes.Repeat([]byte("x"), 16<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(page)
	}))
	defer srv.Close()
	c := testClientConfig()
	c.BodyTimeout = 300 * time.Millisecond
	cl := newTestClient(t, c)
	resp, err := cl.Fetch(WithBodyLimiter(context.Background(), sleepLimiter{chunk: 4096, d: 150 * time.Millisecond}), srv.URL+"/")
	if err != nil {
		t.Fatalf("paced fetch: %v", err)
	}
	if len(resp.Body) != len(page) {
		t.Errorf("body of %d bytes, want %d", len(resp.Body), len(page))
	}
}
