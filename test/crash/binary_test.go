package crash

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/harness"
	"github.com/phasecrawl/phasecrawl/test/testbin"
)

// TestMain removes the binary built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// binary returns the phasecrawl binary, built once per test process.
func binary(t *testing.T) string {
	t.Helper()
	return testbin.Path(t)
}

// logBuffer keeps what a child writes (the last max bytes), safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// child is one phasecrawl process.
type child struct {
	cmd    *exec.Cmd
	addr   string // API address
	logs   *logBuffer
	done   chan struct{}
	err    error // of Wait, once done is closed
	stdout *logBuffer
}

// start runs the binary with args (the API on addr); the test kills it at cleanup if needed.
func start(t *testing.T, bin, addr string, env []string, args ...string) *child {
	t.Helper()
	c := &child{addr: addr, logs: &logBuffer{max: 4 << 20}, stdout: &logBuffer{max: 1 << 20}, done: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr, c.cmd.Stdout = c.logs, c.stdout
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { c.kill() })
	return c
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop sends SIGTERM and waits up to timeout for a clean exit.
func (c *child) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		if c.err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", c.err, tail(c.logs.String()))
		}
	case <-time.After(timeout):
		c.kill()
		t.Fatalf("no exit %s after SIGTERM\n%s", timeout, tail(c.logs.String()))
	}
}

// exited waits up to timeout for the process to end by itself and returns its error.
func (c *child) exited(timeout time.Duration) (error, bool) {
	select {
	case <-c.done:
		return c.err, true
	case <-time.After(timeout):
		return nil, false
	}
}

// get fetches path of the child's API.
func (c *child) get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// waitReady polls /readyz until it answers 200, the process exits, or timeout.
func (c *child) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	wait.For(t, timeout, "/readyz answers 200", func() (bool, string) {
		select {
		case <-c.done:
			t.Fatalf("exited before ready: %v\n%s", c.err, tail(c.logs.String()))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		code, _, err := c.get(ctx, "/readyz")
		cancel()
		return err == nil && code == 200, tail(c.logs.String())
	})
}

// freeAddr returns a loopback address with a free port, never one handed
// out before in this test process.
func freeAddr(t *testing.T) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(harness.FreePort(t, "127.0.0.1")))
}

// tail returns the last lines of a log, for failure messages.
func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
