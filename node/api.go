package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// maxSeedBody bounds one POST /v1/seeds request.
const maxSeedBody = 64 << 20

// Status is the JSON answer of GET /v1/status.
type Status struct {
	Node         string         `json:"node"`
	Frontier     FrontierStatus `json:"frontier"`
	Bucket       BucketStatus   `json:"bucket"`
	Phase        PhaseStatus    `json:"phase"`
	PagesFetched int64          `json:"pages_fetched"`
	BytesFetched int64          `json:"bytes_fetched"`
	FetchErrors  int64          `json:"fetch_errors"`
	UptimeS      float64        `json:"uptime_s"`
	Done         bool           `json:"done"`
}

// FrontierStatus counts the frontier's URLs by state.
type FrontierStatus struct {
	InList     int64 `json:"in_list"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Stalled    int64 `json:"stalled"`
}

// BucketStatus counts the bucket's elements by state.
type BucketStatus struct {
	Free     int `json:"free"`
	Queuing  int `json:"queuing"`
	Fetching int `json:"fetching"`
	TimeWait int `json:"timewait"`
}

// PhaseStatus is the node's place in the phase rotation.
type PhaseStatus struct {
	NPhase  int `json:"nphase"`
	Current int `json:"current"`
}

// Status returns the node's current figures.
func (n *Node) Status() Status {
	c := n.front.Counts()
	s := n.snap.Load()
	return Status{
		Node:         n.cfg.Name,
		Frontier:     FrontierStatus{InList: c.InList, InProgress: c.InProgress, Completed: c.Completed, Stalled: c.Stalled},
		Bucket:       BucketStatus{Free: s.bucket.Free, Queuing: s.bucket.Queuing, Fetching: s.bucket.Fetching, TimeWait: s.bucket.TimeWait},
		Phase:        PhaseStatus{NPhase: s.nphase, Current: s.phase},
		PagesFetched: n.pages.Load(),
		BytesFetched: n.bytes.Load(),
		FetchErrors:  n.errs.Load(),
		UptimeS:      time.Since(n.started).Seconds(),
		Done:         n.Done(),
	}
}

// BadSeed is a seed line that was refused, with why.
type BadSeed struct {
	Line  int    `json:"line"`
	URL   string `json:"url"`
	Error string `json:"error"`
}

// SeedResult answers POST /v1/seeds.
type SeedResult struct {
	Given int       `json:"given"`
	Added int       `json:"added"`
	Bad   []BadSeed `json:"bad,omitempty"`
}

// AddSeeds normalizes, scopes and routes seed URLs. With no allow_hosts or
// allow_domains configured, a seed's host becomes part of the crawl's scope.
func (n *Node) AddSeeds(ctx context.Context, raw []string) (SeedResult, error) {
	res := SeedResult{Given: len(raw)}
	var urls []frontier.NewURL
	for i, r := range raw {
		norm, err := fetch.Normalize(strings.TrimSpace(r))
		if err != nil {
			res.Bad = append(res.Bad, BadSeed{Line: i + 1, URL: r, Error: err.Error()})
			continue
		}
		u, err := url.Parse(norm)
		if err != nil {
			res.Bad = append(res.Bad, BadSeed{Line: i + 1, URL: r, Error: err.Error()})
			continue
		}
		if n.seedHosts != nil {
			if err := n.seedHosts.Add(u.Host); err != nil {
				return res, fmt.Errorf("node: remember seed host: %w", err)
			}
		}
		if ok, reason := n.inScope(u, 0); !ok {
			res.Bad = append(res.Bad, BadSeed{Line: i + 1, URL: r, Error: "out of scope: " + reason})
			continue
		}
		urls = append(urls, frontier.NewURL{URL: norm, Host: u.Host, Depth: 0})
	}
	if len(urls) == 0 {
		return res, nil
	}
	added, err := n.router.Route(ctx, urls)
	if err != nil {
		return res, err
	}
	res.Added = added
	if added > 0 {
		n.notify()
	}
	return res, nil
}

// inScope applies the scope rules, and the seeds' hosts when no hosts or domains are configured.
func (n *Node) inScope(u *url.URL, depth int) (bool, string) {
	if n.seedHosts != nil && !n.seedHosts.Has(u.Host) {
		return false, "host"
	}
	return n.scope.Allow(u, depth)
}

// Handler returns the node's HTTP API: /metrics, /healthz, /readyz,
// /v1/status and POST /v1/seeds.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !n.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.Status())
	})
	mux.HandleFunc("POST /v1/seeds", n.handleSeeds)
	return mux
}

// handleSeeds takes one URL a line, or a JSON array of URLs; 400 names the bad lines.
func (n *Node) handleSeeds(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSeedBody+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxSeedBody {
		http.Error(w, fmt.Sprintf("body over %d bytes", maxSeedBody), http.StatusRequestEntityTooLarge)
		return
	}
	lines, err := parseSeedBody(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	res, err := n.AddSeeds(r.Context(), lines)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	code := http.StatusOK
	if len(res.Bad) > 0 {
		code = http.StatusBadRequest
	}
	writeJSON(w, code, res)
}

// parseSeedBody reads a JSON array of strings, or one URL a line (blank lines
// and # comments skipped, line numbers kept as given).
func parseSeedBody(body []byte) ([]string, error) {
	trimmed := strings.TrimSpace(string(body))
	if strings.HasPrefix(trimmed, "[") {
		var urls []string
		if err := json.Unmarshal([]byte(trimmed), &urls); err != nil {
			return nil, fmt.Errorf("JSON body must be an array of URL strings: %w", err)
		}
		return urls, nil
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read lines: %w", err)
	}
	return lines, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// hostSet is the set of seed hosts, kept in a file (one host a line) so a
// restarted node keeps the scope that seeds posted to it gave.
type hostSet struct {
	mu    sync.RWMutex
	hosts map[string]bool
	f     *os.File
}

func openHostSet(path string) (*hostSet, error) {
	hs := &hostSet{hosts: map[string]bool{}}
	if data, err := os.ReadFile(path); err == nil {
		for _, h := range strings.Fields(string(data)) {
			hs.hosts[h] = true
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("seed hosts %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("seed hosts %s: %w", path, err)
	}
	hs.f = f
	return hs, nil
}

// Has reports whether host is a seed host.
func (hs *hostSet) Has(host string) bool {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	return hs.hosts[host]
}

// Add remembers host, durably.
func (hs *hostSet) Add(host string) error {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.hosts[host] {
		return nil
	}
	if _, err := hs.f.WriteString(host + "\n"); err != nil {
		return err
	}
	if err := hs.f.Sync(); err != nil {
		return err
	}
	hs.hosts[host] = true
	return nil
}

// Close closes the file.
func (hs *hostSet) Close() { _ = hs.f.Close() }
