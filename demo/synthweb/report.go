package synthweb

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ReportPath is where WithReport serves the report; VisitsPath serves
// Visits.
const (
	ReportPath = "/_synthweb/report"
	VisitsPath = "/_synthweb/visits"
)

// WithReport returns a handler that serves the web and, at ReportPath on a
// host outside the web's domain (the listener's own address, e.g.
// http://127.0.0.1:8080/_synthweb/report), the Report as JSON (at
// VisitsPath, Visits): so a test
// can read what a web running in another process served. GET only.
func (w *Web) WithReport() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		host := hostOnly(r.Host)
		d := w.cfg.Domain
		if (r.URL.Path != ReportPath && r.URL.Path != VisitsPath) || host == d || strings.HasSuffix(host, "."+d) {
			w.ServeHTTP(rw, r)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(rw, "GET only", http.StatusMethodNotAllowed)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		if r.URL.Path == VisitsPath {
			_ = json.NewEncoder(rw).Encode(w.Visits())
			return
		}
		_ = json.NewEncoder(rw).Encode(w.Report())
	})
}
