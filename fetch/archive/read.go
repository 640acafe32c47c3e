package archive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrTornRecord is matched by ReadWARC's error when the file ends inside a record (a crash
// mid-write): the gzip member or the block is cut short.
var ErrTornRecord = errors.New("archive: torn WARC record")

// ErrMalformed is matched by ReadWARC's error for a record that is complete but invalid: bad
// version line or header, Content-Length not matching the block, bad gzip data or checksum,
// or a digest mismatch.
var ErrMalformed = errors.New("archive: malformed WARC record")

// maxHeaderBytes bounds a record's header section.
const maxHeaderBytes = 1 << 20

// ReadWARC streams the records of a .warc.gz file (one or more records per gzip member) to fn,
// with the WARC header fields by name as written (first occurrence of a repeated name) and the
// block. Content-Length, WARC-Block-Digest and (for HTTP responses) WARC-Payload-Digest are
// verified. The records of a gzip member are passed to fn only once the whole member has been
// read and its checksum verified. An error from fn stops the scan and is returned as is.
func ReadWARC(path string, fn func(h map[string]string, block []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("archive: open %s: %w", path, err)
	}
	defer f.Close()
	st, err := scanWARC(f, fn)
	if err != nil && !st.fromFn {
		return fmt.Errorf("archive: read %s: %w", path, err)
	}
	return err
}

type scanState struct {
	records  int    // complete records read
	end      int64  // offset after the last complete member
	safeEnd  int64  // offset after the last complete member that does not end with a request record
	safeRecs int    // records before safeEnd
	fromFn   bool   // the error came from fn
	lastType string // WARC-Type of the last complete record
}

type countingReader struct {
	r   io.Reader
	n   int64
	err error // first read error of the underlying reader (not io.EOF)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

type pendingRecord struct {
	h     map[string]string
	block []byte
}

// scanWARC reads members from r until EOF or the first bad member.
func scanWARC(r io.Reader, fn func(h map[string]string, block []byte) error) (scanState, error) {
	var st scanState
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 64<<10)
	pos := func() int64 { return cr.n - int64(br.Buffered()) }
	var zr *gzip.Reader
	var rb *bufio.Reader
	for member := 0; ; member++ {
		if _, err := br.Peek(1); err != nil {
			if err == io.EOF {
				return st, nil
			}
			return st, err
		}
		start := pos()
		bad := func(err error) (scanState, error) {
			if cr.err != nil { // the file itself failed to read
				return st, cr.err
			}
			kind := ErrMalformed
			if errors.Is(err, io.ErrUnexpectedEOF) {
				kind = ErrTornRecord
			}
			return st, fmt.Errorf("gzip member %d at offset %d (after %d complete records): %w: %v", member, start, st.records, kind, err)
		}
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(br)
		} else {
			err = zr.Reset(br)
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return bad(err)
		}
		zr.Multistream(false)
		if rb == nil {
			rb = bufio.NewReaderSize(zr, 64<<10)
		} else {
			rb.Reset(zr)
		}
		var pending []pendingRecord
		for {
			if _, err := rb.Peek(1); err == io.EOF {
				break // member complete, checksum verified by gzip
			} else if err != nil {
				return bad(err)
			}
			h, block, err := readRecord(rb)
			if err != nil {
				return bad(err)
			}
			if err := verifyRecord(h, block); err != nil {
				return bad(err)
			}
			pending = append(pending, pendingRecord{h, block})
		}
		if len(pending) == 0 {
			return bad(errors.New("empty gzip member"))
		}
		for _, p := range pending {
			if fn != nil {
				if err := fn(p.h, p.block); err != nil {
					st.fromFn = true
					return st, err
				}
			}
			st.records++
			st.lastType = p.h["WARC-Type"]
		}
		st.end = pos()
		if st.lastType != "request" {
			st.safeEnd, st.safeRecs = st.end, st.records
		}
	}
}

// readRecord parses one record; io.ErrUnexpectedEOF means the stream ended inside it.
func readRecord(rb *bufio.Reader) (map[string]string, []byte, error) {
	line, err := readLine(rb)
	if err != nil {
		return nil, nil, err
	}
	if line != "WARC/1.1" && line != "WARC/1.0" {
		return nil, nil, fmt.Errorf("version line %q", trunc(line))
	}
	h := make(map[string]string, 12)
	last := ""
	total := 0
	for {
		line, err := readLine(rb)
		if err != nil {
			return nil, nil, err
		}
		if line == "" {
			break
		}
		if total += len(line); total > maxHeaderBytes {
			return nil, nil, fmt.Errorf("header section over %d bytes", maxHeaderBytes)
		}
		if (line[0] == ' ' || line[0] == '\t') && last != "" {
			h[last] += " " + strings.TrimSpace(line)
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, nil, fmt.Errorf("header line %q", trunc(line))
		}
		if _, dup := h[name]; !dup {
			h[name] = strings.TrimSpace(value)
		}
		last = name
	}
	cl, ok := h["Content-Length"]
	if !ok {
		return nil, nil, errors.New("no Content-Length")
	}
	n, err := strconv.ParseInt(cl, 10, 64)
	if err != nil || n < 0 {
		return nil, nil, fmt.Errorf("Content-Length %q", cl)
	}
	var buf bytes.Buffer
	if n <= 16<<20 {
		buf.Grow(int(n))
	}
	got, err := buf.ReadFrom(io.LimitReader(rb, n))
	if err != nil {
		return nil, nil, err
	}
	if got < n {
		return nil, nil, fmt.Errorf("Content-Length %d but the member ends after %d bytes", n, got)
	}
	var tail [4]byte
	if _, err := io.ReadFull(rb, tail[:]); err != nil {
		if err == io.EOF {
			err = errors.New("missing record end (CRLF CRLF)")
		}
		return nil, nil, err
	}
	if string(tail[:]) != "\r\n\r\n" {
		return nil, nil, fmt.Errorf("block longer than Content-Length %d (record end %q)", n, tail[:])
	}
	return h, buf.Bytes(), nil
}

// readLine reads a CRLF (or LF) terminated line without its terminator.
func readLine(rb *bufio.Reader) (string, error) {
	line, err := rb.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return "", fmt.Errorf("header line over %d bytes", rb.Size())
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			return "", errors.New("record ends inside a header line")
		}
		if err == io.EOF {
			return "", errors.New("member ends inside the header section")
		}
		return "", err
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

func verifyRecord(h map[string]string, block []byte) error {
	if d := h["WARC-Block-Digest"]; strings.HasPrefix(d, "sha1:") && !strings.EqualFold(d, Digest(block)) {
		return fmt.Errorf("WARC-Block-Digest %s, block hashes to %s", d, Digest(block))
	}
	// A revisit record's payload digest is the earlier capture's: its block
	// holds no payload to check it against.
	if d := h["WARC-Payload-Digest"]; strings.HasPrefix(d, "sha1:") && h["WARC-Type"] != "revisit" &&
		strings.HasPrefix(h["Content-Type"], "application/http") && bytes.HasPrefix(block, []byte("HTTP/")) {
		if i := bytes.Index(block, []byte("\r\n\r\n")); i >= 0 && !strings.EqualFold(d, Digest(block[i+4:])) {
			return fmt.Errorf("WARC-Payload-Digest %s, payload hashes to %s", d, Digest(block[i+4:]))
		}
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
