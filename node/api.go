package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/phasecrawl/phasecrawl/fetch"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// Limits of POST /v1/seeds. The body is read as a stream (one line, or one JSON array
// element, at a time) and its URLs are added in batches, so memory does not grow with it.
const (
	maxSeedBody  = 1 << 30  // bytes of one request
	maxSeedLine  = 64 << 10 // bytes of one line or array element; longer ones are bad
	maxBadSeeds  = 100      // bad lines listed in the answer (BadTotal counts them all)
	seedBatch    = 1000     // URLs routed to the frontier at once
	maxBadSeedMs = 200      // bytes of a bad line echoed back in the answer
)

// Status is the JSON answer of GET /v1/status.
type Status struct {
	Node         string         `json:"node"`
	Frontier     FrontierStatus `json:"frontier"`
	Bucket       BucketStatus   `json:"bucket"`
	Phase        PhaseStatus    `json:"phase"`
	Members      []MemberStatus `json:"members"` // empty when the node runs alone
	Outbox       map[string]int `json:"outbox"`  // URLs waiting per peer (member name)
	PagesFetched int64          `json:"pages_fetched"`
	BytesFetched int64          `json:"bytes_fetched"`
	FetchErrors  int64          `json:"fetch_errors"`
	UptimeS      float64        `json:"uptime_s"`
	Done         bool           `json:"done"`
	// ErrorsByKind counts the fetch errors by kind (phasecrawl_fetch_errors_total).
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	// Paused is true between POST /v1/pause and POST /v1/resume.
	Paused bool `json:"paused"`
	// Budget is the crawl budget (max_pages, max_duration) and, once
	// spent, why and when.
	Budget BudgetStatus `json:"budget"`
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

// PhaseStatus is the node's place in the phase rotation. Current is -1
// while the node works on no phase (a cluster member joining or leaving);
// NextSwap is the cluster time the epoch ends (null when the node runs
// alone: one phase, no swaps).
type PhaseStatus struct {
	NPhase   int        `json:"nphase"`
	Current  int        `json:"current"`
	Epoch    int64      `json:"epoch"`
	NextSwap *time.Time `json:"next_swap"`
	// Fenced says why the node starts no request for want of a majority
	// of its cluster's member view; empty when it is not fenced.
	Fenced string `json:"fenced,omitempty"`
}

// Status returns the node's current figures.
func (n *Node) Status() Status {
	c := n.front.Counts()
	s := n.snap.Load()
	st := Status{
		Node:         n.cfg.Name,
		Frontier:     FrontierStatus{InList: c.InList, InProgress: c.InProgress, Completed: c.Completed, Stalled: c.Stalled},
		Bucket:       BucketStatus{Free: s.bucket.Free, Queuing: s.bucket.Queuing, Fetching: s.bucket.Fetching, TimeWait: s.bucket.TimeWait},
		Phase:        PhaseStatus{NPhase: s.nphase, Current: s.phase},
		PagesFetched: n.pages.Load(),
		BytesFetched: n.bytes.Load(),
		FetchErrors:  n.errs.Load(),
		UptimeS:      time.Since(n.started).Seconds(),
		Done:         n.Done(),
		ErrorsByKind: n.errorsByKind(),
		Paused:       n.ctl.paused.Load(),
		Budget:       n.ctl.status(),
	}
	n.clusterStatus(&st)
	return st
}

// BadSeed is a seed line that was refused, with why.
type BadSeed struct {
	Line  int    `json:"line"`
	URL   string `json:"url"`
	Error string `json:"error"`
}

// SeedResult answers POST /v1/seeds.
type SeedResult struct {
	Given    int       `json:"given"` // lines (or array elements) given, bad ones included
	Added    int       `json:"added"`
	Bad      []BadSeed `json:"bad,omitempty"` // the first 100 bad lines
	BadTotal int       `json:"bad_total"`     // all bad lines
	Error    string    `json:"error,omitempty"`
}

// AddSeeds normalizes, scopes and routes seed URLs. With no allow_hosts or
// allow_domains configured, a seed's host becomes part of the crawl's scope.
func (n *Node) AddSeeds(ctx context.Context, raw []string) (SeedResult, error) {
	a := n.newSeedAdder(ctx)
	for i, r := range raw {
		if err := a.add(i+1, r); err != nil {
			return a.res, err
		}
	}
	err := a.flush()
	return a.res, err
}

// seedAdder scopes and routes seeds in batches of seedBatch, reporting bad ones in line order.
type seedAdder struct {
	n       *Node
	ctx     context.Context
	res     SeedResult
	pending []pendingSeed
}

// pendingSeed is a seed waiting for its batch; refused is set for one refused while reading.
type pendingSeed struct {
	line    int
	raw     string
	refused string
}

func (n *Node) newSeedAdder(ctx context.Context) *seedAdder {
	return &seedAdder{n: n, ctx: ctx}
}

// add takes seed number line (1-based).
func (a *seedAdder) add(line int, raw string) error {
	a.pending = append(a.pending, pendingSeed{line: line, raw: raw})
	if len(a.pending) >= seedBatch {
		return a.flush()
	}
	return nil
}

// reject takes a line refused while reading (too long, not a string).
func (a *seedAdder) reject(line int, raw, msg string) {
	if len(raw) > maxBadSeedMs {
		raw = raw[:maxBadSeedMs]
	}
	a.pending = append(a.pending, pendingSeed{line: line, raw: raw, refused: msg})
}

// bad records a refused seed; only the first maxBadSeeds are listed.
func (a *seedAdder) bad(line int, raw, msg string) {
	a.res.BadTotal++
	if len(a.res.Bad) < maxBadSeeds {
		if len(raw) > maxBadSeedMs {
			raw = strings.ToValidUTF8(raw[:maxBadSeedMs], "") + "..."
		}
		a.res.Bad = append(a.res.Bad, BadSeed{Line: line, URL: raw, Error: msg})
	}
}

// flush routes the pending batch.
func (a *seedAdder) flush() error {
	if len(a.pending) == 0 {
		return nil
	}
	n := a.n
	type parsed struct {
		norm string
		u    *url.URL
	}
	ps := make([]parsed, len(a.pending))
	var hosts []string
	for i := range a.pending {
		p := &a.pending[i]
		if p.refused != "" {
			continue
		}
		norm, err := fetch.Normalize(strings.TrimSpace(p.raw))
		if err == nil {
			var u *url.URL
			if u, err = url.Parse(norm); err == nil {
				ps[i] = parsed{norm, u}
				hosts = append(hosts, u.Host)
				continue
			}
		}
		p.refused = err.Error()
	}
	if n.seedHosts != nil {
		fresh, err := n.seedHosts.AddSeedHosts(hosts)
		if err != nil {
			return fmt.Errorf("node: remember seed hosts: %w", err)
		}
		if err := n.router.ShareSeedHosts(a.ctx, fresh); err != nil {
			return fmt.Errorf("node: share seed hosts: %w", err)
		}
	}
	urls := make([]frontier.NewURL, 0, len(hosts))
	for i, p := range a.pending {
		a.res.Given++
		if p.refused != "" {
			a.bad(p.line, p.raw, p.refused)
			continue
		}
		if ok, reason := n.inScope(ps[i].u, 0); !ok {
			a.bad(p.line, p.raw, "out of scope: "+reason)
			continue
		}
		urls = append(urls, frontier.NewURL{URL: ps[i].norm, Host: ps[i].u.Host, Depth: 0})
	}
	a.pending = a.pending[:0]
	if len(urls) == 0 {
		return nil
	}
	added, err := n.router.Route(a.ctx, urls)
	if err != nil {
		return fmt.Errorf("node: add seeds: %w", err)
	}
	a.res.Added += added
	if added > 0 {
		n.notify()
	}
	return nil
}

// inScope applies the scope rules, and the seeds' hosts when no hosts or domains are configured.
func (n *Node) inScope(u *url.URL, depth int) (bool, string) {
	if n.seedHosts != nil && !n.seedHosts.Has(u.Host) {
		return false, "host"
	}
	return n.scope.Allow(u, depth)
}

// Handler returns the node's HTTP API: the status page (/), /metrics,
// /healthz, /readyz, /v1/status, /v1/members, /v1/crawl-log, /v1/plan and POST
// /v1/seeds, /v1/pause, /v1/resume. Writes from another origin, a web page
// that posts to the API from the operator's browser, are refused with 403
// whether or not a token is set (net/http's CrossOriginProtection: the
// browser's Sec-Fetch-Site or Origin header); clients that send neither, as
// curl and phasecrawl's own commands do, are not affected.
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
	mux.HandleFunc("POST /v1/pause", n.handlePause(true))
	mux.HandleFunc("POST /v1/resume", n.handlePause(false))
	mux.HandleFunc("GET /v1/crawl-log", n.handleCrawlLog)
	mux.HandleFunc("GET /v1/members", n.handleMembers)
	mux.HandleFunc("GET /{$}", serveStatusPage)
	mux.HandleFunc("GET /v1/plan", n.handlePlan)
	return http.NewCrossOriginProtection().Handler(n.requireToken(mux))
}

