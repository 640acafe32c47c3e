package synthweb

import (
	"encoding/json"
	"net/http"
	"strings"
)

// ReportPath is where WithReport serves the report.
const ReportPath = "/_synthweb/report"

// WithReport returns a handler that serves the web and, at ReportPath on a
// host outside the web's domain (the listener's own address, e.g.
// http://127.0.0.1:8080/_synthweb/report), the Report as JSON: so a test
// can read what a web running in another process served. GET only.
func (w *Web) WithReport() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		host := hostOnly(r.Host)
		d := w.cfg.Domain
		if r.URL.Path != ReportPath || host == d || strings.HasSuffix(host, "."+d) {
			w.ServeHTTP(rw, r)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(rw, "GET only", http.StatusMethodNotAllowed)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(w.Report())
	})
}
