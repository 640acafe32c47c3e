package fetch

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFetchConditional(t *testing.T) {
	const etag, lm = `"v7"`, "Wed, 25 Nov 2026 09:00:00 GMT"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", etag)
		w.Header().Set("Last-Modified", lm)
		if r.Header.Get("If-None-Match") == etag || r.Header.Get("If-Modified-Since") == lm {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write([]byte("<html>body</html>"))
	}))
	defer srv.Close()
	c := newTestClient(t, testClientConfig())
	ctx := clientTestCtx(t)
	for _, tc := range []struct {
		name     string
		cond     Conditional
		status   int
		inDump   []string
		bodySize int
	}{
		{"plain", Conditional{}, 200, nil, 17},
		{"etag", Conditional{ETag: etag}, 304, []string{"If-None-Match: " + etag}, 0},
		{"last-modified", Conditional{LastModified: lm}, 304, []string{"If-Modified-Since: " + lm}, 0},
		{"both, stale etag", Conditional{ETag: `"old"`, LastModified: lm}, 304, []string{"If-None-Match: \"old\"", "If-Modified-Since: " + lm}, 0},
		{"header injection dropped", Conditional{ETag: "\"x\"\r\nX-Evil: 1"}, 200, nil, 17},
	} {
		resp, err := c.FetchConditional(ctx, srv.URL+"/p", tc.cond)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.Status != tc.status || len(resp.RawBody) != tc.bodySize {
			t.Errorf("%s: status %d, %d body bytes; want %d, %d", tc.name, resp.Status, len(resp.RawBody), tc.status, tc.bodySize)
		}
		dump := string(resp.RequestDump)
		for _, h := range tc.inDump {
			if !strings.Contains(dump, "\r\n"+h+"\r\n") {
				t.Errorf("%s: request %q lacks %q", tc.name, dump, h)
			}
		}
		if len(tc.inDump) == 0 && (strings.Contains(dump, "If-") || strings.Contains(dump, "X-Evil")) {
			t.Errorf("%s: request %q has conditional or injected headers", tc.name, dump)
		}
		if !strings.HasSuffix(dump, "\r\n\r\n") {
			t.Errorf("%s: request %q does not end with a blank line", tc.name, dump)
		}
		resp.Release()
	}
}