// handleSeeds takes one URL a line, or a JSON array of URLs, as a stream: the URLs are added
// in batches while the body is read. 400 names the bad lines (the first maxBadSeeds).
func (n *Node) handleSeeds(w http.ResponseWriter, r *http.Request) {
	a := n.newSeedAdder(r.Context())
	body := http.MaxBytesReader(w, r.Body, maxSeedBody)
	var addErr error
	err := readSeeds(body, func(line int, raw string) error {
		addErr = a.add(line, raw)
		return addErr
	}, a.reject)
	if addErr == nil {
		// The URLs read before a body error are taken too, as the answer says.
		if ferr := a.flush(); ferr != nil {
			err = ferr
		}
	}
	code := http.StatusOK
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		code, a.res.Error = http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes (URLs before that were taken)", maxSeedBody)
	case errors.Is(err, errSeedBody):
		code, a.res.Error = http.StatusBadRequest, err.Error()
	case err != nil:
		code, a.res.Error = http.StatusInternalServerError, err.Error()
	case a.res.BadTotal > 0:
		code = http.StatusBadRequest
	}
	writeJSON(w, code, a.res)
}

// errSeedBody is matched by readSeeds' errors about the body itself (bad JSON, an element
// over maxSeedLine); reading stops there.
var errSeedBody = errors.New("seeds body")

