package links

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/phasecrawl/phasecrawl/urlscope"
)

// Bounds of the sitemaps protocol (sitemaps.org): a sitemap file lists at
// most SitemapMaxURLs URLs and is at most SitemapMaxBytes uncompressed; the
// rest of a larger file is ignored.
const (
	SitemapMaxURLs  = 50000
	SitemapMaxBytes = 50 << 20
)

// SitemapEntry is a <url> of a sitemap or a <sitemap> of a sitemap index.
type SitemapEntry struct {
	Loc     string    // the <loc>, as written (trimmed)
	LastMod time.Time // <lastmod>; zero if absent or unreadable
}

// Sitemap is what ParseSitemap read from one file.
type Sitemap struct {
	Index   bool           // a sitemap index: Entries are sitemaps
	Entries []SitemapEntry // in file order
	// Truncated: the file had more than SitemapMaxURLs entries or more
	// than SitemapMaxBytes (uncompressed), or ended early (cut by
	// fetch.max_body_size); the entries before the cut are kept.
	Truncated bool
}

// ErrNotSitemap is returned by ParseSitemap for a body whose root element is
// neither <urlset> nor <sitemapindex>.
var ErrNotSitemap = errors.New("fetch: not a sitemap")

// ParseSitemap reads an XML sitemap or sitemap index (sitemaps.org 0.9),
// gzip-compressed or not (told by the gzip magic number, whatever the
// Content-Type says). Elements are matched by local name, so a sitemap
// without or with another namespace still reads. It never fails on a
// sitemap cut short: the entries read so far come back with Truncated.
func ParseSitemap(body []byte) (Sitemap, error) {
	var r io.Reader = bytes.NewReader(body)
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return Sitemap{}, fmt.Errorf("fetch: sitemap gzip header: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	lr := &io.LimitedReader{R: r, N: SitemapMaxBytes}
	br := bufio.NewReaderSize(lr, 4096)
	// The root element comes early: any other body (a gzip'd download, a
	// feed) is refused without being read through.
	head, _ := br.Peek(4096)
	if lower := bytes.ToLower(head); !bytes.Contains(lower, []byte("urlset")) && !bytes.Contains(lower, []byte("sitemapindex")) {
		return Sitemap{}, ErrNotSitemap
	}
	dec := xml.NewDecoder(br)
	dec.Strict = false
	dec.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	var sm Sitemap
	// find the root
root:
	for {
		tok, err := dec.Token()
		if err != nil {
			return Sitemap{}, ErrNotSitemap
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch strings.ToLower(se.Name.Local) {
			case "urlset":
			case "sitemapindex":
				sm.Index = true
			default:
				return Sitemap{}, ErrNotSitemap
			}
			break root
		}
	}
	entryName := "url"
	if sm.Index {
		entryName = "sitemap"
	}
	var cur *SitemapEntry
	var field string // "loc" or "lastmod" while inside one
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			if err != io.EOF || lr.N == 0 {
				sm.Truncated = true
			}
			return sm, nil
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			switch {
			case name == entryName && cur == nil:
				cur = &SitemapEntry{}
			case cur != nil && (name == "loc" || name == "lastmod"):
				field = name
				text.Reset()
			}
		case xml.CharData:
			if field != "" && text.Len() < urlscope.MaxURLLength+1 {
				text.Write(t)
			}
		case xml.EndElement:
			name := strings.ToLower(t.Name.Local)
			switch {
			case field != "" && name == field && cur != nil:
				v := strings.TrimSpace(text.String())
				if field == "loc" {
					cur.Loc = v
				} else {
					cur.LastMod = parseW3CDate(v)
				}
				field = ""
			case cur != nil && name == entryName:
				if cur.Loc != "" {
					if len(sm.Entries) == SitemapMaxURLs {
						sm.Truncated = true
						return sm, nil
					}
					sm.Entries = append(sm.Entries, *cur)
				}
				cur, field = nil, "" // an unclosed <loc> ends with its entry
			}
		}
	}
}

// parseW3CDate reads a sitemap <lastmod> (W3C Datetime: a date, or a date
// and time with a zone); zero if it is none of those.
func parseW3CDate(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// RobotsSitemaps returns the URLs of a robots.txt's Sitemap: lines (any
// case, anywhere in the file, at most 1,000), as written.
func RobotsSitemaps(body []byte) []string {
	var out []string
	for len(body) > 0 && len(out) < 1000 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = bytes.TrimSpace(line)
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || !strings.EqualFold(string(bytes.TrimSpace(k)), "sitemap") {
			continue
		}
		if v = bytes.TrimSpace(v); len(v) > 0 {
			out = append(out, string(v))
		}
	}
	return out
}

// MayBeSitemap reports whether a fetched body is worth ParseSitemap: an
// XML Content-Type or a gzip body (a .xml.gz sitemap is served as
// application/gzip, application/x-gzip or application/octet-stream).
func MayBeSitemap(contentType string, body []byte) bool {
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		return true
	}
	ct := strings.ToLower(contentType)
	return strings.Contains(ct, "xml")
}
