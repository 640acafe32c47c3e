package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

// crawlLogName is the crawl log's file name in the data directory.
const crawlLogName = "crawl.log"

// output is what the node writes of its fetches: the WARC files (when
// warc.enabled) and the crawl log, in the order that recovery after a
// kill -9 relies on (docs/design/hardening.md, "Crash safety"):
//
//   - a page's crawl-log line never reaches its file before the page's
//     WARC records: writeWARC comes first, and every write of buffered
//     log lines (flush, the log's own flush delay, a full buffer, close)
//     writes the buffered WARC records first;
//   - flush writes both, and the frontier calls it before each commit
//     (frontier.SetBeforeCommit): a page recorded as fetched is in both
//     files, and a page whose records were lost in a buffer is not
//     recorded, so it is fetched again;
//   - close writes what is buffered, finishes the WARC file (indexed,
//     renamed from .open) and syncs the crawl log;
//   - a write error (a full disk) loses what was buffered: writeWARC and
//     writeLog return the archive.Ticket of each page's records and line,
//     and the page's frontier result asks them at commit, after flush
//     (frontier.Result.Durable): a page whose records or line were lost
//     goes back to the queue, untried, and is fetched again. Each error is
//     counted (phasecrawl_storage_errors_total) and has the disk guard
//     read the free space at once.
//
// The WARC files an earlier process left open are repaired when the output
// opens; crashed returns them, for recoverArchived.
type output struct {
	log     *slog.Logger
	warc    *archive.WARCWriter // nil: WARC output is off
	clog    *archive.CrawlLog
	logPath string
	crash   []string
	onLog   func(archive.LogEntry) // called with each line written (the node's reports)
	// failed is told of each write error, by what failed (storeWARC,
	// storeCrawlLog); set before the node runs.
	failed func(what string)
}

// fail reports a write error of what.
func (o *output) fail(what string, err error) {
	o.log.Error("write "+what, "error", err)
	if o.failed != nil {
		o.failed(what)
	}
}

// openOutput opens the outputs in cfg.Data: it repairs the WARC files a
// kill left open, starts the WARC writer (warc.enabled) and opens the crawl
// log for appending.
func openOutput(cfg config.Config, log *slog.Logger) (*output, error) {
	o := &output{log: log, logPath: filepath.Join(cfg.Data, crawlLogName)}
	if cfg.WARC.Enabled {
		dir := filepath.Join(cfg.Data, "warc")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("warc directory: %w", err)
		}
		if rep, err := archive.Recover(dir); err != nil {
			return nil, fmt.Errorf("recover WARC files: %w", err)
		} else if len(rep.Files) > 0 {
			log.Info("recovered WARC files left open by a crash", "files", len(rep.Files))
			for _, f := range rep.Files {
				if !f.Removed && f.Final != "" {
					o.crash = append(o.crash, f.Final)
				}
			}
		}
		wc := archive.DefaultWARCConfig(dir)
		wc.Prefix, wc.MaxSize, wc.Software = "phasecrawl-"+cfg.Name, cfg.WARC.MaxSize, "phasecrawl/0.1"
		wc.StoreRequests = cfg.WARC.Compression != config.WARCCompressAll
		wc.CompressionLevel = cfg.WARC.CompressionLevel
		var err error
		if o.warc, err = archive.NewWARCWriter(wc); err != nil {
			return nil, err
		}
	}
	var err error
	if o.clog, err = archive.OpenCrawlLog(o.logPath); err != nil {
		o.close()
		return nil, err
	}
	if o.warc != nil {
		// Each file has its own flush delay: the log's could fire between
		// a WARC flush and the next page's records.
		o.clog.SetBeforeFlush(o.flushWARC)
	}
	return o, nil
}

// archiving reports whether WARC output is on: without it the workers need
// not build the records.
func (o *output) archiving() bool { return o.warc != nil }

