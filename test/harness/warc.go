package harness

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// WARCResponses counts the response records with HTTP status 200 of the
// WARC files (*.warc.gz) in dir by target URI, robots.txt excluded, and
// the revisit records of an HTTP 200 (a page whose payload was archived
// before under another URL, warc.dedup: archived, its payload in the
// record it refers to).
func WARCResponses(dir string) (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, f := range files {
		r, err := gowarc.NewWarcFileReader(f, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for rec, err := range r.Records() {
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("%s: record at %d: %w", f, rec.Offset, err)
			}
			w := rec.WarcRecord
			target := w.WarcHeader().Get(gowarc.WarcTargetURI)
			switch {
			case strings.HasSuffix(target, "/robots.txt"):
			case w.Type() == gowarc.Response:
				if b, ok := w.Block().(gowarc.HttpResponseBlock); ok && b.HttpStatusCode() == 200 {
					out[target]++
				}
			case w.Type() == gowarc.Revisit:
				if b, ok := w.Block().(gowarc.ProtocolHeaderBlock); ok && bytes.HasPrefix(b.ProtocolHeaderBytes(), []byte("HTTP/1.1 200 ")) {
					out[target]++
				}
			}
			rec.Close()
		}
		r.Close()
	}
	return out, nil
}
