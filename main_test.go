package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cli"
	"github.com/phasecrawl/phasecrawl/internal/syncbuf"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/test/harness"
)

// TestBinary builds phasecrawl, runs a node as its own process, drives it
// with the thin clients, stops it with SIGTERM (exit 0 expected) and starts
// it again on the same data directory.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "phasecrawl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/":
			fmt.Fprint(w, `<a href="/p1">1</a> <a href="/p2">2</a>`)
		default:
			fmt.Fprint(w, `<a href="/">home</a>`)
		}
	}))
	defer site.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t, "127.0.0.1"))
	data := filepath.Join(dir, "data")

	start := func() (*exec.Cmd, *syncbuf.Buffer) {
		var logs syncbuf.Buffer
		cmd := exec.Command(bin, "run", "--data", data, "--http", addr, "--allow-private", "--delay", "1ms", "--log-format", "json")
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		proc := cmd.Process
		t.Cleanup(func() { _ = proc.Kill() }) // a failed wait leaves it running
		wait.For(t, 20*time.Second, "node ready", func() (bool, string) {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false, err.Error() + "\n" + logs.String()
			}
			resp.Body.Close()
			return resp.StatusCode == 200, fmt.Sprintf("/readyz %d\n%s", resp.StatusCode, logs.String())
		})
		return cmd, &logs
	}
	stop := func(cmd *exec.Cmd, logs *syncbuf.Buffer) {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("node did not exit after SIGTERM")
		}
		if !strings.Contains(logs.String(), `"msg":"node stopped"`) {
			t.Errorf("no 'node stopped' log line:\n%s", logs.String())
		}
	}

	cmd, logs := start()
	var out, errOut bytes.Buffer
	if code := cli.Run([]string{"seed", "--node", addr, site.URL + "/", "ftp://nope/"}, nil, &out, &errOut); code != 1 {
		t.Errorf("seed with a bad URL: exit %d, want 1 (%s)", code, errOut.String())
	}
	if !strings.Contains(out.String(), "2 given, 1 new") || !strings.Contains(out.String(), "line 2") {
		t.Errorf("seed output = %q", out.String())
	}
	wait.For(t, 20*time.Second, "crawl complete: 3 pages", func() (bool, string) {
		var st node.Status
		out.Reset()
		if code := cli.Run([]string{"status", "--node", addr, "--json"}, nil, &out, &errOut); code != 0 {
			t.Fatalf("status: exit %d: %s", code, errOut.String())
		}
		if err := json.Unmarshal(out.Bytes(), &st); err != nil {
			t.Fatalf("status JSON: %v: %s", err, out.String())
		}
		return st.Frontier.Completed >= 3, fmt.Sprintf("%+v", st)
	})
	out.Reset()
	if code := cli.Run([]string{"status", "--node", addr}, nil, &out, &errOut); code != 0 || !strings.Contains(out.String(), "completed 3") {
		t.Errorf("status text (exit %d): %s", code, out.String())
	}
	stop(cmd, logs)

	// Same data again: the pages are known, the seed is not new.
	cmd, logs = start()
	out.Reset()
	cli.Run([]string{"seed", "--node", addr, site.URL + "/"}, nil, &out, &errOut)
	if !strings.Contains(out.String(), "1 given, 0 new") {
		t.Errorf("after restart the seed should be known: %q", out.String())
	}
	stop(cmd, logs)

	// A bad flag value names the key and its range.
	res, err := exec.Command(bin, "run", "--data", data, "--workers", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(res), "workers=0: must be in 1..4096") {
		t.Errorf("bad workers: err=%v output=%s", err, res)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
}

// TestLinksNoTestPackage: the binary links no package under test/ (the
// demo's synthetic web is demo/synthweb); go list names every package it
// links.
func TestLinksNoTestPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const mod = "github.com/phasecrawl/phasecrawl"
	var ours int
	for _, p := range strings.Fields(string(out)) {
		if p == mod+"/test" || strings.HasPrefix(p, mod+"/test/") {
			t.Errorf("the binary links %s", p)
		}
		if strings.HasPrefix(p, mod+"/") {
			ours++
		}
	}
	if ours < 10 || !strings.Contains(string(out), mod+"/demo/synthweb\n") {
		t.Fatalf("go list -deps names %d of the module's packages, without demo/synthweb: %s", ours, out)
	}
}
