package api

import (
	"fmt"
	"net/http"

	"github.com/phasecrawl/phasecrawl/report"
)

// Reporter is what a Node that keeps reports answers: GET /v1/hosts,
// /v1/reports/mimetypes, /v1/reports/statuscodes and /v1/reports/rate
// answer 404 for a Node that is not one.
type Reporter interface {
	// Hosts returns the hosts report sorted by by (report.ValidSort),
	// the first n rows.
	Hosts(by string, n int) ([]report.Host, error)
	// MIMETypes and StatusCodes return the responses per MIME type and
	// per status code, most first.
	MIMETypes() []report.Count
	StatusCodes() []report.Count
	// Rate returns the pages fetched per interval of the last 15 minutes.
	Rate() report.Samples
}

// Limits of GET /v1/hosts.
const (
	hostsDefaultRows = 50
	hostsMaxRows     = 100000
)

// HostsReport answers GET /v1/hosts.
type HostsReport struct {
	Sort  string        `json:"sort"`
	Hosts []report.Host `json:"hosts"`
}

// CountsReport answers GET /v1/reports/mimetypes and /v1/reports/statuscodes.
type CountsReport struct {
	Rows []report.Count `json:"rows"`
}

// reportRoutes adds the reports' endpoints to mux.
func (s *Server) reportRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/hosts", s.withReporter(s.handleHosts))
	mux.HandleFunc("GET /v1/reports/mimetypes", s.withReporter(func(w http.ResponseWriter, r *http.Request, rp Reporter) {
		writeJSON(w, http.StatusOK, CountsReport{Rows: nonNil(rp.MIMETypes())})
	}))
	mux.HandleFunc("GET /v1/reports/statuscodes", s.withReporter(func(w http.ResponseWriter, r *http.Request, rp Reporter) {
		writeJSON(w, http.StatusOK, CountsReport{Rows: nonNil(rp.StatusCodes())})
	}))
	mux.HandleFunc("GET /v1/reports/rate", s.withReporter(func(w http.ResponseWriter, r *http.Request, rp Reporter) {
		writeJSON(w, http.StatusOK, rp.Rate())
	}))
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) withReporter(h func(http.ResponseWriter, *http.Request, Reporter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rp, ok := s.node.(Reporter)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "this node keeps no reports"})
			return
		}
		h(w, r, rp)
	}
}

// handleHosts serves GET /v1/hosts?sort=queued|requests|bytes|errors&n=N
// (default sort queued, n 50, at most 100000).
func (s *Server) handleHosts(w http.ResponseWriter, r *http.Request, rp Reporter) {
	by := r.URL.Query().Get("sort")
	if by == "" {
		by = report.SortQueued
	}
	if !report.ValidSort(by) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("sort=%q: must be queued, requests, bytes or errors", by)})
		return
	}
	k, ok := queryCount(r, "n", hostsDefaultRows, hostsMaxRows)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("n=%q: must be a whole number in 1..%d", r.URL.Query().Get("n"), hostsMaxRows)})
		return
	}
	hs, err := rp.Hosts(by, k)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, HostsReport{Sort: by, Hosts: nonNil(hs)})
}
