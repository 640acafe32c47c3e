package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/phasecrawl/phasecrawl/api"
)

// TestStatusCommand: status prints the node's figures, --json the node's
// own JSON, and a node that answers an error is named with its answer.
func TestStatusCommand(t *testing.T) {
	st := api.Status{Node: "n1", PagesFetched: 12, Paused: true, Frontier: api.FrontierStatus{Completed: 11, Stalled: 1}}
	raw, _ := json.Marshal(st)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.Error(w, "no such page", http.StatusNotFound)
			return
		}
		_, _ = w.Write(raw)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := Run([]string{"status", "--node", srv.URL}, nil, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "node      n1") || !strings.Contains(out.String(), "completed 11  stalled 1") ||
		!strings.Contains(out.String(), "paused    no new request starts") {
		t.Errorf("exit %d, %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := Run([]string{"status", "--node", strings.TrimPrefix(srv.URL, "http://"), "--json"}, nil, &out, &errOut); code != 0 || out.String() != string(raw) {
		t.Errorf("--json: exit %d, %q, want the node's %q", code, out.String(), raw)
	}
	out.Reset()
	errOut.Reset()
	if code := Run([]string{"status", "--node", srv.URL + "/nowhere"}, nil, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "404 Not Found: no such page") {
		t.Errorf("a node that answers 404: exit %d, %q", code, errOut.String())
	}
}
