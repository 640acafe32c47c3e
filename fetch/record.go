package fetch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// FromRecord rebuilds the Response that Fetch returned for rawURL from the
// block of the exchange's WARC response record (archive.HTTPResponseBlock:
// the status line, the headers with Content-Length set, and the body as
// transferred): the body decoded, Location resolved and ContentType parsed
// as Fetch does. truncated is the record's WARC-Truncated; max bounds the
// decoded body (<= 0: no bound). A node uses it to settle, after a crash,
// the pages it had fetched and archived but not recorded yet.
func FromRecord(rawURL string, block []byte, truncated bool, max int64) (*Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetch: archived response of %q: %w", rawURL, err)
	}
	req := &http.Request{Method: http.MethodGet, URL: u}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(block)), req)
	if err != nil {
		return nil, fmt.Errorf("fetch: archived response of %s: %w", rawURL, err)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("fetch: archived response of %s: body: %w", rawURL, err)
	}
	if max <= 0 {
		max = int64(len(raw)) + 1
	}
	r := &Response{URL: rawURL, Status: resp.StatusCode, Header: resp.Header, Proto: resp.Proto, RawBody: raw, Truncated: truncated}
	r.derive(u, max)
	return r, nil
}

// HeadFromRecord rebuilds the Response of an archived revisit record's
// block: the HTTP head of the response, without its body (RawBody and
// Body empty).
func HeadFromRecord(rawURL string, block []byte) (*Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fetch: archived head of %q: %w", rawURL, err)
	}
	req := &http.Request{Method: http.MethodGet, URL: u}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(block)), req)
	if err != nil {
		return nil, fmt.Errorf("fetch: archived head of %s: %w", rawURL, err)
	}
	_ = resp.Body.Close() // the payload is another record's
	r := &Response{URL: rawURL, Status: resp.StatusCode, Header: resp.Header, Proto: resp.Proto}
	r.deriveHead(u)
	return r, nil
}
