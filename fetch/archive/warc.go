// Package archive writes what the node fetched: WARC 1.1 files (one gzip member per record,
// rotated by size) with a CDXJ index beside each, and a JSON-lines crawl log. It reads WARC
// files back with gowarc (ValidateWARC, EachResponse, IndexWARC) and repairs files left open
// by a crash (Recover).
package archive

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
)

// WARCConfig configures a WARCWriter. Start from DefaultWARCConfig.
type WARCConfig struct {
	Dir      string // directory of the WARC files (created if missing); required
	Prefix   string // file name prefix; default "phasecrawl", [A-Za-z0-9._-], 1..64 chars
	MaxSize  int64  // a file is closed and a new one started once it reaches this size (it may exceed it by one exchange); default 1 GiB, valid 1 KiB..64 GiB
	Software string // "software" field of the warcinfo record; default "phasecrawl"
	// CompressionLevel is the deflate level of the deflated record members:
	// gzip.HuffmanOnly (-2, the default: entropy coding without match
	// search, with a static table tuned for HTML where it fits the record
	// (huffstatic.go), else with the record's own tables), or 1
	// (gzip.BestSpeed) to 9. On 2,000 synthetic-web exchanges
	// (BenchmarkWARCWrite) -2 costs ~18 µs and 3,466 file bytes per
	// exchange, 1 ~33 µs and 2,478 bytes: a page's deflate is the match
	// search and building its block's Huffman tables, two costs of about
	// the same size, and -2 skips both.
	CompressionLevel int
	// StoreRequests writes request records as stored gzip members (deflate
	// "stored" blocks, still standard gzip) instead of deflating them. A
	// request record is a few hundred bytes, for which building deflate's
	// Huffman tables costs about as much CPU as compressing a whole page;
	// storing it costs about 250 bytes more per exchange. Default false.
	StoreRequests bool
	// FlushDelay is the longest a record stays buffered when nobody calls Flush (see
	// WARCWriter): the most recent archived work a kill -9 can take. Default 2ms, valid
	// 0..1m; 0 writes every exchange to the file at once (one write(2) each).
	FlushDelay time.Duration
}

