package archive

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

func TestCrawlLogRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "crawl.log")
	l, err := OpenCrawlLog(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 5, 6, 7, 8, 9, 123000000, time.UTC)
	const workers, per = 8, 100
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				e := LogEntry{Time: at, URL: fmt.Sprintf("http://h%d.test/%d", g, i), Status: 200, Bytes: int64(i), MIME: "text/html", DurationMS: 5, Outlinks: i % 3}
				if i%10 == 0 {
					e.Status, e.Error, e.Reason, e.Redirect, e.Truncated = 301, "", "redirect", "http://x.test/", true
				}
				if err := l.Write(e); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := l.Write(LogEntry{URL: "x"}); err != ErrClosed {
		t.Fatalf("write after close: %v", err)
	}
	got := map[string]LogEntry{}
	skipped, err := ReadCrawlLog(path, func(e LogEntry) error { got[e.URL] = e; return nil })
	if err != nil || skipped != 0 || len(got) != workers*per {
		t.Fatalf("read %d entries, skipped %d, err %v", len(got), skipped, err)
	}
	e := got["http://h3.test/20"]
	want := LogEntry{Time: at, URL: "http://h3.test/20", Status: 301, Bytes: 20, MIME: "text/html", DurationMS: 5, Outlinks: 2, Reason: "redirect", Redirect: "http://x.test/", Truncated: true}
	if !e.Time.Equal(want.Time) || e.URL != want.URL || e.Status != want.Status || e.Redirect != want.Redirect || !e.Truncated || e.Outlinks != 2 {
		t.Fatalf("entry %+v, want %+v", e, want)
	}

	// A crash tore the last line: reopening appends on a new line; the torn line is skipped.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2024-05-06T07:08:09Z","url":"http://torn`)
	f.Close()
	l, err = OpenCrawlLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(LogEntry{URL: "http://after.test/"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	skipped, err = ReadCrawlLog(path, func(e LogEntry) error {
		n++
		if e.URL == "http://after.test/" && e.Time.IsZero() {
			t.Error("zero time not filled in")
		}
		return nil
	})
	if err != nil || skipped != 1 || n != workers*per+1 {
		t.Fatalf("after torn line: %d entries, skipped %d, err %v", n, skipped, err)
	}
}

// TestLoggedSince: the URLs of the lines stamped since a time are read from
// the file's tail, across chunk boundaries, a torn last line skipped, and
// the scan stops at the first line older than since less the slack.
func TestLoggedSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.log")
	l, err := OpenCrawlLog(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 3000) // lines long enough to cross 256 KiB chunks
	const n = 400
	for i := range n {
		e := LogEntry{Time: t0.Add(time.Duration(i) * time.Second), URL: fmt.Sprintf("http://h/%d?%s", i, long)}
		if i == n-10 { // out of order by less than the slack
			e.Time = t0.Add(time.Duration(n-40) * time.Second)
		}
		if err := l.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"time":"2026-01-01T00:10:00Z","url":"http://h/torn`)
	f.Close()

	tests := []struct {
		since time.Duration
		slack time.Duration
		want  int
	}{
		{since: (n - 30) * time.Second, slack: time.Minute, want: 29}, // 371..399 but n-10, which is stamped n-40
		{since: (n - 50) * time.Second, slack: time.Minute, want: 50},
		{since: 0, slack: time.Minute, want: n},
		{since: time.Hour, slack: time.Minute, want: 0},
	}
	for _, tc := range tests {
		got, err := LoggedSince(path, t0.Add(tc.since), tc.slack)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want {
			t.Errorf("since +%s: %d URLs, want %d", tc.since, len(got), tc.want)
		}
		for u := range got {
			var i int
			fmt.Sscanf(strings.TrimPrefix(u, "http://h/"), "%d", &i)
			at := t0.Add(time.Duration(i) * time.Second)
			if i == n-10 {
				at = t0.Add(time.Duration(n-40) * time.Second)
			}
			if at.Before(t0.Add(tc.since)) {
				t.Errorf("since +%s: %s is older", tc.since, u[:20])
			}
		}
	}
	if got, err := LoggedSince(filepath.Join(t.TempDir(), "none"), t0, time.Minute); err != nil || len(got) != 0 {
		t.Errorf("missing file: %v %v", got, err)
	}
}

// TestCrawlLogFlush: lines reach the file at Flush and at Close, whole.
func TestCrawlLogFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.log")
	l, err := OpenCrawlLog(path)
	if err != nil {
		t.Fatal(err)
	}
	l.delay = time.Minute // no flush by time until the end of the test
	lines := func() int {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Fatalf("torn line in %q", b)
		}
		return strings.Count(string(b), "\n")
	}
	for i := range 2 {
		if err := l.Write(LogEntry{URL: fmt.Sprintf("http://a.test/%d", i), Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	if n := lines(); n != 0 {
		t.Fatalf("%d lines before Flush, want 0", n)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := lines(); n != 2 {
		t.Fatalf("%d lines after Flush, want 2", n)
	}
	if err := l.Write(LogEntry{URL: "http://a.test/2", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := lines(); n != 3 {
		t.Fatalf("%d lines after Close, want 3", n)
	}
	// By time: a line reaches the file CrawlLogFlushDelay after its Write.
	if l, err = OpenCrawlLog(path); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Write(LogEntry{URL: "http://a.test/3", Status: 200}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "a buffered line written by itself", func() bool { return lines() == 4 })
	if err := l.Flush(); err != nil {
		t.Fatalf("Flush after Close: %v", err)
	}
}

// TestCrawlLogBeforeFlush: the hook runs before buffered lines reach the
// file, for Flush and for the flush delay alike, and not when nothing is
// buffered.
func TestCrawlLogBeforeFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.log")
	l, err := OpenCrawlLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var calls atomic.Int32
	var sizes []int64
	var mu sync.Mutex
	l.SetBeforeFlush(func() {
		defer calls.Add(1) // after the size is kept
		fi, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		sizes = append(sizes, fi.Size())
		mu.Unlock()
	})
	if err := l.Flush(); err != nil || calls.Load() != 0 {
		t.Fatalf("Flush of an empty log: %v, %d hook calls", err, calls.Load())
	}
	if err := l.Write(LogEntry{URL: "http://a.test/1", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(LogEntry{URL: "http://a.test/2", Status: 200}); err != nil {
		t.Fatal(err)
	}
	// The flush delay (2 ms) runs the hook.
	wait.For(t, 5*time.Second, "the hook run by the flush delay", func() bool { return calls.Load() >= 2 })
	if err := l.Flush(); err != nil { // nothing left: no third call
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 2 || sizes[0] != 0 || sizes[1] == 0 || sizes[1] >= fi.Size() {
		t.Fatalf("file sizes seen by the hook %v (file now %d bytes): want 0, then the first line only", sizes, fi.Size())
	}
}

func TestTailCrawlLog(t *testing.T) {
	long := `{"url":"` + strings.Repeat("x", 70<<10) + `"}`
	tests := []struct {
		name string
		file string // "" : no file
		k    int
		want []string
	}{
		{"missing file", "", 5, nil},
		{"empty", "\n", 5, nil},
		{"last k", `{"a":1}` + "\n" + `{"a":2}` + "\n" + `{"a":3}` + "\n", 2, []string{`{"a":2}`, `{"a":3}`}},
		{"fewer than k", `{"a":1}` + "\n", 10, []string{`{"a":1}`}},
		{"torn last line dropped", `{"a":1}` + "\n" + `{"a":2`, 5, []string{`{"a":1}`}},
		{"not JSON skipped", `{"a":1}` + "\n" + "garbage\n\n" + `{"a":3}` + "\n", 5, []string{`{"a":1}`, `{"a":3}`}},
		{"line longer than a read chunk", `{"a":1}` + "\n" + long + "\n" + `{"a":3}` + "\n", 3, []string{`{"a":1}`, long, `{"a":3}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crawl.log")
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := TailCrawlLog(path, tc.k)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d lines, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if string(got[i]) != tc.want[i] {
					t.Errorf("line %d = %.40q, want %.40q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
