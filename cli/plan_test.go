package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/node"
)

// TestPlanCommand: `phasecrawl plan` reads every page of GET /v1/plan and
// prints one row per host, then the spare time and the first round's
// estimated end.
func TestPlanCommand(t *testing.T) {
	due := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	spare := 3599.5
	end := due.Add(90 * time.Minute)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/plan" {
			http.NotFound(w, r)
			return
		}
		var p node.PlanPage
		switch r.URL.Query().Get("after") {
		case "":
			p = node.PlanPage{Sites: []node.PlanSite{{Host: "a.example", Priority: 5, RevisitS: 3600, NextDue: &due, LastRoundS: 0.5, LastRoundMeasured: true, Pages: 50, Bytes: 1000, DeadlineS: 600}}, Next: "a.example", SpareS: &spare}
		case "a.example":
			p = node.PlanPage{Sites: []node.PlanSite{{Host: "b.example", RevisitS: 86400, Pages: 3}}, SpareS: &spare, FirstRoundEnd: &end}
		}
		_ = json.NewEncoder(w).Encode(p)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	if code := Run([]string{"plan", "--node", strings.TrimPrefix(srv.URL, "http://")}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "HOST") {
		t.Fatalf("output:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"a.example", "5", "3600", "2026-11-25T10:00:00Z", "0.500", "yes", "50", "1000", "600"},
		{"b.example", "0", "86400", "-", "0.000", "no", "3", "0", "0"},
	} {
		if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %d: %q, want %q", i, got, want)
		}
	}
	if lines[3] != "spare_s: 3599.500" {
		t.Errorf("spare line %q", lines[3])
	}
	if lines[4] != "first_round_end: 2026-11-25T11:30:00Z (estimated)" {
		t.Errorf("last line %q", lines[4])
	}
}