// DefaultWARCConfig returns the defaults with Dir set to dir.
func DefaultWARCConfig(dir string) WARCConfig {
	return WARCConfig{Dir: dir, Prefix: "phasecrawl", MaxSize: 1 << 30, Software: "phasecrawl", CompressionLevel: gzip.HuffmanOnly, FlushDelay: 2 * time.Millisecond}
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Validate checks every field and names the offending key and its allowed range.
func (c WARCConfig) Validate() error {
	if c.Dir == "" {
		return errors.New("archive: warc dir: must not be empty")
	}
	if !prefixRE.MatchString(c.Prefix) {
		return fmt.Errorf("archive: warc prefix=%q: must be 1..64 of [A-Za-z0-9._-]", c.Prefix)
	}
	if c.MaxSize < 1<<10 || c.MaxSize > 64<<30 {
		return fmt.Errorf("archive: warc max_size=%d: must be in %d..%d", c.MaxSize, int64(1<<10), int64(64<<30))
	}
	if strings.ContainsAny(c.Software, "\r\n") {
		return fmt.Errorf("archive: warc software=%q: must be one line", c.Software)
	}
	if c.CompressionLevel != gzip.HuffmanOnly && (c.CompressionLevel < gzip.BestSpeed || c.CompressionLevel > gzip.BestCompression) {
		return fmt.Errorf("archive: warc compression_level=%d: must be -2 (Huffman only) or 1..9", c.CompressionLevel)
	}
	if c.FlushDelay < 0 || c.FlushDelay > time.Minute {
		return fmt.Errorf("archive: warc flush_delay=%s: must be in 0..1m", c.FlushDelay)
	}
	return nil
}

// WARCBufferSize is how many buffered bytes make Write flush on its own.
const WARCBufferSize = 1 << 20

// OpenSuffix is appended to the name of the WARC file being written; Recover repairs such files.
const OpenSuffix = ".open"

// WARCWriter writes request/response record pairs into size-rotated WARC 1.1 files named
// <prefix>-<YYYYMMDDhhmmss>-<serial>-<random>.warc.gz (".open" appended while being written).
// Every record is its own gzip member; every file starts with a warcinfo record. Safe for
// concurrent use: records are built and compressed by the caller's goroutine, only the append
// to the file is serialized.
//
// Records are buffered (group write): Write appends them to a buffer that goes to the file
// with one write(2) when Flush is called, WARCConfig.FlushDelay after the oldest buffered
// record was written, when WARCBufferSize bytes are buffered, at rotation and at Close. A
// record is in the file (the OS's page cache: it survives kill -9) once it is written; the
// node flushes before each frontier commit, so a page recorded as fetched is in the WARC file
// too, and a kill loses at most FlushDelay of archived pages that the node could otherwise
// settle from the file on restart. Writing each ~4 KB exchange with its own write(2) cost
// ~19 µs of CPU per page on the benchmark machine; one write per few dozen pages costs a
// fraction of that.
type WARCWriter struct {
	cfg        WARCConfig
	pool       sync.Pool // *gzip.Writer at cfg.CompressionLevel
	storedPool sync.Pool // *gzip.Writer at gzip.NoCompression (Capture.Stored)

	mu        sync.Mutex
	closed    bool
	f         *os.File
	openPath  string     // path of f (with OpenSuffix)
	size      int64      // bytes in f, the buffered ones included
	written   int64      // bytes written to f (the file ends at a record boundary there)
	started   int64      // f's write-out was started up to here (writeBehind)
	dropped   int64      // f's cached pages were dropped up to here (writeBehind)
	pending   []byte     // records not written to f yet
	index     []cdxEntry // the response records of f, for its CDXJ index (writeCDXJ at finishLocked)
	timer     flushTimer // flushes FlushDelay after pending became non-empty
	flushErr  error      // error of a flush by the timer, returned by the next Flush
	ticket    *Ticket    // the ticket of pending (nil: nothing pending)
	fault     Fault      // SetFault
	unindexed []string   // finished files whose CDXJ index could not be written (reindexLocked)
	serial    int        // serial of the next/current file
	infoID    string     // WARC-Record-ID of the current (or next, not yet opened) file's warcinfo
	files     []string
}

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("archive: closed")

// NewWARCWriter validates c and creates c.Dir. The first file is opened by the first write.
func NewWARCWriter(c WARCConfig) (*WARCWriter, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("archive: create warc dir %s: %w", c.Dir, err)
	}
	id, err := newRecordID()
	if err != nil {
		return nil, err
	}
	return &WARCWriter{cfg: c, infoID: id}, nil
}

// Capture is one fetched URL to archive: its HTTP request and response,
// written as a WARC request record and a response (or revisit) record.
type Capture struct {
	Target   string    // WARC-Target-URI
	IP       string    // WARC-IP-Address ("" = omitted)
	Date     time.Time // WARC-Date (zero = now)
	Request  []byte    // raw HTTP request (fetch.Response.RequestDump)
	Response []byte    // raw HTTP response block (HTTPResponseBlock), or only its head (HTTPResponseHead) when Body is set
	// Body, when not nil, is the response body as transferred: the response
	// block is Response (the head) followed by Body, written without
	// copying them into one slice first.
	Body      []byte
	Truncated bool // the body was cut at the size limit: the response gets "WARC-Truncated: length"
	// Stored writes the response record's gzip member without compression
	// (deflate "stored" blocks: still a standard gzip member any reader
	// takes). For payloads that are already compressed (a gzip
	// Content-Encoding, JPEG, ZIP, ...), where deflating again costs CPU and
	// saves nothing.
	Stored bool
	// Revisit, when not nil, makes the response record a revisit record
	// (WARC 1.1 §6.7): the page did not change since the capture it refers
	// to, and the record's block is Response alone (the HTTP head; Body is
	// ignored).
	Revisit *Revisit
}

// The revisit profiles of WARC 1.1 §6.7.
const (
	// ProfileIdenticalPayload: the payload has the digest of an earlier capture (§6.7.2).
	ProfileIdenticalPayload = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
	// ProfileNotModified: the server answered a conditional request 304 Not Modified (§6.7.3).
	ProfileNotModified = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
)

