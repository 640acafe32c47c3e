package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/synthweb"
	"github.com/phasecrawl/phasecrawl/test/webnode"
)

func envDur(k string, d time.Duration) time.Duration {
	if v := os.Getenv(k); v != "" {
		x, _ := time.ParseDuration(v)
		return x
	}
	return d
}
func envInt(k string, d int) int {
	if v := os.Getenv(k); v != "" {
		x, _ := strconv.Atoi(v)
		return x
	}
	return d
}

func TestScratchTimeline(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	web, _ := synthweb.New(synthweb.DefaultConfig())
	srv, _ := webnode.Start(web)
	defer srv.Close()
	cfg := srv.NodeConfig("bench", t.TempDir(), 0)
	cfg.UserAgent = UserAgent
	cfg.Frontier.BatchDelay = envDur("BD", cfg.Frontier.BatchDelay)
	cfg.Bucket.MaxQueueWait = envDur("MQW", cfg.Bucket.MaxQueueWait)
	cfg.Bucket.ListCap = envInt("LC", cfg.Bucket.ListCap)
	cfg.Workers = envInt("W", cfg.Workers)
	n, err := node.New(cfg, node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	start, cpu0 := time.Now(), cpuTime()
	seen := 0
	for i := 0; ; i++ {
		time.Sleep(20 * time.Millisecond)
		st := n.Status()
		if i%25 == 0 {
			fmt.Printf("%5.1fs pages=%d inlist=%d inprog=%d bucket=%+v\n", time.Since(start).Seconds(), st.PagesFetched, st.Frontier.InList, st.Frontier.InProgress, st.Bucket)
		}
		if n.Done() {
			seen++
			if seen > 2 {
				break
			}
		} else {
			seen = 0
		}
	}
	fmt.Printf("done %s pages=%d cpu=%s\n", time.Since(start), n.Status().PagesFetched, cpuTime()-cpu0)
	cancel()
	<-errc
}
