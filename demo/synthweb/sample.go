package synthweb

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
)

// Response is one response of the web to a GET, as Sample records it.
type Response struct {
	URL    string
	Code   int
	Header http.Header
	Body   []byte // as sent: gzip-encoded when Header has Content-Encoding
}

// linkAttr finds the href and src values of a page (enough to walk the web:
// Sample is a corpus for benchmarks, not a crawler under test).
var linkAttr = regexp.MustCompile(`(?:href|src)="([^"]+)"`)

// Sample serves the web in-process (no listener) in breadth-first order from
// its seeds and returns up to n responses, one per URL linked from a plain
// 200 HTML page within the web's domain (redirects and 404s included).
// With acceptGzip the requests accept gzip, so gzip hosts
// send gzip bodies (whose links are not followed). Give it a web without
// slow hosts (Config.SlowHosts = 0), or it sleeps like the web does.
func (w *Web) Sample(n int, acceptGzip bool) []Response {
	queue := w.Seeds()
	seen := make(map[string]bool, len(queue))
	for _, s := range queue {
		seen[s] = true
	}
	var out []Response
	for len(queue) > 0 && len(out) < n {
		u := queue[0]
		queue = queue[1:]
		req := httptest.NewRequest("GET", u, nil)
		req.Header.Set("User-Agent", "phasecrawl-sample/1.0")
		if acceptGzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		out = append(out, Response{URL: u, Code: rec.Code, Header: rec.Header(), Body: body})
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != "" ||
			!strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
			continue
		}
		base, err := url.Parse(u)
		if err != nil {
			continue
		}
		for _, m := range linkAttr.FindAllSubmatch(body, -1) {
			l, err := base.Parse(string(m[1]))
			if err != nil || (l.Hostname() != w.cfg.Domain && !strings.HasSuffix(l.Hostname(), "."+w.cfg.Domain)) {
				continue
			}
			l.Fragment = ""
			if s := l.String(); !seen[s] {
				seen[s] = true
				queue = append(queue, s)
			}
		}
	}
	return out
}

// SampleDefault is Sample on the default web without its slow hosts.
func SampleDefault(n int, acceptGzip bool) ([]Response, error) {
	c := DefaultConfig()
	c.SlowHosts = 0
	w, err := New(c)
	if err != nil {
		return nil, err
	}
	return w.Sample(n, acceptGzip), nil
}