// Revisit describes a revisit record: its profile and the capture it
// refers to.
type Revisit struct {
	Profile string // ProfileIdenticalPayload or ProfileNotModified
	// RefersToTargetURI and RefersToDate name the earlier capture
	// (WARC-Refers-To-Target-URI, WARC-Refers-To-Date; zero: omitted).
	RefersToTargetURI string
	RefersToDate      time.Time
	// PayloadDigest is the earlier capture's WARC-Payload-Digest ("":
	// omitted; required by the identical-payload-digest profile).
	PayloadDigest string
}

// WriteCapture writes a request record and a response record (the request's
// WARC-Concurrent-To names the response), each its own gzip member, with block digests and the
// response's payload digest.
func (w *WARCWriter) WriteCapture(target string, ip string, date time.Time, request []byte, response []byte) error {
	return w.Write(Capture{Target: target, IP: ip, Date: date, Request: request, Response: response})
}

// Write is WriteCapture with all options.
func (w *WARCWriter) Write(x Capture) error {
	_, err := w.WriteTicket(x)
	return err
}

// WriteTicket is Write that also returns the ticket of the buffered records
// (Ticket): it tells, once the buffer has been written, whether they reached
// the file. On an error the ticket is nil and nothing was buffered, or the
// ticket is lost.
func (w *WARCWriter) WriteTicket(x Capture) (*Ticket, error) {
	if x.Date.IsZero() {
		x.Date = time.Now()
	}
	reqID, err := newRecordID()
	if err != nil {
		return nil, err
	}
	respID, err := newRecordID()
	if err != nil {
		return nil, err
	}
	date := warcDate(x.Date)
	target := oneLine(x.Target)
	ip := oneLine(x.IP)
	resp := [2][]byte{x.Response, x.Body} // the response block, in two parts
	var payloadDigest string
	if x.Revisit != nil {
		resp = [2][]byte{x.Response, nil}
		payloadDigest = x.Revisit.PayloadDigest
	} else if bytes.HasPrefix(x.Response, []byte("HTTP/")) {
		if x.Body != nil {
			payloadDigest = Digest(x.Body)
		} else if i := bytes.Index(x.Response, []byte("\r\n\r\n")); i >= 0 {
			payloadDigest = Digest(x.Response[i+4:])
		}
	}
	reqDigest, respDigest := Digest(x.Request), digestParts(resp)
	entry := cdxEntry{url: target, date: x.Date, digest: strings.TrimPrefix(payloadDigest, "sha1:")}
	if entry.digest == "" {
		entry.digest = strings.TrimPrefix(respDigest, "sha1:")
	}
	entry.status, entry.mime = headInfo(x.Response)
	for {
		w.mu.Lock()
		closed, infoID := w.closed, w.infoID
		w.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		buf := recordBufs.Get().(*bytes.Buffer)
		buf.Reset()
		buf.Grow((len(x.Request)+len(x.Response)+len(x.Body))/2 + 1024)
		fields := make([]field, 0, 12)
		fields = append(fields,
			field{"WARC-Type", "request"},
			field{"WARC-Record-ID", reqID},
			field{"WARC-Date", date},
			field{"WARC-Target-URI", target},
		)
		if ip != "" {
			fields = append(fields, field{"WARC-IP-Address", ip})
		}
		fields = append(fields,
			field{"WARC-Concurrent-To", respID},
			field{"WARC-Warcinfo-ID", infoID},
			field{"Content-Type", "application/http;msgtype=request"},
		)
		if err := w.appendRecord(buf, fields, reqDigest, [2][]byte{x.Request}, w.cfg.StoreRequests); err != nil {
			putRecordBuf(buf)
			return nil, err
		}
		respType := "response"
		if x.Revisit != nil {
			respType = "revisit"
			entry.mime = "warc/revisit"
		}
		reqLen := buf.Len()
		fields = append(fields[:0],
			field{"WARC-Type", respType},
			field{"WARC-Record-ID", respID},
			field{"WARC-Date", date},
			field{"WARC-Target-URI", target},
		)
		if ip != "" {
			fields = append(fields, field{"WARC-IP-Address", ip})
		}
		fields = append(fields,
			field{"WARC-Warcinfo-ID", infoID},
			field{"Content-Type", "application/http;msgtype=response"},
		)
		if payloadDigest != "" {
			fields = append(fields, field{"WARC-Payload-Digest", payloadDigest})
		}
		if v := x.Revisit; v != nil {
			fields = append(fields, field{"WARC-Profile", v.Profile})
			if v.RefersToTargetURI != "" {
				fields = append(fields, field{"WARC-Refers-To-Target-URI", oneLine(v.RefersToTargetURI)})
			}
			if !v.RefersToDate.IsZero() {
				fields = append(fields, field{"WARC-Refers-To-Date", warcDate(v.RefersToDate)})
			}
		} else if x.Truncated {
			fields = append(fields, field{"WARC-Truncated", "length"})
		}
		if err := w.appendRecord(buf, fields, respDigest, resp, x.Stored); err != nil {
			putRecordBuf(buf)
			return nil, err
		}

		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			putRecordBuf(buf)
			return nil, ErrClosed
		}
		if w.infoID != infoID { // rotated meanwhile: rebuild for the new file
			w.mu.Unlock()
			putRecordBuf(buf)
			continue
		}
		if w.f == nil {
			if err := w.openLocked(); err != nil {
				w.mu.Unlock()
				putRecordBuf(buf)
				return nil, err
			}
		}
		entry.offset, entry.length = w.size+int64(reqLen), int64(buf.Len()-reqLen)
		w.index = append(w.index, entry)
		if w.ticket == nil {
			w.ticket = new(Ticket)
		}
		tk := w.ticket
		err := w.writeLocked(buf.Bytes())
		w.mu.Unlock()
		putRecordBuf(buf)
		return tk, err
	}
}

