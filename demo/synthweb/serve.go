package synthweb

import (
	"bytes"
	"compress/gzip"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// hostStats is what one host recorded; guarded by mu (one mutex per host,
// so hosts never contend with each other).
type hostStats struct {
	mu          sync.Mutex
	requests    int
	robots      int
	inflight    int
	maxInflight int
	last        time.Time
	lastPage    time.Time
	minGap      time.Duration // -1: fewer than two requests
	minPageGap  time.Duration
	urls        map[string]int // request URI -> count (known URLs, robots.txt excluded)
	disallowed  []string       // request URIs the requester's robots group disallows
	unknown     map[string]int // unknown paths
	visits      []Visit        // every request, in order of completion (at most maxVisits)
}

// maxVisits caps the requests recorded one by one per host (Visits).
const maxVisits = 50000

// Visit is one request a host served: what, and from its arrival until its
// response was complete (or it was abandoned). Visits lets a test place
// each duplicate fetch, overlap or short gap in time.
type Visit struct {
	URI        string    // request target (path and query; "/robots.txt" included)
	Start, End time.Time // arrival; response complete or request abandoned
	Agent      string    `json:",omitempty"` // User-Agent header
	Status     int       `json:",omitempty"` // status sent (0: abandoned before a response)
}

func (st *hostStats) reset() {
	st.requests, st.robots, st.inflight, st.maxInflight = 0, 0, 0, 0
	st.last, st.lastPage = time.Time{}, time.Time{}
	st.minGap, st.minPageGap = -1, -1
	st.urls = make(map[string]int)
	st.disallowed = nil
	st.unknown = make(map[string]int)
	st.visits = nil
}

const maxRecorded = 10000 // cap on recorded disallowed/unknown requests per host

func (st *hostStats) arrive(now time.Time, uri string, robots, known, disallowed bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.requests++
	st.inflight++
	if st.inflight > st.maxInflight {
		st.maxInflight = st.inflight
	}
	if !st.last.IsZero() {
		if g := now.Sub(st.last); st.minGap < 0 || g < st.minGap {
			st.minGap = g
		}
	}
	st.last = now
	switch {
	case robots:
		st.robots++
	case !known:
		if len(st.unknown) < maxRecorded {
			st.unknown[uri]++
		}
	default:
		if !st.lastPage.IsZero() {
			if g := now.Sub(st.lastPage); st.minPageGap < 0 || g < st.minPageGap {
				st.minPageGap = g
			}
		}
		st.lastPage = now
		st.urls[uri]++
		if disallowed && len(st.disallowed) < maxRecorded {
			st.disallowed = append(st.disallowed, uri)
		}
	}
}

func (st *hostStats) leave(v Visit) {
	st.mu.Lock()
	st.inflight--
	if len(st.visits) < maxVisits {
		st.visits = append(st.visits, v)
	}
	st.mu.Unlock()
}

// hostOnly lower-cases the Host header and drops a port.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// requestURI returns the request target as sent (origin form).
func requestURI(r *http.Request) string {
	uri := r.RequestURI
	if uri == "" && r.URL != nil { // handler called directly, not by a server
		uri = r.URL.RequestURI()
	}
	if !strings.HasPrefix(uri, "/") { // absolute form
		if u, err := url.Parse(uri); err == nil {
			uri = u.RequestURI()
		}
	}
	return uri
}

// ServeHTTP serves every host of the web; the host is taken from the Host
// header. Each request is recorded for Report. Slow hosts sleep before
// answering (the sleep ends early when the request is cancelled).
func (w *Web) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	now := time.Now()
	w.total.Add(1)
	name := hostOnly(r.Host)
	uri := requestURI(r)
	s := w.byName[name]
	if s == nil {
		w.unkMu.Lock()
		if len(w.unknownH) < maxRecorded {
			w.unknownH["http://"+name+uri]++
		}
		w.unkMu.Unlock()
		http.Error(rw, "unknown host", http.StatusNotFound)
		return
	}
	isRobots := uri == "/robots.txt"
	id, known := s.paths[uri]
	var cy, cm int
	var session string
	if s.trap && !known && !isRobots {
		cy, cm, session, known = parseCal(uri)
		id = -1
	}
	disallowed := known && !isRobots && !s.robots.allowed(r.UserAgent(), uri)
	s.st.arrive(now, uri, isRobots, known, disallowed)
	left := false
	status := 0
	leave := func() {
		if !left {
			left = true
			s.st.leave(Visit{URI: uri, Start: now, End: time.Now(), Agent: r.UserAgent(), Status: status})
		}
	}
	defer leave()

	if s.slow > 0 {
		t := time.NewTimer(s.slow)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	versioned := w.versioned() && known && !isRobots && id >= 0
	if c := w.cachedPage(id); known && !isRobots && c != nil && !versioned {
		status = c.resp.status
		w.serveCached(rw, r, s, c, leave)
		return
	}
	buf := w.getBuf()
	defer w.bufPool.Put(buf)
	var resp response
	switch {
	case isRobots:
		resp = w.robotsResponse(buf, s)
	case !known:
		buf.WriteString("<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1><p>Not a page of the synthetic web.</p></body></html>\n")
		resp = response{status: http.StatusNotFound, ctype: ctHTML}
	case id < 0:
		w.renderCalendar(buf, s, uri, cy, cm, session)
		resp = response{status: 200, ctype: ctHTML}
	default:
		resp = w.render(buf, s, id)
	}
	h := rw.Header()
	if versioned && resp.status == http.StatusOK {
		if w.revise(rw, r, buf, id, now) {
			status = http.StatusNotModified
			leave()
			rw.WriteHeader(http.StatusNotModified)
			return
		}
	}
	body := buf.Bytes()
	h.Set("Content-Type", resp.ctype)
	if resp.location != "" {
		h.Set("Location", resp.location)
	}
	if s.gzip {
		h.Set("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			zbuf := w.getBuf()
			defer w.bufPool.Put(zbuf)
			zw, _ := w.gzPool.Get().(*gzip.Writer)
			if zw == nil {
				zw, _ = gzip.NewWriterLevel(zbuf, gzip.BestSpeed)
			} else {
				zw.Reset(zbuf)
			}
			zw.Write(body)
			zw.Close()
			w.gzPool.Put(zw)
			body = zbuf.Bytes()
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	status = resp.status
	leave() // the response is complete: the next request of a polite client may arrive any time now
	rw.WriteHeader(resp.status)
	if r.Method != http.MethodHead {
		rw.Write(body)
	}
}

// serveCached writes a prerendered page: the same status, headers and
// bytes as rendering it again (see ServeHTTP), leave called at the same point.
func (w *Web) serveCached(rw http.ResponseWriter, r *http.Request, s *site, c *rendered, leave func()) {
	body := c.body
	h := rw.Header()
	h.Set("Content-Type", c.resp.ctype)
	if c.resp.location != "" {
		h.Set("Location", c.resp.location)
	}
	if s.gzip {
		h.Set("Vary", "Accept-Encoding")
		if c.gz != nil && acceptsGzip(r) {
			body = c.gz
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	leave()
	rw.WriteHeader(c.resp.status)
	if r.Method != http.MethodHead {
		rw.Write(body)
	}
}

func (w *Web) getBuf() *bytes.Buffer {
	if b, ok := w.bufPool.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return bytes.NewBuffer(make([]byte, 0, 16<<10))
}

// acceptsGzip reports whether Accept-Encoding allows gzip (q > 0).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(enc) != "*" {
				continue
			}
			if q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}

// HostReport is what one host saw.
type HostReport struct {
	Requests      int           // all requests, robots.txt included
	RobotsFetches int           // requests for /robots.txt
	MaxInFlight   int           // most requests in progress at once (arrival to response written)
	MinGap        time.Duration // smallest gap between consecutive request arrivals; -1 with fewer than two requests
	MinPageGap    time.Duration // same, robots.txt requests left out
	Trap          bool          // a spider-trap host
}

// Report is a snapshot of what the web served since New or Reset.
type Report struct {
	Requests          int64                 // all requests, unknown hosts included
	Hosts             map[string]HostReport // hosts with at least one request
	URLs              map[string]int        // fetched known URL -> fetch count (robots.txt excluded)
	Duplicates        int                   // sum over URLs of count-1
	DisallowedFetches []string              // URLs fetched although the requester's robots group disallows them (sorted)
	Unknown           map[string]int        // requests to unknown hosts or paths -> count
	TrapFetches       map[string]int        // trap host -> page requests (robots.txt excluded)
}

// Report returns a snapshot of the recorded statistics. Safe to call while
// serving.
func (w *Web) Report() Report {
	rep := Report{
		Requests:    w.total.Load(),
		Hosts:       make(map[string]HostReport),
		URLs:        make(map[string]int),
		Unknown:     make(map[string]int),
		TrapFetches: make(map[string]int),
	}
	for _, s := range w.sites {
		st := &s.st
		st.mu.Lock()
		if st.requests > 0 {
			rep.Hosts[s.name] = HostReport{Requests: st.requests, RobotsFetches: st.robots, MaxInFlight: st.maxInflight,
				MinGap: st.minGap, MinPageGap: st.minPageGap, Trap: s.trap}
		}
		prefix := "http://" + s.name
		n := 0
		for uri, c := range st.urls {
			rep.URLs[prefix+uri] = c
			rep.Duplicates += c - 1
			n += c
		}
		if s.trap && st.requests > 0 {
			rep.TrapFetches[s.name] = n
		}
		for _, uri := range st.disallowed {
			rep.DisallowedFetches = append(rep.DisallowedFetches, prefix+uri)
		}
		for uri, c := range st.unknown {
			rep.Unknown[prefix+uri] = c
		}
		st.mu.Unlock()
	}
	w.unkMu.Lock()
	for u, c := range w.unknownH {
		rep.Unknown[u] = c
	}
	w.unkMu.Unlock()
	sort.Strings(rep.DisallowedFetches)
	return rep
}

// Visits returns, per host with at least one request, the requests it
// served in order of completion (at most 50,000 per host). Safe to call
// while serving.
func (w *Web) Visits() map[string][]Visit {
	out := make(map[string][]Visit)
	for _, s := range w.sites {
		s.st.mu.Lock()
		if len(s.st.visits) > 0 {
			out[s.name] = slices.Clone(s.st.visits)
		}
		s.st.mu.Unlock()
	}
	return out
}

// Reset forgets all recorded statistics (not the web itself).
func (w *Web) Reset() {
	w.total.Store(0)
	for _, s := range w.sites {
		s.st.mu.Lock()
		inflight := s.st.inflight
		s.st.reset()
		s.st.inflight = inflight // requests in progress still leave()
		s.st.mu.Unlock()
	}
	w.unkMu.Lock()
	w.unknownH = make(map[string]int)
	w.unkMu.Unlock()
}

// Requests is the number of requests served since New or the last Reset
// (robots.txt and unknown hosts included).
func (w *Web) Requests() int64 { return w.total.Load() }
