package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// CDXJSuffix is appended to a WARC file's name for its index.
const CDXJSuffix = ".cdxj"

// cdxEntry is one line of a CDXJ index: a response record.
type cdxEntry struct {
	url    string
	date   time.Time
	mime   string
	status int
	digest string // payload digest, base32 without "sha1:"
	offset int64  // of the record's gzip member in the file
	length int64  // of the member
}

// cdxJSON is the JSON part of a CDXJ line, as pywb's indexer writes it (numbers as strings).
type cdxJSON struct {
	URL      string `json:"url"`
	MIME     string `json:"mime"`
	Status   string `json:"status,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Length   string `json:"length"`
	Offset   string `json:"offset"`
	Filename string `json:"filename"`
}

func (e cdxEntry) line(filename string) []byte {
	j := cdxJSON{URL: e.url, MIME: e.mime, Digest: e.digest, Length: strconv.FormatInt(e.length, 10),
		Offset: strconv.FormatInt(e.offset, 10), Filename: filename}
	if e.status > 0 {
		j.Status = strconv.Itoa(e.status)
	}
	b, _ := json.Marshal(j) // strings only: cannot fail
	var out []byte
	out = append(out, SURT(e.url)...)
	out = append(out, ' ')
	out = e.date.UTC().AppendFormat(out, "20060102150405")
	out = append(out, ' ')
	out = append(out, b...)
	return append(out, '\n')
}

// headInfo reads the status code and media type of an HTTP response head
// (or whole block); 0 and "unk" when it is not one.
func headInfo(block []byte) (status int, mt string) {
	mt = "unk"
	if !bytes.HasPrefix(block, []byte("HTTP/")) {
		return 0, mt
	}
	if i := bytes.Index(block, []byte("\r\n\r\n")); i >= 0 {
		block = block[:i+2]
	}
	line, rest, _ := bytes.Cut(block, []byte("\r\n"))
	if f := bytes.Fields(line); len(f) >= 2 {
		status, _ = strconv.Atoi(string(f[1]))
	}
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, ok := bytes.Cut(l, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("Content-Type")) {
			mt = mediaTypeBytes(v)
			break
		}
	}
	return status, mt
}

// commonTypes are media types written as they are (lower case, no
// parameters): mediaTypeBytes returns them without allocating.
var commonTypes = map[string]string{}

func init() {
	for _, t := range []string{"text/html", "text/css", "text/plain", "text/javascript", "application/javascript",
		"application/json", "application/xml", "text/xml", "application/xhtml+xml", "application/pdf",
		"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "image/x-icon", "font/woff2"} {
		commonTypes[t] = t
	}
}

// mediaTypeBytes is mediaTypeOf of a Content-Type value.
func mediaTypeBytes(v []byte) string {
	mt := v
	if i := bytes.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	if s, ok := commonTypes[string(bytes.TrimSpace(mt))]; ok {
		return s
	}
	return mediaTypeOf(string(v))
}

func mediaTypeOf(ct string) string {
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt != "" {
		return mt
	}
	if mt := strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0])); mt != "" && !strings.ContainsAny(mt, " \t\"") {
		return mt
	}
	return "unk"
}

// writeCDXJ writes the index of the WARC file warcPath (its final name)
// from entries: lines sorted (byte order, as `LC_ALL=C sort` and pywb
// expect), to a temporary file synced and renamed to warcPath+".cdxj".
func writeCDXJ(warcPath string, entries []cdxEntry) error {
	name := filepath.Base(warcPath)
	lines := make([][]byte, len(entries))
	for i, e := range entries {
		lines[i] = e.line(name)
	}
	slices.SortFunc(lines, bytes.Compare)
	final := warcPath + CDXJSuffix
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("archive: create index %s: %w", tmp, err)
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	for _, l := range lines {
		bw.Write(l) // the error comes back from Flush
	}
	err = bw.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archive: write index %s: %w", final, err)
	}
	return nil
}

// IndexWARC (re)writes the CDXJ index of a WARC file (path + ".cdxj") from
// the file itself, read with gowarc: one line per response or revisit record.
// Recover calls it for the files it repairs; `phasecrawl cdxj` for any.
func IndexWARC(path string) error {
	return indexWARC(path, path)
}

// indexWARC writes the index of the WARC file at path as the index of
// final (its name once renamed).
func indexWARC(path, final string) error {
	r, err := gowarc.NewWarcFileReader(path, 0)
	if err != nil {
		return fmt.Errorf("archive: index %s: %w", path, err)
	}
	defer r.Close()
	var entries []cdxEntry
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("archive: index %s: record after offset %d: %w", path, rec.Offset, err)
		}
		if e, ok := recordEntry(rec); ok {
			entries = append(entries, e)
		}
		rec.Close()
	}
	return writeCDXJ(final, entries)
}

// IndexMissing writes the index of every finished WARC file in dir that
// has none (files of a version without indexes, or whose index write
// failed), and removes index files left half-written. It returns the files indexed.
func IndexMissing(dir string) ([]string, error) {
	tmps, _ := filepath.Glob(filepath.Join(dir, "*"+CDXJSuffix+".tmp"))
	for _, t := range tmps {
		os.Remove(t)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		return nil, fmt.Errorf("archive: index %s: %w", dir, err)
	}
	var done []string
	for _, p := range paths {
		if _, err := os.Stat(p + CDXJSuffix); err == nil {
			continue
		}
		if err := IndexWARC(p); err != nil {
			return done, err
		}
		done = append(done, p)
	}
	return done, nil
}

// CheckCDXJ checks the index of a WARC file against the file: its lines
// are sorted, and each line's offset and length frame one gzip member
// holding a response (or revisit) record that gives exactly the line
// (target URI, date, status, media type, payload digest). It returns the number of lines.
func CheckCDXJ(warcPath string) (int, error) {
	idx, err := os.ReadFile(warcPath + CDXJSuffix)
	if err != nil {
		return 0, fmt.Errorf("archive: check index: %w", err)
	}
	f, err := os.Open(warcPath)
	if err != nil {
		return 0, fmt.Errorf("archive: check index: %w", err)
	}
	defer f.Close()
	lines := bytes.Split(bytes.TrimSuffix(idx, []byte("\n")), []byte("\n"))
	if len(idx) == 0 {
		lines = nil
	}
	for i, l := range lines {
		bad := func(format string, a ...any) (int, error) {
			return i, fmt.Errorf("archive: %s line %d: %s", warcPath+CDXJSuffix, i+1, fmt.Sprintf(format, a...))
		}
		if i > 0 && bytes.Compare(lines[i-1], l) > 0 {
			return bad("not sorted")
		}
		parts := bytes.SplitN(l, []byte(" "), 3)
		if len(parts) != 3 {
			return bad("not SURT timestamp JSON")
		}
		var j cdxJSON
		if err := json.Unmarshal(parts[2], &j); err != nil {
			return bad("JSON: %v", err)
		}
		if string(parts[0]) != SURT(j.URL) || j.Filename != filepath.Base(warcPath) {
			return bad("key %s or filename %s does not match %s", parts[0], j.Filename, j.URL)
		}
		off, err1 := strconv.ParseInt(j.Offset, 10, 64)
		n, err2 := strconv.ParseInt(j.Length, 10, 64)
		if err1 != nil || err2 != nil || off < 0 || n <= 0 {
			return bad("offset %q length %q", j.Offset, j.Length)
		}
		member := make([]byte, n)
		if _, err := f.ReadAt(member, off); err != nil {
			return bad("read %d bytes at %d: %v", n, off, err)
		}
		r, err := gowarc.NewWarcFileReaderFromStream(bytes.NewReader(member), 0, gowarc.WithStrictValidation())
		if err != nil {
			return bad("reader: %v", err)
		}
		rec, err := r.Next()
		if err != nil {
			return bad("no record at %d: %v", off, err)
		}
		e, ok := recordEntry(rec)
		rec.Close()
		if !ok {
			return bad("the record at %d is not a response", off)
		}
		if rec.Size != n {
			return bad("the record at %d is %d bytes, the line says %d", off, rec.Size, n)
		}
		e.offset = off
		want := e.line(j.Filename)
		if !bytes.Equal(bytes.TrimSuffix(want, []byte("\n")), l) {
			return bad("the record at %d is %s", off, want)
		}
		if _, err := r.Next(); err != io.EOF {
			return bad("more than one record at %d (%v)", off, err)
		}
		r.Close()
	}
	return len(lines), nil
}

// SURT is the Sort-friendly URI Reordering Transform of an absolute URL,
// the key of CDX indexes: scheme and a leading "www." dropped, host labels
// reversed and comma-separated, a port other than the scheme's default
// kept, then ")" and the path and query (query parameters sorted),
// lower-cased; the fragment is dropped. "https://www.Example.org:8080/A?b=1&a=2"
// gives "org,example:8080)/a?a=2&b=1".
func SURT(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return strings.ToLower(raw)
	}
	host := strings.ToLower(u.Hostname())
	host = strings.TrimSuffix(host, ".")
	if strings.HasPrefix(host, "www.") && strings.Count(host, ".") > 1 {
		host = host[4:]
	}
	var b strings.Builder
	if strings.Contains(host, ":") { // IPv6
		b.WriteString(host)
	} else {
		labels := strings.Split(host, ".")
		for i := len(labels) - 1; i >= 0; i-- {
			b.WriteString(labels[i])
			if i > 0 {
				b.WriteByte(',')
			}
		}
	}
	if p := u.Port(); p != "" && !(p == "80" && u.Scheme == "http") && !(p == "443" && u.Scheme == "https") {
		b.WriteByte(':')
		b.WriteString(p)
	}
	b.WriteByte(')')
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(strings.ToLower(path))
	if u.RawQuery != "" {
		q := strings.Split(u.RawQuery, "&")
		slices.Sort(q)
		b.WriteByte('?')
		b.WriteString(strings.ToLower(strings.Join(q, "&")))
	}
	return b.String()
}

// recordEntry is the index entry of a response or revisit record (a
// revisit's media type is "warc/revisit", as pywb indexes it).
func recordEntry(rec gowarc.Record) (cdxEntry, bool) {
	wr := rec.WarcRecord
	typ := wr.Type()
	if typ != gowarc.Response && typ != gowarc.Revisit {
		return cdxEntry{}, false
	}
	h := wr.WarcHeader()
	e := cdxEntry{url: h.Get(gowarc.WarcTargetURI), mime: "unk", offset: rec.Offset, length: rec.Size,
		digest: strings.TrimPrefix(h.Get(gowarc.WarcPayloadDigest), "sha1:")}
	if d, err := wr.Date(); err == nil {
		e.date = d
	}
	if e.digest == "" && typ == gowarc.Response {
		e.digest = strings.TrimPrefix(h.Get(gowarc.WarcBlockDigest), "sha1:")
	}
	if hb, ok := wr.Block().(gowarc.HttpResponseBlock); ok {
		e.status = hb.HttpStatusCode()
		if hh := hb.HttpHeader(); hh != nil {
			e.mime = mediaTypeOf(hh.Get("Content-Type"))
		}
	} else if typ == gowarc.Revisit {
		if st, _ := headInfo(revisitHead(wr)); st > 0 {
			e.status = st
		}
	}
	if typ == gowarc.Revisit {
		e.mime = "warc/revisit"
	}
	return e, true
}

// revisitHead is the HTTP head a revisit record's block holds, if any.
func revisitHead(wr gowarc.WarcRecord) []byte {
	if pb, ok := wr.Block().(gowarc.ProtocolHeaderBlock); ok {
		return pb.ProtocolHeaderBytes()
	}
	return nil
}