// recordBufs holds the buffers Write compresses a pair of records into.
var recordBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putRecordBuf returns buf to recordBufs unless it grew past 4 MiB (a rare
// huge page should not pin its memory).
func putRecordBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 4<<20 {
		recordBufs.Put(buf)
	}
}

// writeLocked appends b to the current file's buffer (opening a file if needed), flushes a
// full buffer and rotates a full file.
func (w *WARCWriter) writeLocked(b []byte) error {
	if w.f == nil {
		if err := w.openLocked(); err != nil {
			return err
		}
	}
	w.pending = append(w.pending, b...)
	w.size += int64(len(b))
	if w.size >= w.cfg.MaxSize {
		return w.finishLocked()
	}
	if len(w.pending) >= WARCBufferSize || w.cfg.FlushDelay == 0 {
		return w.flushLocked()
	}
	w.timer.arm(w.cfg.FlushDelay, w.timedFlush)
	return nil
}

// timedFlush is the timer's flush; its error waits for the next Flush.
func (w *WARCWriter) timedFlush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.fired()
	if err := w.flushLocked(); err != nil && w.flushErr == nil {
		w.flushErr = err
	}
}

// Flush writes the buffered records to the file (one write(2)). On a write error the
// buffered records are lost (their Ticket says so), the file is cut back to its last whole
// record, and the error names the file; an error of a flush made by the timer since the last Flush is returned
// here. Flush after Close returns nil.
func (w *WARCWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.flushLocked()
	if w.flushErr != nil {
		err, w.flushErr = errors.Join(w.flushErr, err), nil
	}
	return err
}

