package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClientURL(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:7070", "http://127.0.0.1:7070/v1/status"},
		{"http://127.0.0.1:7070", "http://127.0.0.1:7070/v1/status"},
		{"https://node.example:7070/", "https://node.example:7070/v1/status"},
	} {
		if got := (&Client{Addr: tc.addr}).URL("/v1/status"); got != tc.want {
			t.Errorf("URL of %q: %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestClientServer: a Client against a Server with a token: reads need
// none, writes are refused (ErrUnauthorized) without it or with another
// one and taken with it; the answers decode into the API's types.
func TestClientServer(t *testing.T) {
	f := &fakeNode{ready: true, refuse: refuseFTP, status: Status{Node: "n1", PagesFetched: 7}}
	srv := httptest.NewServer(newServer(t, Config{Node: f, TokenFile: writeToken(t, testToken+"\n")}).Handler())
	defer srv.Close()
	ctx := context.Background()

	open := &Client{Addr: strings.TrimPrefix(srv.URL, "http://")}
	st, err := open.Status(ctx)
	if err != nil || st.Node != "n1" || st.PagesFetched != 7 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	for _, c := range []*Client{open, {Addr: srv.URL, Token: "wrong-token-0123456789abcdef"}} {
		_, err := c.SetPaused(ctx, true)
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("pause with token %q: %v, want ErrUnauthorized", c.Token, err)
		}
		if strings.Contains(err.Error(), testToken) || (c.Token != "" && strings.Contains(err.Error(), c.Token)) {
			t.Errorf("the error shows a token: %v", err)
		}
		if _, err := c.Seeds(ctx, strings.NewReader("http://a.example/\n")); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("seeds without the token: %v, want ErrUnauthorized", err)
		}
	}

	c := &Client{Addr: srv.URL, Token: testToken}
	for _, tc := range []struct{ paused, changed bool }{{true, true}, {true, false}, {false, true}} {
		res, err := c.SetPaused(ctx, tc.paused)
		if err != nil || res != (PauseResult{Paused: tc.paused, Changed: tc.changed}) {
			t.Errorf("SetPaused(%v): %+v, %v; want changed %v", tc.paused, res, err, tc.changed)
		}
	}
	res, err := c.Seeds(ctx, strings.NewReader("http://a.example/\nhttp://b.example/\n"))
	if err != nil || res.Given != 2 || res.Added != 2 || res.BadTotal != 0 {
		t.Errorf("seeds: %+v, %v", res, err)
	}
	// Bad lines: a 400 whose result names them, not an error.
	res, err = c.Seeds(ctx, strings.NewReader("http://c.example/\nftp://d.example/\n"))
	if err != nil || res.Given != 2 || res.Added != 1 || res.BadTotal != 1 || len(res.Bad) != 1 || res.Bad[0].Line != 2 {
		t.Errorf("seeds with a bad line: %+v, %v", res, err)
	}
}

// TestClientErrors: an answer other than 200 is a *StatusError with its
// status and body; the node's own reason for refusing seeds comes with
// its result; a node that does not answer within Timeout is an error;
// an answer is read up to MaxAnswer.
func TestClientErrors(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		case "/v1/seeds":
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = w.Write([]byte(`{"given":3,"added":2,"bad_total":0,"error":"body over 64 bytes"}`))
		case "/v1/pause":
			http.Error(w, "<html>proxy error</html>", http.StatusBadGateway)
		case "/v1/status":
			_, _ = w.Write([]byte(`{"node":"` + strings.Repeat("n", 100) + `"}`))
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx := context.Background()
	c := &Client{Addr: srv.URL}

	_, err := c.Get(ctx, "/readyz")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable || errors.Is(err, ErrUnauthorized) ||
		err.Error() != "answered 503 Service Unavailable: not ready" {
		t.Errorf("readyz: %v", err)
	}

	res, err := c.Seeds(ctx, strings.NewReader("http://a.example/\n"))
	if !errors.As(err, &se) || se.Code != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "413 Request Entity Too Large: body over 64 bytes") ||
		res.Given != 3 || res.Added != 2 {
		t.Errorf("seeds refused with a reason: %+v, %v", res, err)
	}
	if res, err := c.SetPaused(ctx, true); !errors.As(err, &se) || se.Code != http.StatusBadGateway || res != (PauseResult{}) {
		t.Errorf("pause through a broken proxy: %+v, %v", res, err)
	}

	short := &Client{Addr: srv.URL, Timeout: 50 * time.Millisecond}
	if _, err := short.Get(ctx, "/slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a node that does not answer: %v, want the deadline", err)
	}

	if _, err := (&Client{Addr: srv.URL, MaxAnswer: 40}).Status(ctx); err == nil {
		t.Error("a status longer than MaxAnswer decoded")
	}
	if st, err := (&Client{Addr: srv.URL, MaxAnswer: 400}).Status(ctx); err != nil || len(st.Node) != 100 {
		t.Errorf("status within MaxAnswer: %q, %v", st.Node, err)
	}
}
