package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/syncbuf"
)

// binDir holds the phasecrawl binary built once for the whole package.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "phasecrawl-deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy tests: temporary directory:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the module root (the tests run in deploy/).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatalf("repository root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// phasecrawlBinary builds the static binary the image ships
// (CGO_ENABLED=0 -trimpath -ldflags='-s -w', as deploy/build-image.sh does,
// so the image build reuses the build cache) once per test binary.
func phasecrawlBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("go command not in PATH: %w", err)
			return
		}
		out := filepath.Join(binDir, "phasecrawl")
		cmd := exec.Command(goCmd, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, b)
			return
		}
		buildPath = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// requireTool returns the path of command name. When it is missing the
// test is skipped with why, except under CI=true, where .ci/run installs
// it and its absence is a failure.
func requireTool(t testing.TB, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	for _, dir := range []string{"/usr/bin", "/usr/sbin", "/usr/local/bin"} {
		if c := filepath.Join(dir, name); isExecutable(c) {
			return c
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found with CI=true (.ci/run installs it): %s", name, why)
	}
	t.Skipf("%s not found (install it to run this test; CI installs it): %s", name, why)
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// freePort returns a port free on 127.0.0.1 for TCP and, with udp, for UDP
// too (gossip uses both).
func freePort(t testing.TB, udp bool) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if udp {
			pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				ln.Close()
				continue
			}
			pc.Close()
		}
		ln.Close()
		return port
	}
	t.Fatal("no free port for TCP and UDP after 50 tries")
	return 0
}

// proc is a process started by a test; stop ends it with SIGTERM (then
// SIGKILL after grace) and reports how it exited.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncbuf.Buffer // stdout and stderr
	done chan struct{}
	err  error // set when done is closed
	once sync.Once
}

// startProc starts bin with args (env added to the test's environment) and
// registers its stop with t.Cleanup.
func startProc(t testing.TB, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if err := p.stop(20 * time.Second); err != nil && !t.Failed() {
			t.Logf("%s: %v", name, err)
		}
	})
	return p
}

// stop sends SIGTERM, waits up to grace, then kills. It returns the exit
// error (nil for exit 0).
func (p *proc) stop(grace time.Duration) error {
	p.once.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
			p.err = fmt.Errorf("did not exit within %s of SIGTERM, killed (%v)", grace, p.err)
		}
	})
	<-p.done
	return p.err
}

// exited reports whether the process ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// getJSON GETs url and decodes a 200 answer into v.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("GET %s: read: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: decode: %w", url, err)
	}
	return nil
}

// getStatus GETs url and returns the status code and body.
func getStatus(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(body), err
}

// postSeeds posts seeds (one a line) to a node's API, with the bearer
// token when one is given.
func postSeeds(ctx context.Context, api string, seeds []string, token string) (added int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+api+"/v1/seeds", strings.NewReader(strings.Join(seeds, "\n")+"\n"))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "text/plain")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post seeds to %s: %w", api, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var res struct {
		Given int `json:"given"`
		Added int `json:"added"`
		Bad   []struct {
			URL   string `json:"url"`
			Error string `json:"error"`
		} `json:"bad"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return 0, fmt.Errorf("post seeds to %s: %s: %s", api, resp.Status, strings.TrimSpace(string(body)))
	}
	if resp.StatusCode != http.StatusOK || len(res.Bad) > 0 {
		return res.Added, fmt.Errorf("post seeds to %s: %s: refused %+v", api, resp.Status, res.Bad)
	}
	return res.Added, nil
}

// nodeStatus is the part of GET /v1/status the deployment tests read.
type nodeStatus struct {
	Node         string `json:"node"`
	PagesFetched int64  `json:"pages_fetched"`
	Done         bool   `json:"done"`
	Frontier     struct {
		InList     int64 `json:"in_list"`
		InProgress int64 `json:"in_progress"`
		Completed  int64 `json:"completed"`
		Stalled    int64 `json:"stalled"`
	} `json:"frontier"`
	Phase struct {
		NPhase  int `json:"nphase"`
		Current int `json:"current"`
	} `json:"phase"`
	// Members and Outbox come with the cluster layer's status; a node
	// without them decodes to nil.
	Members []struct {
		Name     string `json:"name"`
		API      string `json:"api"`
		Exchange string `json:"exchange"`
		State    string `json:"state"`
	} `json:"members"`
	Outbox map[string]int `json:"outbox"`
}

// aliveMembers counts the members the status lists as alive.
func (s nodeStatus) aliveMembers() int {
	n := 0
	for _, m := range s.Members {
		if m.State == "alive" {
			n++
		}
	}
	return n
}

// outboxLen is the number of URLs waiting in the node's outbox.
func (s nodeStatus) outboxLen() int {
	n := 0
	for _, v := range s.Outbox {
		n += v
	}
	return n
}

// metricValue scrapes api's /metrics and returns the value of the unlabelled
// series name.
func metricValue(ctx context.Context, api, name string) (float64, error) {
	code, body, err := getStatus(ctx, "http://"+api+"/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("GET %s/metrics: %d", api, code)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				return 0, fmt.Errorf("%s: value %q: %w", name, v, err)
			}
			return f, nil
		}
	}
	return 0, fmt.Errorf("%s/metrics has no series %s", api, name)
}