func (w *WARCWriter) flushLocked() error {
	if w.f == nil || len(w.pending) == 0 {
		return nil
	}
	n, err := faultWrite(w.fault, w.f, w.pending)
	if w.ticket != nil {
		w.ticket.settle(err)
		w.ticket = nil
	}
	if err != nil {
		werr := fmt.Errorf("archive: write %s: %w (%d buffered bytes lost)", w.openPath, err, len(w.pending))
		w.pending, w.size = w.pending[:0], w.written
		for len(w.index) > 0 && w.index[len(w.index)-1].offset >= w.written {
			w.index = w.index[:len(w.index)-1] // lost with the buffer
		}
		// Cut the partial member so the file stays readable; give up on the file otherwise.
		if n > 0 {
			if terr := w.f.Truncate(w.written); terr != nil {
				w.abandonLocked()
			} else if _, serr := w.f.Seek(w.written, 0); serr != nil {
				w.abandonLocked()
			}
		}
		return werr
	}
	w.written += int64(n)
	w.writeBehind()
	w.pending = w.pending[:0]
	if cap(w.pending) > 4*WARCBufferSize { // a huge record should not pin its memory
		w.pending = nil
	}
	return nil
}

// WriteBehindChunk is how many written bytes of a WARC file have their
// write-out started together (writeBehind).
const WriteBehindChunk = 8 << 20

// writeBehind keeps a WARC file's written records out of the page cache:
// each WriteBehindChunk of them has its write-out started at once, and the
// chunk before it, whose write-out has had a chunk's time to end, is dropped
// from the cache. WARC files are written once and read by other tools
// later: cached, they only push the frontier's pages out and make the
// node's memory grow with the crawl (~4 GB of cache per million pages).
// Writing them out as they come also spreads the disk writes over the
// crawl instead of bursts 30 s later (the kernel's dirty expiry), and lets
// the kernel reuse the same few pages for the file instead of fresh ones
// (on a VM that gives free memory back to its host, touching fresh memory
// costs ~1.8 s of CPU per GB: measured on this project's CI machines).
func (w *WARCWriter) writeBehind() {
	if w.written-w.started < WriteBehindChunk {
		return
	}
	startWriteback(w.f, w.started, w.written-w.started)
	if w.started > w.dropped {
		dropCached(w.f, w.dropped, w.started-w.dropped)
		w.dropped = w.started
	}
	w.started = w.written
}

func (w *WARCWriter) openLocked() error {
	var rnd [3]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("archive: random file suffix: %w", err)
	}
	name := fmt.Sprintf("%s-%s-%05d-%s.warc.gz", w.cfg.Prefix, time.Now().UTC().Format("20060102150405"), w.serial, hex.EncodeToString(rnd[:]))
	path := filepath.Join(w.cfg.Dir, name+OpenSuffix)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("archive: create %s: %w", path, err)
	}
	host, _ := os.Hostname()
	info := "software: " + oneLine(w.cfg.Software) + "\r\n" +
		"format: WARC File Format 1.1\r\n" +
		"conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n"
	if host != "" {
		info += "hostname: " + oneLine(host) + "\r\n"
	}
	var buf bytes.Buffer
	err = w.appendRecord(&buf, []field{
		{"WARC-Type", "warcinfo"},
		{"WARC-Record-ID", w.infoID},
		{"WARC-Date", warcDate(time.Now())},
		{"WARC-Filename", name},
		{"Content-Type", "application/warc-fields"},
	}, Digest([]byte(info)), [2][]byte{[]byte(info)}, false)
	if err == nil {
		_, err = f.Write(buf.Bytes())
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("archive: write warcinfo to %s: %w", path, err)
	}
	w.f, w.openPath, w.size, w.written = f, path, int64(buf.Len()), int64(buf.Len())
	w.started, w.dropped = 0, 0
	w.serial++
	return nil
}

// finishLocked flushes, syncs, closes and renames the current file; the next write opens a
// new one.
func (w *WARCWriter) finishLocked() error {
	ferr := w.flushLocked()
	if w.f == nil { // abandoned by the failed flush
		return ferr
	}
	f, path := w.f, w.openPath
	w.f, w.openPath, w.size, w.written = nil, "", 0, 0
	if id, err := newRecordID(); err == nil {
		w.infoID = id
	}
	err := f.Sync()
	if err == nil {
		dropCached(f, 0, 0) // all of it is on disk now
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("archive: close %s: %w", path, err)
	}
	final := strings.TrimSuffix(path, OpenSuffix)
	// The index first: a finished file always has one (a kill before the
	// rename leaves an open file, which Recover repairs and indexes again).
	ierr := writeCDXJ(final, w.index)
	w.index = w.index[:0]
	if err := os.Rename(path, final); err != nil {
		return fmt.Errorf("archive: rename %s: %w", path, err)
	}
	syncDir(w.cfg.Dir)
	// The files whose index could not be written before (a full disk) are
	// indexed from their records now.
	ferr = errors.Join(ferr, w.reindexLocked())
	if ierr != nil {
		ferr = errors.Join(ferr, fmt.Errorf("%w: %w", ErrIndex, ierr))
		w.unindexed = append(w.unindexed, final)
	}
	w.files = append(w.files, final)
	return ferr // the file was cut back to its last whole record: it is finished all the same
}

