package node

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// dupBody is the page served under /d1/, /d2/ and /e/: byte for byte the
// same, but its relative link resolves against each page's own URL, so
// /d2/next and /e/next are discovered only if the copies' links are
// extracted.
const dupBody = `<!DOCTYPE html><html><body><a href="next">next</a> <a href="/d2/">the copy</a></body></html>`

// dupSite serves / -> /d1/ -> (/d1/next, /d2/), /d2/ and /e/ the same
// body as /d1/, and counts the requests per path.
func dupSite(t *testing.T) (*httptest.Server, func(string) int) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<a href="/d1/">d1</a>`)
		case "/d1/", "/d2/", "/e/", "/f/":
			fmt.Fprint(w, dupBody)
		case "/d1/next", "/d2/next", "/e/next":
			fmt.Fprint(w, "next of "+r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func(p string) int {
		mu.Lock()
		defer mu.Unlock()
		return hits[p]
	}
}

// warcPage is a response or revisit record read back with gowarc.
type warcPage struct {
	typ                                          gowarc.RecordType
	date, digest, profile, refersURI, refersDate string
	payload                                      int // bytes after the HTTP head
	status                                       int
}

// readPages reads every WARC file of data with gowarc in strict mode
// (digests checked) and returns the response and revisit records by URL.
func readPages(t *testing.T, data string) map[string][]warcPage {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(data, "warc", "*.warc.gz"))
	if len(files) == 0 {
		t.Fatal("no WARC file")
	}
	out := map[string][]warcPage{}
	for _, f := range files {
		r, err := gowarc.NewWarcFileReader(f, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("gowarc: %s: record at %d: %v", f, rec.Offset, err)
			}
			wr := rec.WarcRecord
			if v, err := wr.ValidateDigest(); err != nil || len(v) > 0 || len(rec.Validation) > 0 {
				t.Fatalf("gowarc: %s: %s record at %d: %v %v %v", f, wr.Type(), rec.Offset, v, err, rec.Validation)
			}
			h := wr.WarcHeader()
			if typ := wr.Type(); typ == gowarc.Response || typ == gowarc.Revisit {
				p := warcPage{typ: typ, date: h.Get(gowarc.WarcDate), digest: h.Get(gowarc.WarcPayloadDigest), profile: h.Get(gowarc.WarcProfile)}
				if typ == gowarc.Revisit {
					ref, err := wr.RevisitRef()
					if err != nil {
						t.Fatal(err)
					}
					p.refersURI, p.refersDate = ref.TargetUri, ref.TargetDate
				}
				raw, err := wr.Block().RawBytes()
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				_, _ = b.ReadFrom(raw)
				head, body, _ := bytes.Cut(b.Bytes(), []byte("\r\n\r\n"))
				p.payload = len(body)
				_, _ = fmt.Sscanf(string(head), "HTTP/1.1 %d", &p.status)
				out[h.Get(gowarc.WarcTargetURI)] = append(out[h.Get(gowarc.WarcTargetURI)], p)
			}
			rec.Close()
		}
		r.Close()
	}
	return out
}

// logReasons returns the crawl log's reason and outlinks of each URL.
func logReasons(t *testing.T, data string) map[string]archive.LogEntry {
	t.Helper()
	out := map[string]archive.LogEntry{}
	if _, err := archive.ReadCrawlLog(filepath.Join(data, crawlLogName), func(e archive.LogEntry) error {
		out[e.URL] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDedupRevisit: the same body under two URLs is archived once as a
// response and once as a revisit record (identical-payload-digest,
// referring to the first by URI and date, with the HTTP head and no
// payload), read by gowarc in strict mode; the copy's links are not
// extracted (its relative link, new under its URL, is never requested)
// and its crawl-log line says duplicate. A second run on the same data
// directory finds the payload of the first run in the digest index: a new
// URL with the same body is a revisit of the first run's record. With
// warc.dedup off, both copies are archived in full and read for links.
func TestDedupRevisit(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		srv, hits := dupSite(t)
		c := testConfig(t, srv)
		n, stop := start(t, c)
		wait.For(t, 30*time.Second, "the crawl", func() bool {
			k := n.Frontier().Counts()
			return k.InList == 0 && k.InProgress == 0 && k.Completed == 4
		})
		dups := testutil.ToFloat64(n.m.PagesDuplicate)
		stop()
		if dups != 1 {
			t.Errorf("phasecrawl_pages_duplicate_total is %v, want 1", dups)
		}
		if h := hits("/d2/next"); h != 0 {
			t.Errorf("/d2/next requested %d times: the copy's links were extracted", h)
		}
		pages := readPages(t, c.Data)
		d1, d2 := pages[srv.URL+"/d1/"], pages[srv.URL+"/d2/"]
		if len(d1) != 1 || len(d2) != 1 || d1[0].typ != gowarc.Response || d2[0].typ != gowarc.Revisit {
			t.Fatalf("/d1/: %+v; /d2/: %+v; want one response and one revisit", d1, d2)
		}
		orig, rv := d1[0], d2[0]
		if rv.profile != archive.ProfileIdenticalPayload || rv.refersURI != srv.URL+"/d1/" || rv.refersDate != orig.date ||
			rv.digest != orig.digest || rv.digest == "" {
			t.Errorf("revisit %+v does not refer to the response %+v", rv, orig)
		}
		if rv.payload != 0 || rv.status != 200 || orig.payload != len(dupBody) {
			t.Errorf("revisit holds %d payload bytes after an HTTP %d head (want 0 after 200); the response %d (want %d)", rv.payload, rv.status, orig.payload, len(dupBody))
		}
		log := logReasons(t, c.Data)
		if e := log[srv.URL+"/d2/"]; e.Reason != "duplicate" || e.Outlinks != 0 || e.Status != 200 {
			t.Errorf("crawl log of /d2/: %+v, want reason duplicate, no outlinks", e)
		}
		if e := log[srv.URL+"/d1/"]; e.Reason != "ok" || e.Outlinks != 2 {
			t.Errorf("crawl log of /d1/: %+v, want ok with 2 outlinks", e)
		}

		// A second run on the same data directory, seeded with a new URL
		// of the same body.
		c.Seeds = []string{srv.URL + "/e/"}
		n, stop = start(t, c)
		wait.For(t, 30*time.Second, "the second run", func() bool {
			k := n.Frontier().Counts()
			return k.InList == 0 && k.InProgress == 0 && k.Completed == 5
		})
		stop()
		if h := hits("/e/next"); h != 0 {
			t.Errorf("/e/next requested %d times after a restart: the digest index was lost", h)
		}
		e := readPages(t, c.Data)[srv.URL+"/e/"]
		if len(e) != 1 || e[0].typ != gowarc.Revisit || e[0].refersURI != srv.URL+"/d1/" || e[0].refersDate != orig.date {
			t.Errorf("/e/ after a restart: %+v, want a revisit of the first run's /d1/ at %s", e, orig.date)
		}
		if l := logReasons(t, c.Data)[srv.URL+"/e/"]; l.Reason != "duplicate" {
			t.Errorf("crawl log of /e/: %+v", l)
		}

		// A kill after /f/ was archived as a revisit record, before its
		// result was recorded: the next start settles it from the WARC
		// file left open, as a duplicate, without fetching it again.
		leaveOpenRevisit(t, c.Data, srv.URL+"/f/", orig.digest, srv.URL+"/d1/", orig.date)
		c.Seeds = []string{srv.URL + "/f/"}
		n, stop = start(t, c)
		wait.For(t, 30*time.Second, "the third run", func() bool {
			k := n.Frontier().Counts()
			return k.InList == 0 && k.InProgress == 0 && k.Completed == 6
		})
		stop()
		if h := hits("/f/"); h != 0 {
			t.Errorf("/f/ requested %d times: its revisit record left by the kill was not settled", h)
		}
		if l := logReasons(t, c.Data)[srv.URL+"/f/"]; l.Reason != "duplicate" || l.Status != 200 {
			t.Errorf("crawl log of /f/ settled from its revisit record: %+v", l)
		}
	})
	t.Run("off", func(t *testing.T) {
		srv, hits := dupSite(t)
		c := testConfig(t, srv)
		c.WARC.Dedup = false
		n, stop := start(t, c)
		wait.For(t, 30*time.Second, "the crawl", func() bool {
			k := n.Frontier().Counts()
			return k.InList == 0 && k.InProgress == 0 && k.Completed == 5
		})
		stop()
		if hits("/d2/next") != 1 {
			t.Errorf("/d2/next requested %d times with warc.dedup off, want 1", hits("/d2/next"))
		}
		pages := readPages(t, c.Data)
		for _, p := range []string{"/d1/", "/d2/"} {
			if got := pages[srv.URL+p]; len(got) != 1 || got[0].typ != gowarc.Response {
				t.Errorf("%s with warc.dedup off: %+v, want a response", p, got)
			}
		}
	})
}

// leaveOpenRevisit leaves in data's WARC directory a file as a kill leaves
// it (still .open) holding a request and a revisit record of target that
// refers to the capture of uri at date (WARC-Date) with payload digest.
func leaveOpenRevisit(t *testing.T, data, target, digest, uri, date string) {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, date)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := archive.NewWARCWriter(archive.DefaultWARCConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	head := archive.HTTPResponseHead("HTTP/1.1", 200, http.Header{"Content-Type": {"text/html"}}, len(dupBody))
	rv := archive.Revisit{Profile: archive.ProfileIdenticalPayload, RefersToTargetURI: uri, RefersToDate: at, PayloadDigest: digest}
	if err := w.Write(archive.Capture{Target: target, Date: time.Now(), Request: []byte("GET / HTTP/1.1\r\n\r\n"), Response: head, Revisit: &rv}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(w.Files()[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "warc", "phasecrawl-t-crashed.warc.gz"+archive.OpenSuffix), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
