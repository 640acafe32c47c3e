package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// TestFirstRoundEnd: the first round ends when the URLs queued are
// fetched at the last minute's pages/s, or, when it takes longer, at the
// politeness delay of the host with the most of them; nil with nothing
// fetched lately or nothing queued.
func TestFirstRoundEnd(t *testing.T) {
	c := config.Default()
	c.Name, c.Data, c.HTTP, c.Seeds = "t", t.TempDir(), "127.0.0.1:0", nil
	n, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { // a node not run is closed by running it on a done context
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = n.Run(ctx)
	}()
	if end := n.firstRoundEnd(time.Now()); end != nil {
		t.Fatalf("nothing queued: first round ends %v, want nil", end)
	}
	var urls []frontier.NewURL
	for h, k := range map[string]int{"a.test": 400, "b.test": 100, "c.test": 100} {
		for i := range k {
			urls = append(urls, frontier.NewURL{URL: fmt.Sprintf("http://%s/%d", h, i), Host: h})
		}
	}
	if _, err := n.front.Add(context.Background(), urls); err != nil {
		t.Fatal(err)
	}
	if end := n.firstRoundEnd(time.Now()); end != nil {
		t.Fatalf("nothing fetched: first round ends %v, want nil", end)
	}
	for range 60 {
		n.rep.rate.Add(time.Now())
	}
	tests := []struct {
		delay time.Duration
		want  time.Duration
	}{
		{100 * time.Millisecond, 40 * time.Second}, // a.test: 400 × 100 ms
		{time.Millisecond, 10 * time.Second},       // 600 URLs at 60 pages/s
	}
	for _, tt := range tests {
		n.cfg.Delay = tt.delay
		n.rep.queued = nil // read the frontier again
		now := time.Now()
		n.started = now.Add(-time.Second) // 60 pages in the last second
		end := n.firstRoundEnd(now)
		if end == nil {
			t.Fatalf("delay %s: no first round end", tt.delay)
		}
		if got := end.Sub(now); got < tt.want-2*time.Second || got > tt.want+2*time.Second {
			t.Errorf("delay %s: first round ends in %s, want about %s", tt.delay, got, tt.want)
		}
	}
	q, err := n.queuedByHost()
	if err != nil || q["a.test"] != 400 || q["b.test"] != 100 || len(q) != 3 {
		t.Fatalf("queued by host %v, %v", q, err)
	}
	hs, err := n.hostsReport("queued", 2)
	if err != nil || len(hs) != 2 || hs[0].Host != "a.test" || hs[0].Queued != 400 || hs[1].Queued != 100 {
		t.Fatalf("hosts report by queued: %+v, %v", hs, err)
	}
}
