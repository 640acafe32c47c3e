package synthweb

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestChangingPagesAndValidators(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.Pages, c.Seeds, c.TrapHosts = 4, 80, 1, 0
	c.SlowHosts, c.GzipHosts = 0, 0
	c.ChangeEvery, c.ChangingPages, c.Validators = time.Hour, 0.5, true
	w, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	get := func(u string, hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", u, nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, r)
		return rec
	}
	var changing, still int
	for _, s := range w.sites {
		for _, id := range s.content {
			p := w.pages[id]
			if p.status != 200 || p.kind == kRedirect {
				continue
			}
			u := "http://" + s.name + p.path
			_, ch, ok := w.Revision(u, time.Now())
			if !ok {
				t.Fatalf("Revision(%s): not a page", u)
			}
			first := get(u, nil)
			etag, lm := first.Header().Get("ETag"), first.Header().Get("Last-Modified")
			if first.Code != 200 || etag == "" || lm == "" {
				t.Fatalf("%s: %d, ETag %q, Last-Modified %q", u, first.Code, etag, lm)
			}
			if got := strings.Contains(first.Body.String(), `class="revision"`); got != ch {
				t.Fatalf("%s: revision paragraph %v, changing %v", u, got, ch)
			}
			for _, tc := range []struct {
				hdr  map[string]string
				want int
			}{
				{map[string]string{"If-None-Match": etag}, 304},
				{map[string]string{"If-None-Match": `"other", ` + etag}, 304},
				{map[string]string{"If-None-Match": `"other"`}, 200},
				{map[string]string{"If-Modified-Since": lm}, 304},
				{map[string]string{"If-Modified-Since": "Mon, 02 Jan 2006 15:04:05 GMT"}, 200},
				{map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lm}, 200},
			} {
				rec := get(u, tc.hdr)
				if rec.Code != tc.want || (tc.want == 304 && rec.Body.Len() != 0) {
					t.Fatalf("%s with %v: %d and %d body bytes, want %d", u, tc.hdr, rec.Code, rec.Body.Len(), tc.want)
				}
			}
			if ch {
				changing++
			} else {
				still++
			}
		}
	}
	if changing == 0 || still == 0 {
		t.Fatalf("%d changing and %d unchanging pages: want both", changing, still)
	}
	// One interval later a changing page has a new revision: its old
	// validators get a full response with a different body, an unchanging
	// page's still get 304.
	var u1, u2 string
	for _, s := range w.sites {
		for _, id := range s.content {
			if p := w.pages[id]; p.status == 200 && p.kind != kRedirect {
				if w.changing(id) && u1 == "" {
					u1 = "http://" + s.name + p.path
				} else if !w.changing(id) && u2 == "" {
					u2 = "http://" + s.name + p.path
				}
			}
		}
	}
	before1, before2 := get(u1, nil), get(u2, nil)
	w.epoch = w.epoch.Add(-c.ChangeEvery) // as if an interval had passed
	if rev, _, _ := w.Revision(u1, time.Now()); rev != 1 {
		t.Fatalf("revision after an interval = %d, want 1", rev)
	}
	after := get(u1, map[string]string{"If-None-Match": before1.Header().Get("ETag")})
	if after.Code != 200 || after.Body.String() == before1.Body.String() {
		t.Fatalf("changed page: %d, body changed %v", after.Code, after.Body.String() != before1.Body.String())
	}
	if rec := get(u2, map[string]string{"If-None-Match": before2.Header().Get("ETag")}); rec.Code != 304 {
		t.Fatalf("unchanging page after an interval: %d, want 304", rec.Code)
	}
	// Visits record the status sent.
	var saw304 bool
	for _, v := range w.Visits()[hostOnly(strings.TrimPrefix(u2, "http://")[:strings.Index(strings.TrimPrefix(u2, "http://"), "/")])] {
		saw304 = saw304 || v.Status == http.StatusNotModified
	}
	if !saw304 {
		t.Fatal("no visit recorded with status 304")
	}
}

func TestChangeEveryValidate(t *testing.T) {
	c := DefaultConfig()
	c.ChangeEvery = 1500 * time.Millisecond
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "change_every=1.5s") {
		t.Fatalf("change_every=1.5s: %v", err)
	}
	c.ChangeEvery, c.ChangingPages = time.Second, 2
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "changing_pages=2") {
		t.Fatalf("changing_pages=2: %v", err)
	}
}
