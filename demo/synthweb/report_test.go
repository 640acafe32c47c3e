package synthweb

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWithReport: the report is served as JSON on the listener's own
// address, and what a crawler fetched shows in it; a request for the same
// path on a host of the web is an ordinary (unknown) page.
func TestWithReport(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Hosts, cfg.Pages = 20, 200
	w := mustNew(t, cfg)
	srv := httptest.NewServer(w.WithReport())
	defer srv.Close()
	seed := w.Seeds()[0]
	req, _ := http.NewRequest("GET", srv.URL+"/", nil)
	req.Host = hostOfURL(seed)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest("GET", srv.URL+ReportPath, nil)
	req.Host = hostOfURL(seed)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("report path on a web host: %v %v, want the web's 404", resp.Status, err)
	}
	resp.Body.Close()
	resp, err = http.Get(srv.URL + ReportPath)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("report: %v %v", resp, err)
	}
	defer resp.Body.Close()
	var rep Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.URLs[seed] != 1 || rep.Hosts[hostOfURL(seed)].Requests != 2 || len(rep.Unknown) != 1 {
		t.Fatalf("report: urls=%v hosts=%v unknown=%v", rep.URLs, rep.Hosts, rep.Unknown)
	}
}
