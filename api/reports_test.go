package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/phasecrawl/phasecrawl/report"
)

// reportNode is a fakeNode that keeps reports.
type reportNode struct {
	fakeNode
	hosts    []report.Host
	askedBy  string
	askedN   int
	hostsErr error
}

func (r *reportNode) Hosts(by string, n int) ([]report.Host, error) {
	r.askedBy, r.askedN = by, n
	return report.SortHosts(append([]report.Host(nil), r.hosts...), by, n), r.hostsErr
}
func (r *reportNode) MIMETypes() []report.Count {
	return []report.Count{{Key: "text/html", Pages: 3, Bytes: 30}}
}
func (r *reportNode) StatusCodes() []report.Count { return nil }
func (r *reportNode) Rate() report.Samples {
	return report.Samples{IntervalS: 10, Pages: make([]int64, report.RateSlots), PagesPerS: 1.5}
}

// TestReportEndpoints: GET /v1/hosts passes its sort and n to the node
// (defaults queued and 50), refuses bad ones with 400; the MIME-type,
// status-code and rate reports answer JSON (an empty list, not null); a
// node that keeps no reports answers 404.
func TestReportEndpoints(t *testing.T) {
	rn := &reportNode{hosts: []report.Host{{Host: "a.test", Queued: 1, Bytes: 9}, {Host: "b.test", Queued: 5, Bytes: 1}}}
	h := newServer(t, Config{Node: rn}).Handler()
	tests := []struct {
		path   string
		code   int
		by     string
		n      int
		inBody string
	}{
		{"/v1/hosts", 200, "queued", 50, `"host": "b.test"`},
		{"/v1/hosts?sort=bytes&n=1", 200, "bytes", 1, `"host": "a.test"`},
		{"/v1/hosts?sort=errors&n=100000", 200, "errors", 100000, `"sort": "errors"`},
		{"/v1/hosts?sort=pages", 400, "", 0, "must be queued, requests, bytes or errors"},
		{"/v1/hosts?n=0", 400, "", 0, "1..100000"},
		{"/v1/hosts?n=100001", 400, "", 0, "1..100000"},
		{"/v1/reports/mimetypes", 200, "", 0, `"key": "text/html"`},
		{"/v1/reports/statuscodes", 200, "", 0, `"rows": []`},
		{"/v1/reports/rate", 200, "", 0, `"pages_per_s": 1.5`},
	}
	for _, tt := range tests {
		rn.askedBy, rn.askedN = "", 0
		code, hdr, body := do(h, http.MethodGet, tt.path, "", nil)
		if code != tt.code || !strings.Contains(string(body), tt.inBody) || rn.askedBy != tt.by || rn.askedN != tt.n {
			t.Errorf("GET %s: %d %s (asked sort %q n %d); want %d with %q, sort %q n %d", tt.path, code, body, rn.askedBy, rn.askedN, tt.code, tt.inBody, tt.by, tt.n)
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q", tt.path, ct)
		}
	}
	code, _, body := do(h, http.MethodGet, "/v1/hosts?sort=bytes", "", nil)
	var hr HostsReport
	if err := json.Unmarshal(body, &hr); code != 200 || err != nil || len(hr.Hosts) != 2 || hr.Hosts[0].Host != "a.test" {
		t.Fatalf("sort=bytes: %d %v %+v", code, err, hr)
	}

	rn.hostsErr = errors.New("frontier: closed")
	if code, _, body := do(h, http.MethodGet, "/v1/hosts", "", nil); code != http.StatusInternalServerError || !strings.Contains(string(body), "frontier: closed") {
		t.Errorf("a failed read: %d %s, want 500 with its error", code, body)
	}

	plain := newServer(t, Config{Node: &fakeNode{}}).Handler()
	for _, p := range []string{"/v1/hosts", "/v1/reports/mimetypes", "/v1/reports/statuscodes", "/v1/reports/rate"} {
		if code, _, _ := do(plain, http.MethodGet, p, "", nil); code != http.StatusNotFound {
			t.Errorf("GET %s of a node without reports: %d, want 404", p, code)
		}
	}
}
