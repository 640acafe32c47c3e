package archive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// enospc fails a write as a full file system does.
func enospc() error { return &os.PathError{Op: "write", Path: "test", Err: syscall.ENOSPC} }

// TestWARCTickets: records buffered together share a ticket that their
// write settles; a write that fails (ENOSPC) loses them, says so in their
// ticket and in the error, and the records after it are written again.
func TestWARCTickets(t *testing.T) {
	dir := t.TempDir()
	c := DefaultWARCConfig(dir)
	c.Prefix, c.FlushDelay = "test", time.Minute
	w, err := NewWARCWriter(c)
	if err != nil {
		t.Fatal(err)
	}
	write := func(i int) *Ticket {
		t.Helper()
		target, req, resp := testCapture(i, 500)
		tk, err := w.WriteTicket(Capture{Target: target, Request: req, Response: resp})
		if err != nil || tk == nil {
			t.Fatalf("write %d: %v (ticket %v)", i, err, tk)
		}
		return tk
	}
	t0, t1 := write(0), write(1)
	if t0 != t1 || t0.Written() || t0.Lost() {
		t.Fatalf("buffered together: tickets %p %p, written %v lost %v; want one, pending", t0, t1, t0.Written(), t0.Lost())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !t0.Written() {
		t.Fatal("ticket not written after Flush")
	}
	w.SetFault(enospc)
	t2 := write(2)
	if t2 == t0 {
		t.Fatal("a new buffer got the written buffer's ticket")
	}
	err = w.Flush()
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "buffered bytes lost") {
		t.Fatalf("failed flush: %v, want ENOSPC and the loss", err)
	}
	if !t2.Lost() || t2.Written() {
		t.Fatalf("ticket of a failed write: lost %v written %v", t2.Lost(), t2.Written())
	}
	w.SetFault(nil)
	t3 := write(3)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !t3.Written() || !t0.Written() || !t2.Lost() {
		t.Fatalf("after Close: written %v %v, lost %v", t0.Written(), t3.Written(), t2.Lost())
	}
	var targets []string
	for _, r := range checkFile(t, w.Files()[0]) {
		if r.h["WARC-Type"] == "response" {
			targets = append(targets, r.h["WARC-Target-URI"][len("http://h0.synth.test/p/"):])
		}
	}
	if got := strings.Join(targets, ","); got != "0,1,3" {
		t.Fatalf("responses in the file: %s, want 0,1,3", got)
	}
	if l := LostTicket(); !l.Lost() || l.Written() {
		t.Fatal("LostTicket is not lost")
	}
}

// TestCrawlLogTickets: a write error loses the buffered lines (their
// ticket says so) and no longer stops the log: later lines are written.
func TestCrawlLogTickets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.log")
	l, err := OpenCrawlLog(path)
	if err != nil {
		t.Fatal(err)
	}
	l.delay = time.Minute
	write := func(i int) *Ticket {
		t.Helper()
		tk, err := l.WriteTicket(LogEntry{URL: fmt.Sprintf("http://a.test/%d", i), Status: 200})
		if err != nil || tk == nil {
			t.Fatalf("write %d: %v", i, err)
		}
		return tk
	}
	t0 := write(0)
	if err := l.Flush(); err != nil || !t0.Written() {
		t.Fatalf("flush: %v, written %v", err, t0.Written())
	}
	l.SetFault(enospc)
	t1 := write(1)
	if err := l.Flush(); !errors.Is(err, syscall.ENOSPC) || !t1.Lost() {
		t.Fatalf("failed flush: %v, lost %v; want ENOSPC and a lost ticket", err, t1.Lost())
	}
	// The timer's failed flush reaches the next Flush.
	t2 := write(2)
	l.timedFlush()
	if !t2.Lost() {
		t.Fatal("the timer's failed flush left its ticket pending")
	}
	l.SetFault(nil)
	t3 := write(3)
	if err := l.Flush(); !errors.Is(err, syscall.ENOSPC) || !t3.Written() {
		t.Fatalf("flush after the timer's failure: %v (want its ENOSPC), written %v", err, t3.Written())
	}
	if err := l.Flush(); err != nil {
		t.Fatalf("second flush: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var urls []string
	if _, err := ReadCrawlLog(path, func(e LogEntry) error { urls = append(urls, e.URL[len("http://a.test/"):]); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(urls, ","); got != "0,3" {
		t.Fatalf("lines in the log: %s, want 0,3 (1 and 2 lost)", got)
	}
}

// TestWARCIndexRetried: a CDXJ index that cannot be written when its file
// is finished (a full disk) is an ErrIndex error, the records stay in the
// file, and the index is written from them when the next file finishes.
func TestWARCIndexRetried(t *testing.T) {
	dir := t.TempDir()
	c := DefaultWARCConfig(dir)
	c.Prefix, c.FlushDelay = "test", time.Minute
	w, err := NewWARCWriter(c)
	if err != nil {
		t.Fatal(err)
	}
	write := func(i int) {
		t.Helper()
		target, req, resp := testCapture(i, 500)
		if _, err := w.WriteTicket(Capture{Target: target, Request: req, Response: resp}); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	first := strings.TrimSuffix(w.openPath, OpenSuffix)
	// A directory where the index's temporary file goes: it cannot be created.
	block := first + CDXJSuffix + ".tmp"
	if err := os.Mkdir(block, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Rotate(); !errors.Is(err, ErrIndex) {
		t.Fatalf("rotate with the index blocked: %v, want ErrIndex", err)
	}
	if _, err := os.Stat(first + CDXJSuffix); !os.IsNotExist(err) {
		t.Fatalf("index of the first file: %v, want none yet", err)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	write(1)
	if err := w.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, f := range w.Files() {
		if lines, err := CheckCDXJ(f); err != nil || lines != 1 {
			t.Errorf("%s: index of %d lines: %v, want 1", f, lines, err)
		}
	}
}
