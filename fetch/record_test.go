package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

// TestFromRecord: a response rebuilt from its archived block equals what
// Fetch returned (status, headers, decoded body, content type, Location).
func TestFromRecord(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("<html><a href=/z>z</a></html>"))
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<html><a href=/a>a</a></html>"))
		case "/gz":
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz.Bytes())
		case "/moved":
			http.Redirect(w, r, "../to/there?x=1", http.StatusMovedPermanently)
		case "/chunked":
			w.Header().Set("Content-Type", "text/plain")
			w.(http.Flusher).Flush() // no Content-Length: sent chunked
			w.Write([]byte("part one, "))
			w.(http.Flusher).Flush()
			w.Write([]byte("part two"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := DefaultClientConfig()
	cfg.AllowPrivate = true
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, path := range []string{"/page", "/gz", "/moved/x", "/moved", "/chunked", "/missing"} {
		t.Run(path, func(t *testing.T) {
			want, err := c.Fetch(ctx, srv.URL+path)
			if err != nil {
				t.Fatal(err)
			}
			block := archive.HTTPResponseBlock(want.Proto, want.Status, want.Header, want.RawBody)
			got, err := FromRecord(want.URL, block, false, cfg.MaxBodySize)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != want.Status || got.ContentType != want.ContentType || got.Location != want.Location ||
				!bytes.Equal(got.Body, want.Body) || !bytes.Equal(got.RawBody, want.RawBody) || got.Truncated != want.Truncated {
				t.Errorf("rebuilt %+v\nfetched %+v", got, want)
			}
			if g, w := got.Header.Get("Content-Encoding"), want.Header.Get("Content-Encoding"); g != w {
				t.Errorf("Content-Encoding %q, fetched %q", g, w)
			}
		})
	}
	if _, err := FromRecord(srv.URL+"/x", []byte("not HTTP at all"), false, 0); err == nil {
		t.Error("a block that is not an HTTP response was taken")
	}
	if r, err := FromRecord(srv.URL+"/x", archive.HTTPResponseBlock("HTTP/1.1", 200, http.Header{}, []byte("0123456789")), true, 0); err != nil || !r.Truncated || string(r.Body) != "0123456789" {
		t.Errorf("truncated record: %+v, %v", r, err)
	}
}
