// Package testbin builds the phasecrawl command once per test process, for
// tests that run nodes as separate processes.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	path string
	err  error
)

// Path builds phasecrawl (without -race: the nodes are separate processes;
// the test process keeps its own instrumentation) the first time it is
// called and returns the binary's path; a build error fails tb.
func Path(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		var mod []byte
		if mod, err = exec.Command("go", "env", "GOMOD").Output(); err != nil {
			err = fmt.Errorf("testbin: go env GOMOD: %w", err)
			return
		}
		if dir, err = os.MkdirTemp("", "phasecrawl-bin-"); err != nil {
			err = fmt.Errorf("testbin: %w", err)
			return
		}
		path = filepath.Join(dir, "phasecrawl")
		cmd := exec.Command("go", "build", "-o", path, ".")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
		if out, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("testbin: go build: %w\n%s", berr, out)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// Cleanup removes the binary; call it from TestMain after m.Run.
func Cleanup() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