// readSeeds reads a seeds body from r: a JSON array of URL strings (when the first non-space
// byte is '['), else one URL a line (blank lines and # comments skipped). It calls add with
// each URL and its line number (the element number for JSON), and bad for lines it refuses
// (too long, not a string). Nothing but the current line is held. Errors from add stop it.
func readSeeds(r io.Reader, add func(line int, raw string) error, bad func(line int, raw, msg string)) error {
	br := bufio.NewReaderSize(r, maxSeedLine)
	skipped := 0     // lines before the first non-space byte
	nonJSON := false // a space JSON does not allow (\f, \v) came before it
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read seeds: %w", err)
		}
		if b == '\n' {
			skipped++
		}
		if b == ' ' || b == '\t' || b == '\r' || b == '\n' {
			continue
		}
		if b == '\f' || b == '\v' {
			nonJSON = true
			continue
		}
		if err := br.UnreadByte(); err != nil {
			return fmt.Errorf("read seeds: %w", err)
		}
		if b == '[' {
			if nonJSON {
				return fmt.Errorf("%w: JSON body must be an array of URL strings: invalid space (\\f or \\v) before '['", errSeedBody)
			}
			return readSeedsJSON(br, add, bad)
		}
		return readSeedLines(br, skipped, add, bad)
	}
}

