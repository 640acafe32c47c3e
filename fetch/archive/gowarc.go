package archive

import (
	"errors"
	"fmt"
	"io"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// Reading WARC files back is gowarc's job (github.com/nlnwa/gowarc/v3).
// This package's own reader (read.go) stays for Recover, which needs where
// the last whole gzip member of a torn file ends and whether the file ends
// torn (ErrTornRecord) or malformed, which gowarc does not tell apart.

// ValidateWARC reads every record of a WARC file with gowarc's strict
// validation (header fields, Content-Length, block and payload digests,
// WARC 1.1 syntax) and returns how many records it has.
func ValidateWARC(path string) (int, error) {
	r, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithStrictValidation())
	if err != nil {
		return 0, fmt.Errorf("archive: validate %s: %w", path, err)
	}
	defer r.Close()
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("archive: validate %s: record %d (offset %d): %w", path, n, rec.Offset, err)
		}
		if v := rec.Validation; len(v) > 0 {
			rec.Close()
			return n, fmt.Errorf("archive: validate %s: record %d: %w", path, n, errors.Join(v...))
		}
		if _, err := rec.WarcRecord.ValidateDigest(); err != nil {
			rec.Close()
			return n, fmt.Errorf("archive: validate %s: record %d (offset %d) digest: %w", path, n, rec.Offset, err)
		}
		rec.Close()
		n++
	}
}

// RecordHeader is what EachResponse tells of a response record.
type RecordHeader struct {
	TargetURI string
	Date      time.Time // zero if unreadable
	Truncated bool      // WARC-Truncated is set
}

// EachResponse reads the response records of a WARC file with gowarc and passes each one's header and block (a fresh slice
// fn may keep) to fn, in file order. An error from fn stops the scan and is
// returned as is.
func EachResponse(path string, fn func(h RecordHeader, block []byte) error) error {
	r, err := gowarc.NewWarcFileReader(path, 0)
	if err != nil {
		return fmt.Errorf("archive: read %s: %w", path, err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("archive: read %s: record at %d: %w", path, rec.Offset, err)
		}
		wr := rec.WarcRecord
		if wr.Type() != gowarc.Response {
			rec.Close()
			continue
		}
		h := wr.WarcHeader()
		rh := RecordHeader{TargetURI: h.Get(gowarc.WarcTargetURI), Truncated: h.Get(gowarc.WarcTruncated) != ""}
		rh.Date, _ = wr.Date()
		var block []byte
		raw, err := wr.Block().RawBytes()
		if err == nil {
			block, err = io.ReadAll(raw)
		}
		rec.Close()
		if err != nil {
			return fmt.Errorf("archive: read %s: block at %d: %w", path, rec.Offset, err)
		}
		if err := fn(rh, block); err != nil {
			return err
		}
	}
}
