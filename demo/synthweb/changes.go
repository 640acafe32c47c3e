package synthweb

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Pages that change on a schedule (Config.ChangeEvery, ChangingPages) and
// conditional GETs (Config.Validators): the web for recurring crawls.

// versioned reports whether pages carry revisions or validators.
func (w *Web) versioned() bool { return w.cfg.ChangeEvery > 0 || w.cfg.Validators }

// changing reports whether page id changes every ChangeEvery.
func (w *Web) changing(id int32) bool {
	if w.cfg.ChangeEvery <= 0 || w.cfg.ChangingPages <= 0 {
		return false
	}
	h := uint64(id+1) * 0x9E3779B97F4A7C15
	h ^= h >> 29
	return float64(h>>11)/(1<<53) < w.cfg.ChangingPages
}

// revision returns page id's revision at t (0 for a page that never changes).
func (w *Web) revision(id int32, t time.Time) int {
	if !w.changing(id) || t.Before(w.epoch) {
		return 0
	}
	return int(t.Sub(w.epoch) / w.cfg.ChangeEvery)
}

// lastModified is when revision rev of a page began.
func (w *Web) lastModified(rev int) time.Time {
	return w.epoch.Add(time.Duration(rev) * w.cfg.ChangeEvery)
}

func etagOf(id int32, rev int) string { return fmt.Sprintf(`"p%d-r%d"`, id, rev) }

// revise ends the rendered 200 response of page id in buf with its
// revision and sets its validators; it returns true when the request's
// validators show the current revision (the caller answers 304).
func (w *Web) revise(rw http.ResponseWriter, r *http.Request, buf *bytes.Buffer, id int32, now time.Time) bool {
	rev := w.revision(id, now)
	if w.changing(id) {
		fmt.Fprintf(buf, "<p class=\"revision\">revision %d</p>\n", rev)
	}
	if !w.cfg.Validators {
		return false
	}
	etag, lm := etagOf(id, rev), w.lastModified(rev)
	h := rw.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", lm.UTC().Format(http.TimeFormat))
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			if t = strings.TrimSpace(t); t == etag || t == "*" {
				return true
			}
		}
		return false // If-Modified-Since is ignored when If-None-Match is sent (RFC 9110 §13.1.3)
	}
	if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && !lm.After(ims) {
		return true
	}
	return false
}

// Revision reports, for the URL u of the web, whether its page changes on
// a schedule and its revision at t; ok is false for a URL that is not a
// page of the web.
func (w *Web) Revision(u string, t time.Time) (rev int, changing, ok bool) {
	pu, err := url.Parse(u)
	if err != nil {
		return 0, false, false
	}
	s := w.byName[hostOnly(pu.Host)]
	if s == nil {
		return 0, false, false
	}
	id, known := s.paths[pu.RequestURI()]
	if !known {
		return 0, false, false
	}
	return w.revision(id, t), w.changing(id), true
}
