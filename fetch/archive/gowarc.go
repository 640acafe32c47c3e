package archive

import (
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"strings"
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

// RecordHeader is what EachResponse and EachCapture tell of a response or
// revisit record.
type RecordHeader struct {
	TargetURI string
	Date      time.Time // zero if unreadable
	Truncated bool      // WARC-Truncated is set
	// Revisit describes a revisit record (nil: a response record); its
	// block is the HTTP head alone.
	Revisit *Revisit
}

// EachResponse reads the response records of a WARC file with gowarc and passes each one's header and block (a fresh slice
// fn may keep) to fn, in file order. An error from fn stops the scan and is
// returned as is.
func EachResponse(path string, fn func(h RecordHeader, block []byte) error) error {
	return eachCapture(path, false, fn)
}

// EachCapture is EachResponse that passes the revisit records too
// (RecordHeader.Revisit set).
func EachCapture(path string, fn func(h RecordHeader, block []byte) error) error {
	return eachCapture(path, true, fn)
}

func eachCapture(path string, revisits bool, fn func(h RecordHeader, block []byte) error) error {
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
		if wr.Type() != gowarc.Response && (!revisits || wr.Type() != gowarc.Revisit) {
			rec.Close()
			continue
		}
		h := wr.WarcHeader()
		rh := RecordHeader{TargetURI: h.Get(gowarc.WarcTargetURI), Truncated: h.Get(gowarc.WarcTruncated) != ""}
		rh.Date, _ = wr.Date()
		if wr.Type() == gowarc.Revisit {
			rv := &Revisit{Profile: h.Get(gowarc.WarcProfile), RefersToTargetURI: h.Get(gowarc.WarcRefersToTargetURI),
				PayloadDigest: h.Get(gowarc.WarcPayloadDigest)}
			rv.RefersToDate, _ = time.Parse(time.RFC3339Nano, h.Get(gowarc.WarcRefersToDate))
			rh.Revisit, rh.Truncated = rv, false
		}
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

// ParseDigest returns the SHA-1 of a WARC digest ("sha1:" and base32, as
// Digest writes it); ok is false for any other form.
func ParseDigest(d string) (sum [sha1.Size]byte, ok bool) {
	b32, found := strings.CutPrefix(d, "sha1:")
	if !found {
		return sum, false
	}
	b, err := base32.StdEncoding.DecodeString(b32)
	if err != nil || len(b) != sha1.Size {
		return sum, false
	}
	copy(sum[:], b)
	return sum, true
}
