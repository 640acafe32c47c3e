// Package harness holds what the tests that run phasecrawl nodes as
// separate processes share (test/cluster, test/partition): starting a node
// with its output in a log file and reading that log, asking a node's API
// over HTTP, reading the synthetic web's report from a `phasecrawl
// synthweb` process, and holding the crawl against the web's oracle
// (violations, duplicate fetches and the nodes' crawl logs of them). It
// also samples the test process's own heap (test/load, test/hostile).
package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/node"
)

// Client is the HTTP client of the tests' calls to nodes and to the web.
var Client = &http.Client{Timeout: 5 * time.Second}

// FreePort returns a TCP port free on ip right now.
func FreePort(t testing.TB, ip string) int {
	t.Helper()
	given.Lock()
	defer given.Unlock()
	for {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatalf("listen on %s (loopback alias): %v", ip, err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		// The kernel may hand out a port again once it is closed: a node
		// given one port for two listeners would fail to start.
		if k := net.JoinHostPort(ip, strconv.Itoa(port)); !given.ports[k] {
			given.ports[k] = true
			return port
		}
	}
}

// given holds the ports FreePort handed out in this test process.
var given = struct {
	sync.Mutex
	ports map[string]bool
}{ports: map[string]bool{}}

// NodeEnv returns the test's environment without its PHASECRAWL_
// variables, followed by vars: a node process sees only the settings the
// test gives it.
func NodeEnv(vars ...string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PHASECRAWL_") {
			env = append(env, kv)
		}
	}
	return append(env, vars...)
}

// StartLogged starts cmd with its standard output and error appended to
// the file logPath, after the line header when it is not empty. When the
// process exits, exited gets its exit error, then done is closed.
func StartLogged(cmd *exec.Cmd, logPath, header string, exited func(error)) (done chan struct{}, err error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file of %s: %w", cmd.Path, err)
	}
	if header != "" {
		fmt.Fprintln(lf, header)
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	done = make(chan struct{})
	go func() {
		err := cmd.Wait()
		lf.Close()
		exited(err)
		close(done)
	}()
	return done, nil
}

// Closed reports whether done is closed (a process started by StartLogged
// has exited).
func Closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// LogGrep returns the lines of the JSON log at path whose msg starts with
// one of msgs.
func LogGrep(path string, msgs ...string) string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, m := range msgs {
			if strings.Contains(l, `"msg":"`+m) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// LogTail returns the last n lines of the log at path.
func LogTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Status reads the /v1/status of the node whose API is at api (HOST:PORT).
func Status(api string) (node.Status, error) {
	var st node.Status
	resp, err := Client.Get("http://" + api + "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Metrics reads the node's /metrics as text.
func Metrics(api string) (string, error) {
	resp, err := Client.Get("http://" + api + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// PostSeeds posts seeds to the node as JSON, with the API token when token
// is not empty.
func PostSeeds(api, token string, seeds []string) error {
	b, _ := json.Marshal(seeds)
	req, err := http.NewRequest(http.MethodPost, "http://"+api+"/v1/seeds", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/seeds: %s: %s", resp.Status, body)
	}
	return nil
}

// Formed reports whether every node (by API address) sees exactly
// len(apis) members alive and works on a phase of a schedule counting them
// all.
func Formed(apis []string) bool {
	for _, api := range apis {
		st, err := Status(api)
		if err != nil || st.Phase.Current < 0 || st.Phase.NPhase < len(apis) {
			// Not yet working on a phase of a schedule that counts every
			// member (a join applies from the epoch it announced).
			return false
		}
		alive := 0
		for _, m := range st.Members {
			if m.State == "alive" {
				alive++
			}
		}
		if alive != len(apis) {
			return false
		}
	}
	return true
}

// CrawlDone reports whether every node is done with an empty outbox.
func CrawlDone(apis []string) bool { return len(NotDone(apis)) == 0 }

// NotDone says, for each node that is not done or whose outbox is not
// empty, why: its status error, or its frontier, bucket, outbox and phase.
func NotDone(apis []string) []string {
	var out []string
	for _, api := range apis {
		st, err := Status(api)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: status: %v", api, err))
			continue
		}
		waiting := 0
		for _, n := range st.Outbox {
			waiting += n
		}
		if !st.Done || waiting > 0 {
			out = append(out, fmt.Sprintf("%s (%s): done=%v frontier=%+v bucket=%+v outbox=%v phase=%+v",
				st.Node, api, st.Done, st.Frontier, st.Bucket, st.Outbox, st.Phase))
		}
	}
	return out
}

// PagesFetched sums pages_fetched over the nodes (a status that fails
// counts 0).
func PagesFetched(apis []string) int64 {
	var total int64
	for _, api := range apis {
		if st, err := Status(api); err == nil {
			total += st.PagesFetched
		}
	}
	return total
}

// PeakHeap samples the heap in use of the test process every interval
// until stop is called, and stop returns the peak.
func PeakHeap(interval time.Duration) (stop func() uint64) {
	var peak atomic.Uint64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(quit); <-done; return peak.Load() }
}
