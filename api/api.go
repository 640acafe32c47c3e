// Package api serves a node's HTTP API (docs/reference/api.md): the status
// page, /metrics, the health checks and the /v1 endpoints, with the API
// token and the refusal of cross-origin writes. It knows the node only
// through the Node interface: what the endpoints read (status, crawl log,
// plan) and what they ask (seeds, pause and resume).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/phasecrawl/phasecrawl/config"
)

// Node is the node the API serves, as the API sees it.
type Node interface {
	SeedRouter
	// Status returns the node's current figures (GET /v1/status); its
	// Members are the cluster's members as this node sees them (GET
	// /v1/members asks each alive one for its own status).
	Status() Status
	// Ready reports whether the node schedules and fetches (GET /readyz).
	Ready() bool
	// SetPaused pauses (POST /v1/pause) or resumes (POST /v1/resume) the
	// node, by the client at address by, and reports whether that changed
	// its state.
	SetPaused(paused bool, by string) (changed bool)
	// CrawlLog returns the last k lines of the crawl log written to its
	// file so far, oldest first (GET /v1/crawl-log).
	CrawlLog(k int) ([]json.RawMessage, error)
	// Plan returns a page of the revisit plan: at most limit sites whose
	// host sorts after after (GET /v1/plan).
	Plan(after string, limit int) (PlanPage, error)
}

// Config configures a Server.
type Config struct {
	// Node is what the endpoints read and ask. Required.
	Node Node
	// Metrics is served at GET /metrics; nil serves an empty registry.
	Metrics prometheus.Gatherer
	// Listener is where Serve answers; nil: the API is off (Handler still
	// answers, Serve returns at once).
	Listener net.Listener
	// TokenFile is api_token_file: every request but GET and HEAD must
	// carry the bearer token its first line holds. "": no token, which is
	// refused when Listener is not on a loopback address.
	TokenFile string
}

// Server is a node's HTTP API.
type Server struct {
	node         Node
	metrics      prometheus.Gatherer
	ln           net.Listener
	tokenHash    []byte // SHA-256 of the API token; nil: writes are open (loopback only)
	unauthorized prometheus.Counter
	http         *http.Server
}

// New checks cfg (a listener off loopback needs a token) and loads the
// token. Errors name the key (api_token_file), never the token.
func New(cfg Config) (*Server, error) {
	if cfg.Node == nil {
		return nil, errors.New("api: Config.Node is required")
	}
	s := &Server{node: cfg.Node, metrics: cfg.Metrics, ln: cfg.Listener}
	if s.metrics == nil {
		s.metrics = prometheus.NewRegistry()
	}
	if cfg.TokenFile != "" {
		hash, err := loadTokenHash(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		s.tokenHash = hash
	}
	if s.ln != nil && s.tokenHash == nil && !config.IsLoopbackAddr(s.ln.Addr().String()) {
		return nil, fmt.Errorf("api_token_file: required: the API listens on %s, which is not a loopback address", s.ln.Addr())
	}
	s.unauthorized = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "phasecrawl_api_unauthorized_total", Help: "API writes refused for a missing or wrong bearer token.",
	})
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// Collectors are the API's series, for the node's registry.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.unauthorized}
}

// Addr returns the listen address (nil if the API is off).
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve answers requests on the listener until Shutdown; without a
// listener it returns nil at once.
func (s *Server) Serve() error {
	if s.ln == nil {
		return nil
	}
	if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api: serve on %s: %w", s.ln.Addr(), err)
	}
	return nil
}

// Shutdown stops Serve, letting the requests under way finish until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// Close closes the listener (for a Server that may never have served).
func (s *Server) Close() {
	if s.ln != nil {
		_ = s.ln.Close()
	}
}

// Handler returns the API: the status page (/), /metrics, /healthz,
// /readyz, /v1/status, /v1/members, /v1/crawl-log, /v1/plan and POST
// /v1/seeds, /v1/pause, /v1/resume. Writes from another origin, a web page
// that posts to the API from the operator's browser, are refused with 403
// whether or not a token is set (net/http's CrossOriginProtection: the
// browser's Sec-Fetch-Site or Origin header); clients that send neither, as
// curl and phasecrawl's own commands do, are not affected.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.node.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.node.Status())
	})
	mux.HandleFunc("POST /v1/seeds", s.handleSeeds)
	mux.HandleFunc("POST /v1/pause", s.handlePause(true))
	mux.HandleFunc("POST /v1/resume", s.handlePause(false))
	mux.HandleFunc("GET /v1/crawl-log", s.handleCrawlLog)
	mux.HandleFunc("GET /v1/members", s.handleMembers)
	mux.HandleFunc("GET /{$}", serveStatusPage)
	mux.HandleFunc("GET /v1/plan", s.handlePlan)
	s.reportRoutes(mux) // reports.go
	return http.NewCrossOriginProtection().Handler(s.requireToken(mux))
}

// handlePause serves POST /v1/pause and /v1/resume.
func (s *Server) handlePause(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		changed := s.node.SetPaused(pause, r.RemoteAddr)
		writeJSON(w, http.StatusOK, PauseResult{Paused: pause, Changed: changed})
	}
}

// Crawl-log tail limits (GET /v1/crawl-log).
const (
	crawlLogDefaultLines = 50
	crawlLogMaxLines     = 1000
)

// handleCrawlLog serves GET /v1/crawl-log?n=N: the last N (default 50, at
// most 1000) lines of the crawl log written to the file so far.
func (s *Server) handleCrawlLog(w http.ResponseWriter, r *http.Request) {
	k, ok := queryCount(r, "n", crawlLogDefaultLines, crawlLogMaxLines)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("n=%q: must be a whole number in 1..%d", r.URL.Query().Get("n"), crawlLogMaxLines)})
		return
	}
	lines, err := s.node.CrawlLog(k)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, CrawlLogTail{Lines: lines})
}

// Limits of GET /v1/plan.
const (
	planDefaultLimit = 100
	maxPlanPage      = 1000
)

// handlePlan answers GET /v1/plan?after=HOST&limit=N (default 100, at most 1000).
func (s *Server) handlePlan(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryCount(r, "limit", planDefaultLimit, maxPlanPage)
	if !ok {
		http.Error(w, fmt.Sprintf("limit: must be 1..%d", maxPlanPage), http.StatusBadRequest)
		return
	}
	page, err := s.node.Plan(r.URL.Query().Get("after"), limit)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// queryCount reads the query parameter name as a count in 1..max; def
// when it is absent, false when it is not a whole number in range.
func queryCount(r *http.Request, name string, def, max int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 || k > max {
		return 0, false
	}
	return k, true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
