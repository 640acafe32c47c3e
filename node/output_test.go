package node

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// outputConfig is a configuration with WARC output on (warc) in a fresh data directory.
func outputConfig(t *testing.T, warc bool) config.Config {
	c := config.Default()
	c.Name = "t"
	c.Data = t.TempDir()
	c.WARC.Enabled = warc
	return c
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// exchange is a page's WARC exchange and its crawl-log line.
func exchange(u string) (archive.Capture, archive.LogEntry) {
	x := archive.Capture{Target: u, Request: []byte("GET / HTTP/1.1\r\n\r\n"),
		Response: []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"), Body: []byte("hi")}
	return x, archive.LogEntry{URL: u, Status: 200, Bytes: 2}
}

// warcText is the uncompressed content of every WARC file in dir (open
// ones included): the records written to the files so far.
func warcText(t *testing.T, dir string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "warc", "*.warc.gz*"))
	var all bytes.Buffer
	for _, p := range paths {
		if strings.HasSuffix(p, archive.CDXJSuffix) {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			continue
		}
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if _, err := io.Copy(&all, zr); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	return all.String()
}

func crawlLogText(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, crawlLogName))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestOutputLineAfterRecords: whatever writes a page's crawl-log line to the
// file (the node's flush, the log's own flush delay or buffer, close), the
// page's WARC records are in the WARC file by then.
func TestOutputLineAfterRecords(t *testing.T) {
	tests := []struct {
		name  string
		write func(t *testing.T, o *output) // makes the line reach the file
	}{
		{"flush", func(t *testing.T, o *output) { o.flush() }},
		{"the crawl log's own flush", func(t *testing.T, o *output) {
			if err := o.clog.Flush(); err != nil {
				t.Fatal(err)
			}
		}},
		{"the crawl log's flush delay", func(t *testing.T, o *output) {
			wait.For(t, 30*time.Second, "the crawl log's timed flush", func() bool {
				data, _ := os.ReadFile(o.logPath)
				return len(data) > 0
			})
		}},
		{"a full crawl log buffer", func(t *testing.T, o *output) {
			for i := 0; i < archive.CrawlLogBufferSize/100; i++ {
				o.writeLog(archive.LogEntry{URL: "http://filler.test/" + strings.Repeat("x", 80)})
			}
		}},
		{"close", func(t *testing.T, o *output) { o.close() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := outputConfig(t, true)
			o, err := openOutput(c, quietLog())
			if err != nil {
				t.Fatal(err)
			}
			defer o.close()
			for i := range 3 {
				u := "http://a.test/" + string(rune('a'+i))
				x, e := exchange(u)
				o.writeWARC(x) // the worker's order: records, then the line
				o.writeLog(e)
			}
			tc.write(t, o)
			lines := crawlLogText(t, c.Data)
			records := warcText(t, c.Data)
			for i := range 3 {
				u := "http://a.test/" + string(rune('a'+i))
				if strings.Contains(lines, `"url":"`+u+`"`) && !strings.Contains(records, "WARC-Target-URI: "+u) {
					t.Errorf("%s: the crawl log has its line, the WARC file not its records", u)
				}
			}
			if !strings.Contains(lines, `"url":"http://a.test/a"`) {
				t.Errorf("the line did not reach the file: %q", lines)
			}
		})
	}
}