// ErrIndex is wrapped by the errors of a CDXJ index that could not be
// written when its WARC file was finished. The records are in the file;
// the writer indexes it again from them when it finishes its next file
// (and `phasecrawl cdxj` or Recover can at any time).
var ErrIndex = errors.New("archive: CDXJ index not written")

// reindexLocked writes the index of the files whose index could not be
// written when they were finished; those that fail again wait for the
// next try.
func (w *WARCWriter) reindexLocked() error {
	var errs []error
	left := w.unindexed[:0]
	for _, f := range w.unindexed {
		if err := IndexWARC(f); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrIndex, err))
			left = append(left, f)
		}
	}
	w.unindexed = left
	return errors.Join(errs...)
}

// abandonLocked closes the current file without renaming it (Recover repairs it later).
func (w *WARCWriter) abandonLocked() {
	w.f.Close()
	w.f, w.openPath, w.size, w.written, w.pending, w.index = nil, "", 0, 0, w.pending[:0], nil
	if id, err := newRecordID(); err == nil {
		w.infoID = id
	}
}

// SetFault makes fn fail the writes of buffered records it returns an
// error for (nil: none fails); for tests.
func (w *WARCWriter) SetFault(fn Fault) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fault = fn
}

// Rotate closes the current file (if any); the next write starts a new one.
func (w *WARCWriter) Rotate() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	return w.finishLocked()
}

// Files returns the paths of the finished files so far, oldest first.
func (w *WARCWriter) Files() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.files...)
}

// Close finishes the current file (sync, rename from .open). Later writes fail with ErrClosed.
// Close is idempotent.
func (w *WARCWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	w.timer.stop()
	if w.f == nil {
		return nil
	}
	return w.finishLocked()
}

type field struct{ name, value string }

// appendRecord appends one gzip member holding a complete WARC record to
// dst, deflated at the configured level, or in stored blocks when stored.
// The record's block is block[0] followed by block[1]; digest is its
// WARC-Block-Digest.
func (w *WARCWriter) appendRecord(dst *bytes.Buffer, fields []field, digest string, block [2][]byte, stored bool) error {
	hdr := hdrBufs.Get().(*bytes.Buffer)
	defer hdrBufs.Put(hdr)
	hdr.Reset()
	hdr.WriteString("WARC/1.1\r\n")
	for _, f := range fields {
		hdr.WriteString(f.name)
		hdr.WriteString(": ")
		hdr.WriteString(f.value)
		hdr.WriteString("\r\n")
	}
	hdr.WriteString("WARC-Block-Digest: ")
	hdr.WriteString(digest)
	hdr.WriteString("\r\nContent-Length: ")
	hdr.WriteString(strconv.Itoa(len(block[0]) + len(block[1])))
	hdr.WriteString("\r\n\r\n")

	if !stored && w.cfg.CompressionLevel == gzip.HuffmanOnly {
		// The static HTML table first (no table to build per record);
		// a record it suits badly gets tables of its own below.
		total := hdr.Len() + len(block[0]) + len(block[1]) + len(crlf2)
		dst.Grow(len(htmlHeader) + total*7/8 + 64)
		if out, ok := appendStaticMember(dst.AvailableBuffer(), hdr.Bytes(), block[0], block[1], crlf2); ok {
			dst.Write(out) // writes to a bytes.Buffer cannot fail
			return nil
		}
	}
	pool, level := &w.pool, w.cfg.CompressionLevel
	if stored {
		pool, level = &w.storedPool, gzip.NoCompression
	}
	zw, _ := pool.Get().(*gzip.Writer)
	if zw == nil {
		var err error
		if zw, err = gzip.NewWriterLevel(dst, level); err != nil {
			return fmt.Errorf("archive: gzip: %w", err)
		}
	} else {
		zw.Reset(dst)
	}
	defer pool.Put(zw)
	zw.Write(hdr.Bytes()) // writes to a bytes.Buffer cannot fail
	zw.Write(block[0])
	zw.Write(block[1])
	zw.Write(crlf2)
	return zw.Close()
}

