// Package ops tests what an operator uses on a running node: the status
// page in a real headless browser, pause and resume, and the crawl budget.
package ops

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/internal/syncbuf"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
)

// web starts a synthetic web of hosts hosts and pages pages on loopback.
func web(t *testing.T, hosts, pages int) *webnode.Server {
	t.Helper()
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seeds = hosts, pages, max(1, min(5, hosts/4))
	wc.SlowHosts, wc.CrawlDelayHosts, wc.TrapHosts = 0, 0, 0
	w, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// runNode starts a node; the returned function stops it and waits (also at cleanup).
func runNode(t *testing.T, cfg config.Config, logs io.Writer) (*node.Node, func()) {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("node run: %v", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("node did not stop within a minute")
			}
		})
	}
	t.Cleanup(stop)
	return n, stop
}

// status reads GET /v1/status.
func status(t *testing.T, n *node.Node) node.Status {
	t.Helper()
	resp, err := http.Get("http://" + n.Addr().String() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st node.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// settle waits until the node's pages_fetched has not moved for a second
// (the requests in flight when it stopped starting new ones have finished),
// failing after 30s.
func settle(t *testing.T, n *node.Node) {
	t.Helper()
	last, since := int64(-1), time.Now()
	wait.For(t, 30*time.Second, "pages_fetched stops moving", func() bool {
		if p := status(t, n).PagesFetched; p != last {
			last, since = p, time.Now()
		}
		return time.Since(since) >= time.Second
	})
}

// post sends an empty POST with an optional bearer token and returns the status code.
func post(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func metric(t *testing.T, n *node.Node, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + n.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+" ") {
			return strings.TrimPrefix(l, name+" ")
		}
	}
	t.Fatalf("/metrics lacks %s", name)
	return ""
}

// TestPauseResume: a paused node starts no request (the one in flight
// finish), says so in its status and metric, refuses the writes without
// the token when one is set, and goes on after resume.
func TestPauseResume(t *testing.T) {
	srv := web(t, 20, 2000)
	cfg := srv.NodeConfig("pause", t.TempDir(), 20*time.Millisecond)
	cfg.Workers = 8
	tokFile := filepath.Join(t.TempDir(), "token")
	const token = "0123456789abcdef-pause"
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.APITokenFile = tokFile
	n, _ := runNode(t, cfg, nil)
	api := "http://" + n.Addr().String()
	wait.For(t, time.Minute, "first pages", func() bool { return status(t, n).PagesFetched >= 20 })

	if code := post(t, api+"/v1/pause", ""); code != http.StatusUnauthorized {
		t.Fatalf("POST /v1/pause without the token: %d, want 401", code)
	}
	if status(t, n).Paused {
		t.Fatal("paused by a request without the token")
	}
	if code := post(t, api+"/v1/pause", token); code != http.StatusOK {
		t.Fatalf("POST /v1/pause: %d", code)
	}
	// In-flight requests finish; then nothing moves.
	settle(t, n)
	st := status(t, n)
	if !st.Paused || st.Done {
		t.Fatalf("status while paused: paused=%v done=%v", st.Paused, st.Done)
	}
	if v := metric(t, n, "phasecrawl_paused"); v != "1" {
		t.Fatalf("phasecrawl_paused = %s while paused", v)
	}
	before := st.PagesFetched
	if st.Frontier.InList == 0 {
		t.Fatal("the crawl ended before the pause: nothing left to check resume with")
	}

	if code := post(t, api+"/v1/resume", token); code != http.StatusOK {
		t.Fatalf("POST /v1/resume: %d", code)
	}
	wait.For(t, time.Minute, "pages after resume", func() bool { return status(t, n).PagesFetched > before })
	if v := metric(t, n, "phasecrawl_paused"); v != "0" {
		t.Fatalf("phasecrawl_paused = %s after resume", v)
	}
}

// TestBudgetMaxPages: the node stops starting requests at max_pages,
// finishes those in flight (at most one per worker over the budget), and
// records why in its log and status.
func TestBudgetMaxPages(t *testing.T) {
	srv := web(t, 20, 2000)
	cfg := srv.NodeConfig("budget", t.TempDir(), 5*time.Millisecond)
	cfg.Workers = 8
	cfg.MaxPages = 150
	logs := &syncbuf.Buffer{}
	n, _ := runNode(t, cfg, logs)
	wait.For(t, time.Minute, "budget spent", func() bool { return status(t, n).Budget.Reached != "" })
	settle(t, n)
	st := status(t, n)
	if st.Budget.Reached != node.BudgetMaxPages || st.Budget.MaxPages != 150 || st.Budget.ReachedAt == nil {
		t.Fatalf("budget status = %+v", st.Budget)
	}
	if st.PagesFetched < 150 || st.PagesFetched > 150+int64(cfg.Workers) {
		t.Fatalf("pages fetched = %d, want 150..%d (the budget and the requests in flight)", st.PagesFetched, 150+cfg.Workers)
	}
	if st.Done || st.Frontier.InList == 0 {
		t.Fatalf("the web is larger than the budget: done=%v in_list=%d", st.Done, st.Frontier.InList)
	}
	if v := metric(t, n, "phasecrawl_budget_spent"); v != "1" {
		t.Fatalf("phasecrawl_budget_spent = %s", v)
	}
	if l := logs.String(); !strings.Contains(l, "crawl budget spent") || !strings.Contains(l, "reason=max_pages") {
		t.Fatalf("the log does not say why the node stopped fetching:\n%s", l)
	}
}

// TestBudgetMaxDuration: the node starts no request once max_duration has
// passed since its start.
func TestBudgetMaxDuration(t *testing.T) {
	srv := web(t, 20, 2000)
	cfg := srv.NodeConfig("duration", t.TempDir(), 50*time.Millisecond)
	cfg.Workers = 8
	cfg.MaxDuration = 1500 * time.Millisecond
	logs := &syncbuf.Buffer{}
	n, _ := runNode(t, cfg, logs)
	wait.For(t, time.Minute, "budget spent", func() bool { return status(t, n).Budget.Reached != "" })
	settle(t, n)
	st := status(t, n)
	if st.Budget.Reached != node.BudgetMaxDuration || st.Budget.MaxDurationS != 1.5 {
		t.Fatalf("budget status = %+v", st.Budget)
	}
	if st.PagesFetched == 0 || st.Frontier.InList == 0 {
		t.Fatalf("pages fetched = %d, in list = %d: want some fetched and some left", st.PagesFetched, st.Frontier.InList)
	}
	if l := logs.String(); !strings.Contains(l, "reason=max_duration") {
		t.Fatalf("the log does not say why the node stopped fetching:\n%s", l)
	}
}