func readSeedLines(br *bufio.Reader, line int, add func(int, string) error, bad func(int, string, string)) error {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 || err == nil {
			line++
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			head := string(chunk[:min(len(chunk), maxBadSeedMs)])
			for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of the line
				_, err = br.ReadSlice('\n')
			}
			bad(line, head, fmt.Sprintf("line longer than %d bytes", maxSeedLine))
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read seeds: line %d: %w", line, err)
			}
			continue
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read seeds: line %d: %w", line, err)
		}
		if s := strings.TrimSpace(string(chunk)); s != "" && !strings.HasPrefix(s, "#") {
			if aerr := add(line, s); aerr != nil {
				return aerr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// elementLimiter fails a read once more than limit bytes were read since the last reset:
// json.Decoder buffers a whole value, so one huge element must not be read to its end.
type elementLimiter struct {
	r     io.Reader
	n     int
	limit int
}

func (l *elementLimiter) Read(p []byte) (int, error) {
	if l.n > l.limit {
		return 0, fmt.Errorf("%w: a JSON element longer than %d bytes", errSeedBody, maxSeedLine)
	}
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}

func readSeedsJSON(br *bufio.Reader, add func(int, string) error, bad func(int, string, string)) error {
	lim := &elementLimiter{r: br, limit: 4 * maxSeedLine}
	dec := json.NewDecoder(lim)
	bodyErr := func(err error) error {
		if errors.Is(err, errSeedBody) {
			return err
		}
		return fmt.Errorf("%w: JSON body must be an array of URL strings: %w", errSeedBody, err)
	}
	if _, err := dec.Token(); err != nil { // the '['
		return bodyErr(err)
	}
	for i := 1; dec.More(); i++ {
		lim.n = 0
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return bodyErr(fmt.Errorf("element %d: %w", i, err))
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || string(bytes.TrimSpace(raw)) == "null" {
			bad(i, string(raw[:min(len(raw), maxBadSeedMs)]), "not a string")
			continue
		}
		if len(s) > maxSeedLine {
			bad(i, s, fmt.Sprintf("URL longer than %d bytes", maxSeedLine))
			continue
		}
		if err := add(i, s); err != nil {
			return err
		}
	}
	lim.n = 0
	if _, err := dec.Token(); err != nil { // the ']'
		return bodyErr(err)
	}
	lim.n = 0
	if tok, err := dec.Token(); err != io.EOF {
		return bodyErr(fmt.Errorf("data after the array (%v, %v)", tok, err))
	}
	return nil
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

// SeedHosts implements SeedHosts: every host of the set, sorted.
func (hs *hostSet) SeedHosts() []string {
	hs.mu.RLock()
	defer hs.mu.RUnlock()
	return slices.Sorted(maps.Keys(hs.hosts))
}

// AddSeedHosts implements SeedHosts: it remembers hosts, durably, with one
// write and one sync for those that are new, and returns those.
func (hs *hostSet) AddSeedHosts(hosts []string) ([]string, error) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var b strings.Builder
	var fresh []string
	for _, h := range hosts {
		if h == "" || hs.hosts[h] || strings.ContainsAny(h, " \t\r\n") {
			continue
		}
		hs.hosts[h] = true // also de-duplicates within hosts; undone below on failure
		fresh = append(fresh, h)
		b.WriteString(h + "\n")
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	_, err := hs.f.WriteString(b.String())
	if err == nil {
		err = hs.f.Sync()
	}
	if err != nil {
		for _, h := range fresh {
			delete(hs.hosts, h)
		}
		return nil, err
	}
	return fresh, nil
}

// Close closes the file.
func (hs *hostSet) Close() { _ = hs.f.Close() }
