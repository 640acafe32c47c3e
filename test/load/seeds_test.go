package load

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/robots"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// countRouter takes the seeds instead of the frontier: this test is about the API's memory,
// not bbolt's insert rate.
type countRouter struct {
	urls, batches atomic.Int64
	maxBatch      atomic.Int64
}

func (r *countRouter) ShareSeedHosts(context.Context, []string) error { return nil }

func (r *countRouter) ShareRobots(robots.Record) {}

func (r *countRouter) Route(_ context.Context, urls []frontier.NewURL) (int, error) {
	r.urls.Add(int64(len(urls)))
	r.batches.Add(1)
	for {
		m := r.maxBatch.Load()
		if int64(len(urls)) <= m || r.maxBatch.CompareAndSwap(m, int64(len(urls))) {
			break
		}
	}
	return len(urls), nil
}

func seedCount(t *testing.T) int {
	if v := os.Getenv("PHASECRAWL_LOAD_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PHASECRAWL_LOAD_SEEDS=%q: want a positive whole number", v)
		}
		return n
	}
	return 1000000
}

// TestSeedsMillion posts 1,000,000 URLs (generated on the fly through a pipe, so the client
// holds none of them) in one request and checks the counts and that the heap stays flat.
func TestSeedsMillion(t *testing.T) {
	total := seedCount(t)
	const badEvery = 100000 // a bad line every so often, and one line over the cap
	c := config.Default()
	c.Name = "load"
	c.Data = t.TempDir()
	c.HTTP = "127.0.0.1:0"
	router := &countRouter{}
	n, err := launch.New(c, launch.Options{Options: node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Cluster: node.Delegates(node.ClusterDelegates{Router: router})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	pr, pw := io.Pipe()
	var bodyBytes atomic.Int64
	var gen sync.WaitGroup
	gen.Add(1)
	go func() {
		defer gen.Done()
		bw := bufio.NewWriterSize(pw, 64<<10)
		var err error
		for i := 0; i < total && err == nil; i++ {
			var k int
			switch {
			case i%badEvery == badEvery-1:
				k, err = fmt.Fprintf(bw, "ftp://h%d.load.test/p/%d\n", i%1000, i)
			case i == total/2:
				k, err = fmt.Fprintf(bw, "http://h1.load.test/%0*d\n", 70000, i) // over the line cap
			default:
				k, err = fmt.Fprintf(bw, "http://h%d.load.test/p/%d\n", i%1000, i)
			}
			bodyBytes.Add(int64(k))
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := harness.PeakHeap(10 * time.Millisecond)
	start := time.Now()
	req, err := http.NewRequest(http.MethodPost, "http://"+n.Addr().String()+"/v1/seeds", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var res node.SeedResult
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	took := time.Since(start)
	peak := stop()
	gen.Wait()
	if err != nil {
		t.Fatal(err)
	}
	wantBad := total/badEvery + 1
	if res.Given != total || res.Added != total-wantBad || res.BadTotal != wantBad || len(res.Bad) != wantBad {
		t.Errorf("given %d added %d bad %d (%d listed); want %d, %d, %d", res.Given, res.Added, res.BadTotal, len(res.Bad), total, total-wantBad, wantBad)
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d, want 400 (bad lines)", resp.StatusCode)
	}
	if got := router.urls.Load(); got != int64(total-wantBad) {
		t.Errorf("router got %d URLs, want %d", got, total-wantBad)
	}
	growth := int64(peak) - int64(before.HeapInuse)
	body := bodyBytes.Load()
	t.Logf("%d URLs, %d MiB body in %s (%.0f URLs/s); %d batches of at most %d; heap in use %d MiB before, peak %d MiB",
		total, body>>20, took.Round(time.Millisecond), float64(total)/took.Seconds(), router.batches.Load(), router.maxBatch.Load(), before.HeapInuse>>20, peak>>20)
	if limit := min(int64(64<<20), body/2); growth > limit {
		t.Errorf("heap grew by %d MiB while reading a %d MiB body (limit %d MiB): the body is being held", growth>>20, body>>20, limit>>20)
	}
	if router.maxBatch.Load() > 1000 {
		t.Errorf("a batch of %d URLs: seeds are not added in batches", router.maxBatch.Load())
	}
}
