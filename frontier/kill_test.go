package frontier

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const childBatch = 200

// child is the body of the killed process: it adds batches forever (with
// fsync), marks the first of each batch in progress, and prints the number
// of acknowledged URLs after each batch.
func child() {
	f, err := Open(DefaultOptions(os.Getenv("FRONTIER_CHILD")))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	all := childURLs(childBatch * 1000)
	for i := 0; i < len(all); i += childBatch { // bounded, in case the parent dies
		b := all[i : i+childBatch]
		if _, err := f.Add(ctx, b); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		if err := f.MarkInProgress(ctx, refsOf(b[:1])); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("acked", i+childBatch)
	}
	os.Exit(0)
}

// runAndKill starts the child, waits for 10 acknowledged batches, kills it
// with SIGKILL and returns the last acknowledged count it printed.
func runAndKill(t *testing.T, path string) (int, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$")
	cmd.Env = append(os.Environ(), "FRONTIER_CHILD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	acked, batches := 0, 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "acked "); ok {
			acked, _ = strconv.Atoi(n)
			if batches++; batches == 10 {
				break
			}
		} else if strings.HasPrefix(line, "error") {
			return 0, fmt.Errorf("child: %s", line)
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		return 0, err
	}
	// Lines printed before the kill may still be in the pipe.
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
			acked, _ = strconv.Atoi(n)
		}
	}
	_ = cmd.Wait()
	if batches < 10 {
		return 0, fmt.Errorf("child acknowledged only %d batches", batches)
	}
	t.Logf("killed child after %d acknowledged URLs", acked)
	return acked, nil
}