var crlf2 = []byte("\r\n\r\n")

// hdrBufs holds the buffers appendRecord builds a record header in.
var hdrBufs = sync.Pool{New: func() any { b := new(bytes.Buffer); b.Grow(1024); return b }}

// digestParts is the Digest of parts[0] followed by parts[1].
func digestParts(parts [2][]byte) string {
	h := sha1.New()
	h.Write(parts[0])
	h.Write(parts[1])
	var sum [sha1.Size]byte
	return digestString(h.Sum(sum[:0]))
}

func digestString(sum []byte) string {
	var b [5 + 32]byte // "sha1:" + base32 of 20 bytes
	copy(b[:], "sha1:")
	base32.StdEncoding.Encode(b[5:], sum)
	return string(b[:])
}

// Digest returns the WARC digest of b: "sha1:" and the base32 of its SHA-1.
func Digest(b []byte) string {
	sum := sha1.Sum(b)
	return digestString(sum[:])
}

// FormatDigest returns the WARC digest of a SHA-1 sum (sha1.Sum's result).
func FormatDigest(sum [sha1.Size]byte) string { return digestString(sum[:]) }

func newRecordID() (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("archive: record id: %w", err)
	}
	return "<urn:uuid:" + u.String() + ">", nil
}

// warcDate formats t as a WARC 1.1 date (UTC, fractional seconds only when present).
func warcDate(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return s
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// HTTPResponseBlock builds the block of a WARC response record: status line, the headers as
// received (Content-Encoding kept, Transfer-Encoding removed, Content-Length set to the raw body
// length), a blank line and the body as transferred. proto "" means "HTTP/1.1".
func HTTPResponseBlock(proto string, status int, header http.Header, rawBody []byte) []byte {
	b := bytes.NewBuffer(make([]byte, 0, len(rawBody)+64+64*len(header)))
	writeHTTPResponseHead(b, proto, status, header, len(rawBody))
	b.Write(rawBody)
	return b.Bytes()
}

// HTTPResponseHead is HTTPResponseBlock without the body (up to and
// including the blank line after the headers) for a raw body of bodyLen
// bytes: pass it as Capture.Response and the body as Capture.Body to
// archive a response without copying its body.
func HTTPResponseHead(proto string, status int, header http.Header, bodyLen int) []byte {
	b := bytes.NewBuffer(make([]byte, 0, 64+64*len(header)))
	writeHTTPResponseHead(b, proto, status, header, bodyLen)
	return b.Bytes()
}

func writeHTTPResponseHead(b *bytes.Buffer, proto string, status int, header http.Header, bodyLen int) {
	if proto == "" {
		proto = "HTTP/1.1"
	}
	b.WriteString(oneLine(proto))
	b.WriteByte(' ')
	if status < 100 {
		fmt.Fprintf(b, "%03d", status)
	} else {
		b.WriteString(strconv.Itoa(status))
	}
	b.WriteByte(' ')
	b.WriteString(http.StatusText(status))
	b.WriteString("\r\n")
	// A shallow copy (the values are only read) without Transfer-Encoding,
	// with Content-Length set.
	h := make(http.Header, len(header)+1)
	for k, v := range header {
		if k != "Transfer-Encoding" {
			h[k] = v
		}
	}
	h["Content-Length"] = []string{strconv.Itoa(bodyLen)}
	h.Write(b) // sorted; newlines in values are replaced; cannot fail on a bytes.Buffer
	b.WriteString("\r\n")
}
