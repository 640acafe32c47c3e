package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Client asks a node's API. The phasecrawl commands that talk to a running
// node use one, and so does a node asking the other members of its cluster
// for their status (GET /v1/members, exit_when_done). Its zero value with
// an Addr is ready to use.
type Client struct {
	// Addr is the node's API address: HOST:PORT, or a URL
	// (http://HOST:PORT, https://HOST:PORT).
	Addr string
	// Token is sent as the bearer token of every request (the API asks it
	// of its writes when api_token_file is set); empty sends none.
	Token string
	// Timeout bounds a request, its answer read to the end
	// (0: DefaultTimeout).
	Timeout time.Duration
	// MaxAnswer bounds the bytes of an answer that are read
	// (0: DefaultMaxAnswer).
	MaxAnswer int64
}

// Client defaults.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultMaxAnswer = 256 << 20
)

// httpClient carries every Client's requests (each bounded by its
// context): one pool of connections.
var httpClient = &http.Client{}

// ErrUnauthorized matches the error of an answer 401: the node asks for
// its API token (api_token_file), and none or another was sent.
var ErrUnauthorized = errors.New("refused (401): missing or wrong API token")

// StatusError is the error of an answer the client cannot take: its
// status and body (an answer other than 200, or a 200 that is not what was
// asked for).
type StatusError struct {
	Code   int
	Status string // "503 Service Unavailable"
	Body   []byte
}

func (e *StatusError) Error() string {
	if e.Code == http.StatusUnauthorized {
		return ErrUnauthorized.Error()
	}
	return "answered " + e.Status + ": " + strings.TrimSpace(string(e.Body))
}

// Is reports an answer 401 as ErrUnauthorized.
func (e *StatusError) Is(target error) bool {
	return target == ErrUnauthorized && e.Code == http.StatusUnauthorized
}

// URL returns the address of path (with its query) on the node.
func (c *Client) URL(path string) string {
	addr := c.Addr
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/") + path
}

// Do sends a request for path with body (nil: none) of type contentType
// and returns the answer's body when its status is 200, else a
// *StatusError. A transport error names the method and the URL.
func (c *Client) Do(ctx context.Context, method, path, contentType string, body io.Reader) ([]byte, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.URL(path), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err // a *url.Error: method, URL and cause
	}
	defer resp.Body.Close()
	limit := c.MaxAnswer
	if limit <= 0 {
		limit = DefaultMaxAnswer
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, c.URL(path), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Code: resp.StatusCode, Status: resp.Status, Body: data}
	}
	return data, nil
}

// Get returns the body of GET path.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	return c.Do(ctx, http.MethodGet, path, "", nil)
}

// GetJSON decodes the answer of GET path into v.
func (c *Client) GetJSON(ctx context.Context, path string, v any) error {
	data, err := c.Get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("GET %s: %w", c.URL(path), err)
	}
	return nil
}

// Status asks GET /v1/status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.GetJSON(ctx, "/v1/status", &st)
	return st, err
}

// Members asks GET /v1/members: the cluster's members, each alive one with
// its status.
func (c *Client) Members(ctx context.Context) ([]MemberView, error) {
	var ms struct {
		Members []MemberView `json:"members"`
	}
	err := c.GetJSON(ctx, "/v1/members", &ms)
	return ms.Members, err
}

// Plan asks GET /v1/plan for the page of at most limit sites after host
// after ("" for the first).
func (c *Client) Plan(ctx context.Context, after string, limit int) (PlanPage, error) {
	var page PlanPage
	err := c.GetJSON(ctx, fmt.Sprintf("/v1/plan?limit=%d&after=%s", limit, url.QueryEscape(after)), &page)
	return page, err
}

// Seeds posts seed lines (text, one URL a line) to POST /v1/seeds, as a
// stream: the node adds them as they arrive. Its answer, 200 or 400 (bad
// lines), is the result; when the node says why it failed (the result's
// Error, with 413 or 500), the error is a *StatusError with that reason.
// Any other failure returns a zero result.
func (c *Client) Seeds(ctx context.Context, lines io.Reader) (SeedResult, error) {
	var res SeedResult
	data, err := c.Do(ctx, http.MethodPost, "/v1/seeds", "text/plain", lines)
	se := &StatusError{Code: http.StatusOK, Status: "200 OK"}
	switch {
	case errors.As(err, &se) && se.Code != http.StatusUnauthorized:
		data = se.Body
	case err != nil:
		return res, err
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return SeedResult{}, &StatusError{Code: se.Code, Status: se.Status, Body: data}
	}
	if res.Error != "" {
		return res, &StatusError{Code: se.Code, Status: se.Status, Body: []byte(res.Error)}
	}
	return res, nil
}

// SetPaused posts POST /v1/pause (paused) or POST /v1/resume.
func (c *Client) SetPaused(ctx context.Context, paused bool) (PauseResult, error) {
	path := "/v1/resume"
	if paused {
		path = "/v1/pause"
	}
	var res PauseResult
	data, err := c.Do(ctx, http.MethodPost, path, "", nil)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return res, &StatusError{Code: http.StatusOK, Status: "200 OK", Body: data}
	}
	return res, nil
}

// ReadToken returns the API token of the file at path: its first line,
// trimmed. Errors never show the content.
func ReadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	tok := strings.TrimSpace(string(line))
	if tok == "" {
		return "", fmt.Errorf("token file %s: the first line is empty", path)
	}
	return tok, nil
}