// warcFailed reports an error of the WARC writer: its records (warc), or
// only the index of a finished file (cdxj; the records are in the file).
func (o *output) warcFailed(err error) {
	if errors.Is(err, archive.ErrIndex) {
		o.fail(storeCDXJ, err)
		if !onlyIndex(err) {
			o.fail(storeWARC, err)
		}
		return
	}
	o.fail(storeWARC, err)
}

// onlyIndex reports whether every error joined in err is an index error.
func onlyIndex(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if e != nil && !onlyIndex(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, archive.ErrIndex)
}

// writeWARC archives one exchange (buffered; see flush) and returns the
// ticket of its records (nil when WARC output is off). A page's records
// are written before its crawl-log line.
func (o *output) writeWARC(x archive.Capture) *archive.Ticket {
	if o.warc == nil {
		return nil
	}
	tk, err := o.warc.WriteTicket(x)
	if err != nil {
		o.warcFailed(err)
		if tk == nil {
			tk = archive.LostTicket()
		}
	}
	return tk
}

// writeLog appends one crawl-log line (buffered; see flush) and returns
// its ticket.
func (o *output) writeLog(e archive.LogEntry) *archive.Ticket {
	tk, err := o.clog.WriteTicket(e)
	if err != nil {
		o.fail(storeCrawlLog, err)
		if tk == nil {
			tk = archive.LostTicket()
		}
	} else if o.onLog != nil {
		o.onLog(e)
	}
	return tk
}

// flush writes the buffered WARC records, then the buffered crawl-log
// lines, to their files, where a kill -9 cannot take them. The frontier
// calls it before each commit: every ticket given before is settled then.
func (o *output) flush() {
	o.flushWARC()
	if err := o.clog.Flush(); err != nil {
		o.fail(storeCrawlLog, err)
	}
}

// flushWARC writes the buffered WARC records (if WARC output is on).
func (o *output) flushWARC() {
	if o.warc != nil {
		if err := o.warc.Flush(); err != nil {
			o.warcFailed(err)
		}
	}
}

// written reports whether the records and lines of these tickets (nil
// ones ignored) were all written, flushing first when one is still
// buffered.
func (o *output) written(tickets []*archive.Ticket) bool {
	for _, t := range tickets {
		if t != nil && !t.Written() && !t.Lost() {
			o.flush()
			break
		}
	}
	d := durable(tickets)
	return d == nil || d()
}

// durable returns the frontier.Result.Durable of a page whose records and
// line have these tickets (nil ones ignored): whether all were written.
// Nil when there is none.
func durable(tickets []*archive.Ticket) func() bool {
	tickets = slices.DeleteFunc(tickets, func(t *archive.Ticket) bool { return t == nil })
	if len(tickets) == 0 {
		return nil
	}
	return func() bool {
		for _, t := range tickets {
			if !t.Written() {
				return false
			}
		}
		return true
	}
}

// both is the frontier.Result.Durable of a page whose records a and
// outbox write b (each nil when there is none) must both be durable.
func both(a, b func() bool) func() bool {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func() bool { return a() && b() }
}

// close flushes and closes the WARC writer, then the crawl log.
func (o *output) close() {
	if o.warc != nil {
		if err := o.warc.Close(); err != nil {
			o.log.Error("close WARC", "error", err)
		}
	}
	if o.clog != nil {
		if err := o.clog.Close(); err != nil {
			o.log.Error("close crawl log", "error", err)
		}
	}
}

// crashed returns the WARC files an earlier process left open, repaired.
func (o *output) crashed() []string { return o.crash }

// tail returns the last k lines of the crawl log written to its file.
func (o *output) tail(k int) ([]json.RawMessage, error) {
	return archive.TailCrawlLog(o.logPath, k)
}

// loggedSince returns the URLs of the crawl log's lines stamped from since
// on (archive.LoggedSince).
func (o *output) loggedSince(since time.Time, slack time.Duration) (map[string]bool, error) {
	return archive.LoggedSince(o.logPath, since, slack)
}