// TestOutputBeforeCommit: with flush as the frontier's before-commit hook
// (as the node sets it), a page's records and line are in their files once
// the frontier write that follows them returns.
func TestOutputBeforeCommit(t *testing.T) {
	for _, warc := range []bool{true, false} {
		c := outputConfig(t, warc)
		o, err := openOutput(c, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		f, err := frontier.Open(frontier.DefaultOptions(filepath.Join(c.Data, "frontier.db")))
		if err != nil {
			t.Fatal(err)
		}
		f.SetBeforeCommit(o.flush)
		x, e := exchange("http://a.test/p")
		o.writeWARC(x)
		o.writeLog(e)
		if _, err := f.Add(context.Background(), []frontier.NewURL{{URL: "http://a.test/q", Host: "a.test"}}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(crawlLogText(t, c.Data), `"url":"http://a.test/p"`) {
			t.Errorf("warc %v: the line is not in the crawl log after the commit", warc)
		}
		if records := warcText(t, c.Data); warc != strings.Contains(records, "WARC-Target-URI: http://a.test/p") {
			t.Errorf("warc %v: records in the WARC file after the commit: %v", warc, !warc)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		o.close()
	}
}

// TestOutputClose: close finishes the WARC file (renamed from .open, with
// its CDXJ index) and writes the crawl log's last lines; a second close is
// harmless.
func TestOutputClose(t *testing.T) {
	c := outputConfig(t, true)
	o, err := openOutput(c, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	x, e := exchange("http://a.test/last")
	o.writeWARC(x)
	o.writeLog(e)
	o.close()
	o.close()
	open, _ := filepath.Glob(filepath.Join(c.Data, "warc", "*"+archive.OpenSuffix))
	done, _ := filepath.Glob(filepath.Join(c.Data, "warc", "*.warc.gz"))
	if len(open) != 0 || len(done) != 1 {
		t.Fatalf("open files %v, finished %v; want none and one", open, done)
	}
	if _, err := os.Stat(done[0] + archive.CDXJSuffix); err != nil {
		t.Errorf("finished file without its index: %v", err)
	}
	var got []string
	if err := archive.EachResponse(done[0], func(h archive.RecordHeader, _ []byte) error {
		got = append(got, h.TargetURI)
		return nil
	}); err != nil || len(got) != 1 || got[0] != "http://a.test/last" {
		t.Fatalf("responses %v, %v", got, err)
	}
	if tail, err := o.tail(5); err != nil || len(tail) != 1 || !strings.Contains(string(tail[0]), "http://a.test/last") {
		t.Fatalf("crawl log tail %s, %v", tail, err)
	}
}

// TestOutputAfterKill: what a killed process flushed stays; the next output
// on the data directory repairs the WARC file it left open and lists it
// (crashed), and tells which of its pages have their crawl-log line: a kill
// between a page's WARC flush and its line leaves the page without one.
func TestOutputAfterKill(t *testing.T) {
	c := outputConfig(t, true)
	killed, err := openOutput(c, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	x, e := exchange("http://a.test/logged")
	killed.writeWARC(x)
	killed.writeLog(e)
	killed.flush()
	x, _ = exchange("http://a.test/unlogged")
	killed.writeWARC(x)
	killed.flushWARC() // killed before its line was written
	since := time.Now().Add(-time.Minute)

	// The killed process's files stay as they are: nothing more is written
	// to them (nothing is buffered), and it never closes.
	o, err := openOutput(c, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	crashed := o.crashed()
	if len(crashed) != 1 || strings.HasSuffix(crashed[0], archive.OpenSuffix) {
		t.Fatalf("crashed %v, want the repaired file", crashed)
	}
	var got []string
	if err := archive.EachResponse(crashed[0], func(h archive.RecordHeader, _ []byte) error {
		got = append(got, h.TargetURI)
		return nil
	}); err != nil || strings.Join(got, " ") != "http://a.test/logged http://a.test/unlogged" {
		t.Fatalf("responses of the repaired file %v, %v", got, err)
	}
	logged, err := o.loggedSince(since, time.Minute)
	if err != nil || !logged["http://a.test/logged"] || logged["http://a.test/unlogged"] {
		t.Fatalf("logged %v, %v", logged, err)
	}
}

// TestOutputWithoutWARC: with warc.enabled off there is no WARC file, and
// the crawl log is written as ever.
func TestOutputWithoutWARC(t *testing.T) {
	c := outputConfig(t, false)
	o, err := openOutput(c, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if o.archiving() {
		t.Fatal("archiving with warc.enabled off")
	}
	x, e := exchange("http://a.test/p")
	o.writeWARC(x)
	o.writeLog(e)
	o.close()
	if _, err := os.Stat(filepath.Join(c.Data, "warc")); !os.IsNotExist(err) {
		t.Errorf("a warc directory: %v", err)
	}
	if len(o.crashed()) != 0 || !strings.Contains(crawlLogText(t, c.Data), "http://a.test/p") {
		t.Errorf("crawl log %q", crawlLogText(t, c.Data))
	}
}
