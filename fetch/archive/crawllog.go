package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// LogEntry is one line of the crawl log (JSON).
type LogEntry struct {
	Time       time.Time `json:"time"`
	URL        string    `json:"url"`
	Status     int       `json:"status"`
	Bytes      int64     `json:"bytes"`
	MIME       string    `json:"mime"`
	DurationMS int64     `json:"duration_ms"`
	Outlinks   int       `json:"outlinks"`
	Error      string    `json:"error,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Redirect   string    `json:"redirect,omitempty"`
	Truncated  bool      `json:"truncated,omitempty"`
	// Canonical is the page's rel=canonical URL (<link> or Link header),
	// normalized, when it names another URL than the page's.
	Canonical string `json:"canonical,omitempty"`
}

// CrawlLog appends JSON lines to a file (O_APPEND). Lines are buffered and go to the file with
// one write(2) when Flush is called, CrawlLogFlushDelay after the oldest buffered line was
// written, when CrawlLogBufferSize bytes are buffered, and at Close; once written they survive
// a kill -9 of the process (only a power loss can tear the last line). The node flushes before
// each frontier commit, so a line whose URL the frontier has recorded survives a kill -9 as
// the record does. A write error (a full disk) loses the buffered lines (their Ticket says so)
// and cuts a partly written line off the file; later lines are written when the disk allows.
// Safe for concurrent use.
type CrawlLog struct {
	path    string
	delay   time.Duration // CrawlLogFlushDelay (tests change it)
	mu      sync.Mutex
	f       *os.File
	pending []byte     // lines not written yet
	timer   flushTimer // flushes delay after pending became non-empty
	size    int64      // bytes in the file (a failed write is cut back to it)
	ticket  *Ticket    // the ticket of pending (nil: nothing pending)
	flushed error      // error of a flush by the timer, returned by the next Flush
	before  func()     // SetBeforeFlush
	fault   Fault      // SetFault
}

// SetBeforeFlush makes fn run before every write of buffered lines to the
// file, whatever starts it (Flush, the flush delay, a full buffer, Close).
// The node flushes its WARC writer there: a page's line then never reaches
// the file before its WARC records, and recovery after a kill -9 (which
// settles from the WARC file the pages the log shows as fetched) can rely
// on it. fn runs with the log's lock held and must not call the log.
func (l *CrawlLog) SetBeforeFlush(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.before = fn
}

// SetFault makes fn fail the writes of buffered lines it returns an error
// for (nil: none fails); for tests.
func (l *CrawlLog) SetFault(fn Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = fn
}

// CrawlLogBufferSize is how many buffered bytes make Write flush on its own.
const CrawlLogBufferSize = 256 << 10

// CrawlLogFlushDelay is the longest a line stays buffered when nobody calls Flush.
const CrawlLogFlushDelay = 2 * time.Millisecond

// OpenCrawlLog opens (creating it and its directory if needed) path for appending. If a crash
// left a torn last line, a newline is added so new entries start on their own line.
func OpenCrawlLog(path string) (*CrawlLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("archive: crawl log dir for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("archive: open crawl log %s: %w", path, err)
	}
	if torn, err := endsTorn(path); err != nil {
		f.Close()
		return nil, err
	} else if torn {
		if _, err := f.Write([]byte("\n")); err != nil {
			f.Close()
			return nil, fmt.Errorf("archive: crawl log %s: %w", path, err)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("archive: crawl log %s: %w", path, err)
	}
	return &CrawlLog{path: path, f: f, size: fi.Size(), delay: CrawlLogFlushDelay}, nil
}

func endsTorn(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("archive: crawl log %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return false, err
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], fi.Size()-1); err != nil {
		return false, fmt.Errorf("archive: crawl log %s: %w", path, err)
	}
	return b[0] != '\n', nil
}

// Write appends e as one JSON line (Time zero = now) to the buffer.
func (l *CrawlLog) Write(e LogEntry) error {
	_, err := l.WriteTicket(e)
	return err
}

// WriteTicket is Write that also returns the line's Ticket: it tells, once
// the buffer has been written, whether the line reached the file. On an
// error the ticket is nil and nothing was buffered, or the ticket is lost.
func (l *CrawlLog) WriteTicket(e LogEntry) (*Ticket, error) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("archive: crawl log entry: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil, ErrClosed
	}
	l.pending = append(append(l.pending, b...), '\n')
	if l.ticket == nil {
		l.ticket = new(Ticket)
	}
	tk := l.ticket
	if len(l.pending) >= CrawlLogBufferSize {
		return tk, l.flushLocked()
	}
	l.timer.arm(l.delay, l.timedFlush)
	return tk, nil
}

// timedFlush is the timer's flush; its error waits for the next Flush.
func (l *CrawlLog) timedFlush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer.fired()
	if err := l.flushLocked(); err != nil && l.flushed == nil {
		l.flushed = err
	}
}

// Flush writes the buffered lines to the file. On a write error the buffered lines are
// lost (their Ticket says so) and a partly written line is cut off the file; an error of a
// flush made by the timer since the last Flush is returned here too. Flush
// after Close returns nil.
func (l *CrawlLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.flushLocked()
	if l.flushed != nil {
		err, l.flushed = errors.Join(l.flushed, err), nil
	}
	return err
}

func (l *CrawlLog) flushLocked() error {
	if l.f == nil || len(l.pending) == 0 { // closed, or nothing to write
		return nil
	}
	if l.before != nil {
		l.before()
	}
	n, err := faultWrite(l.fault, l.f, l.pending)
	lost := len(l.pending)
	l.pending = l.pending[:0]
	if cap(l.pending) > 4*CrawlLogBufferSize {
		l.pending = nil
	}
	if l.ticket != nil {
		l.ticket.settle(err)
		l.ticket = nil
	}
	if err == nil {
		l.size += int64(n)
		return nil
	}
	err = fmt.Errorf("archive: write crawl log %s: %w (%d buffered bytes lost)", l.path, err, lost)
	if n > 0 {
		// Cut the partial line so the next one starts on a line of its own.
		if terr := l.f.Truncate(l.size); terr != nil {
			// It stays torn: start the next write on a new line.
			l.size += int64(n)
			l.pending = append(l.pending, '\n')
		}
	}
	return err
}

// Close flushes, syncs and closes the file. Idempotent.
func (l *CrawlLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	l.timer.stop()
	err := l.flushLocked()
	if serr := l.f.Sync(); err == nil && serr != nil {
		err = fmt.Errorf("archive: sync crawl log %s: %w", l.path, serr)
	}
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("archive: close crawl log %s: %w", l.path, cerr)
	}
	l.f = nil
	return err
}

// ReadCrawlLog calls fn for every entry of a crawl log. Lines that do not parse (a line torn by
// a crash) are skipped and counted.
func ReadCrawlLog(path string, fn func(LogEntry) error) (skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("archive: open crawl log %s: %w", path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 && !(len(line) == 1 && line[0] == '\n') {
			var e LogEntry
			if json.Unmarshal(line, &e) != nil {
				skipped++
			} else if err := fn(e); err != nil {
				return skipped, err
			}
		}
		if errors.Is(rerr, io.EOF) {
			return skipped, nil
		}
		if rerr != nil {
			return skipped, fmt.Errorf("archive: read crawl log %s: %w", path, rerr)
		}
	}
}

// LoggedSince returns the URLs of the crawl log's lines stamped at or after
// since, reading the file backwards from its end and stopping at the first
// line older than since less slack (lines are appended as pages finish, so
// their stamps, taken when a page's fetch starts, are out of order by at most
// the longest fetch). A missing file has no lines. Torn lines are skipped.
// It is how a node restarted after kill -9 learns which pages of the last
// moments have their line already, reading only the file's tail.
func LoggedSince(path string, since time.Time, slack time.Duration) (map[string]bool, error) {
	logged := map[string]bool{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return logged, nil
	}
	if err != nil {
		return nil, fmt.Errorf("archive: open crawl log %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("archive: crawl log %s: %w", path, err)
	}
	const chunk = 256 << 10
	stop := since.Add(-slack)
	end := fi.Size()
	var rest []byte // the start of a line whose beginning is in an earlier chunk
	for end > 0 {
		off := max(end-chunk, 0)
		buf := make([]byte, end-off, int(end-off)+len(rest))
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("archive: read crawl log %s: %w", path, err)
		}
		buf = append(buf, rest...)
		end = off
		// Before the chunk's first newline is the end of a line that begins
		// in an earlier chunk (unless the chunk starts the file): kept for it.
		first := 0
		if end > 0 {
			if first = bytes.IndexByte(buf, '\n') + 1; first == 0 {
				rest = buf
				continue
			}
		}
		// Lines from the last to the first.
		for lines := buf[first:]; len(lines) > 0; {
			lines = bytes.TrimRight(lines, "\n")
			i := bytes.LastIndexByte(lines, '\n') + 1
			var e LogEntry
			if json.Unmarshal(lines[i:], &e) == nil {
				if e.Time.Before(stop) {
					return logged, nil
				}
				if !e.Time.Before(since) {
					logged[e.URL] = true
				}
			}
			lines = lines[:i]
		}
		rest = buf[:first]
	}
	return logged, nil
}

// crawlLogMaxTail is how far back from its end TailCrawlLog reads a crawl log at most.
const crawlLogMaxTail = 4 << 20

// TailCrawlLog returns the last k whole lines of the crawl log at path that
// are JSON objects, oldest first, reading at most 4 MiB back from its end.
// A missing file has no lines.
func TailCrawlLog(path string, k int) ([]json.RawMessage, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return []json.RawMessage{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("crawl log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("crawl log: %w", err)
	}
	const chunk = 64 << 10
	end := fi.Size()
	pos := end
	var data []byte
	for pos > 0 && end-pos < crawlLogMaxTail && bytes.Count(data, []byte{'\n'}) <= k {
		size := min(int64(chunk), pos)
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, pos-size); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("crawl log %s: %w", path, err)
		}
		pos -= size
		data = append(buf, data...)
	}
	// Whole lines only: drop a torn last line, and the first when the read
	// began inside it.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	} else {
		data = nil
	}
	if pos > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	out := []json.RawMessage{}
	for len(data) > 0 && len(out) < k {
		line := data
		i := bytes.LastIndexByte(data, '\n')
		if i >= 0 {
			line, data = data[i+1:], data[:i]
		} else {
			data = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] == '{' && json.Valid(line) {
			out = append(out, json.RawMessage(bytes.Clone(line)))
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
