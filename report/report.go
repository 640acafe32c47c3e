// Package report keeps the figures of a node's crawl per host, per MIME
// type and per HTTP status code, as Heritrix's hosts, mimetype and
// responsecode reports, and the pages fetched per interval of the last 15
// minutes (Rate).
//
// A Tally counts the crawl log's lines, one call per line (AddEntry), so a
// running node and the crawl log of a stopped one (ReadCrawlLog) give the
// same figures. It keeps one compact entry per host the node logged a line
// for: nothing else grows it.
package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

// Host is one row of the hosts report (GET /v1/hosts).
type Host struct {
	Host string `json:"host"`
	// Requests counts the host's crawl-log lines: every fetch attempt
	// of one of its URLs, whether it got a response or not (robots.txt
	// refusals and URLs set aside without a request included).
	Requests int64 `json:"requests"`
	// Pages counts the attempts that got an HTTP response (any status).
	Pages int64 `json:"pages"`
	// Bytes sums the response bodies, as transferred.
	Bytes int64 `json:"bytes"`
	// Errors counts the attempts whose reason is not a success (ok,
	// unchanged, redirect, robots); ErrorsByKind by that reason
	// (timeout, dns, conn_refused, http_4xx, http_5xx, ...).
	Errors       int64            `json:"errors"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind,omitempty"`
	// Queued counts the host's URLs not fetched yet (in list, in
	// progress or stalled for a retry), read from the frontier.
	Queued int64 `json:"queued"`
	// Refused counts the discovered URLs of the host not admitted, by
	// reason: the scope's out-of-scope reasons (depth, exclude, include,
	// the trap rules, ...) and cap (scope.max_pages_per_host).
	Refused         int64            `json:"refused"`
	RefusedByReason map[string]int64 `json:"refused_by_reason,omitempty"`
	// FirstFetch and LastFetch are the times of the host's first and
	// last crawl-log lines (when their fetch started).
	FirstFetch *time.Time `json:"first_fetch,omitempty"`
	LastFetch  *time.Time `json:"last_fetch,omitempty"`
}

// Count is one row of the MIME-type or the status-code report: the
// responses of that MIME type (or status code) and their body bytes.
type Count struct {
	Key   string `json:"key"`
	Pages int64  `json:"pages"`
	Bytes int64  `json:"bytes"`
}

// Sort orders of the hosts report.
const (
	SortQueued   = "queued"
	SortRequests = "requests"
	SortBytes    = "bytes"
	SortErrors   = "errors"
)

// ValidSort reports whether s names a sort order of the hosts report.
func ValidSort(s string) bool {
	switch s {
	case SortQueued, SortRequests, SortBytes, SortErrors:
		return true
	}
	return false
}

// SortHosts orders hs by the figure by names (largest first; ties by host
// name) and keeps the first n (n <= 0: all).
func SortHosts(hs []Host, by string, n int) []Host {
	key := func(h *Host) int64 {
		switch by {
		case SortRequests:
			return h.Requests
		case SortBytes:
			return h.Bytes
		case SortErrors:
			return h.Errors
		}
		return h.Queued
	}
	sort.Slice(hs, func(i, j int) bool {
		a, b := key(&hs[i]), key(&hs[j])
		if a != b {
			return a > b
		}
		return hs[i].Host < hs[j].Host
	})
	if n > 0 && len(hs) > n {
		hs = hs[:n]
	}
	return hs
}

// SortCounts orders cs by pages (largest first; ties by key).
func SortCounts(cs []Count) []Count {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Pages != cs[j].Pages {
			return cs[i].Pages > cs[j].Pages
		}
		return cs[i].Key < cs[j].Key
	})
	return cs
}

// success reasons: a crawl-log line with one of them is not an error.
var success = map[string]bool{"": true, "ok": true, "unchanged": true, "duplicate": true, "redirect": true, "robots": true}

// IsError reports whether a crawl-log line with reason is counted as an error.
func IsError(reason string) bool { return !success[reason] }

// Bounds of what a Tally keeps of what servers send.
const (
	maxMIMEs   = 512 // distinct MIME types per shard; more count as "other"
	maxMIMELen = 100
	maxKinds   = 64 // distinct error kinds or refusal reasons per host
)

// shards is the number of independently locked parts of a Tally.
const shards = 64

// Tally counts crawl-log lines per host, MIME type and status code, and
// refused URLs per host and reason. Safe for concurrent use: a line locks
// one of 64 shards (by host) once.
type Tally struct {
	shards [shards]shard
}

type shard struct {
	mu    sync.Mutex
	hosts map[string]*counts
	mimes map[string]*[2]int64 // pages, bytes
	codes map[int]*[2]int64
	_     [64]byte // keeps two shards' locks off one cache line
}

// counts is one host's figures.
type counts struct {
	requests, pages, bytes int64
	first, last            int64 // Unix ns
	errors                 []kindCount
	refused                []kindCount
}

type kindCount struct {
	kind string
	n    int64
}

// NewTally returns an empty Tally.
func NewTally() *Tally {
	t := &Tally{}
	for i := range t.shards {
		s := &t.shards[i]
		s.hosts, s.mimes, s.codes = map[string]*counts{}, map[string]*[2]int64{}, map[int]*[2]int64{}
	}
	return t
}

func (t *Tally) shard(host string) *shard {
	// FNV-1a
	h := uint32(2166136261)
	for i := 0; i < len(host); i++ {
		h = (h ^ uint32(host[i])) * 16777619
	}
	return &t.shards[h%shards]
}

// HostOf returns the host[:port] of a normalized URL ("" without one).
func HostOf(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return ""
	}
	rest := u[i+3:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	if j := strings.LastIndexByte(rest, '@'); j >= 0 {
		rest = rest[j+1:]
	}
	return strings.ToLower(rest)
}

func add(ks []kindCount, kind string, n int64) []kindCount {
	for i := range ks {
		if ks[i].kind == kind {
			ks[i].n += n
			return ks
		}
	}
	if len(ks) >= maxKinds {
		kind = "other"
		for i := range ks {
			if ks[i].kind == kind {
				ks[i].n += n
				return ks
			}
		}
	}
	return append(ks, kindCount{kind, n})
}

// AddEntry counts one crawl-log line.
func (t *Tally) AddEntry(e archive.LogEntry) {
	host := HostOf(e.URL)
	if host == "" {
		return
	}
	at := e.Time.UnixNano()
	s := t.shard(host)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.hosts[host]
	if c == nil {
		c = &counts{first: at, last: at}
		s.hosts[strings.Clone(host)] = c
	}
	c.requests++
	c.first, c.last = min(c.first, at), max(c.last, at)
	if IsError(e.Reason) {
		c.errors = add(c.errors, e.Reason, 1)
	}
	if e.Status <= 0 {
		return
	}
	c.pages++
	c.bytes += e.Bytes
	mt := cleanMIME(e.MIME)
	m := s.mimes[mt]
	if m == nil {
		if len(s.mimes) >= maxMIMEs {
			mt = "other"
			m = s.mimes[mt]
		}
		if m == nil {
			m = new([2]int64)
			s.mimes[strings.Clone(mt)] = m
		}
	}
	m[0]++
	m[1] += e.Bytes
	code := s.codes[e.Status]
	if code == nil {
		code = new([2]int64)
		s.codes[e.Status] = code
	}
	code[0]++
	code[1] += e.Bytes
}

// cleanMIME bounds a MIME type as a server sent it: at most maxMIMELen
// bytes of printable ASCII (others become '?', so that no control
// character reaches a terminal), "unknown" for none.
func cleanMIME(mt string) string {
	if mt == "" {
		return "unknown"
	}
	if len(mt) > maxMIMELen {
		mt = mt[:maxMIMELen]
	}
	for i := 0; i < len(mt); i++ {
		if mt[i] <= ' ' || mt[i] > '~' {
			b := []byte(mt)
			for j := i; j < len(b); j++ {
				if b[j] <= ' ' || b[j] > '~' {
					b[j] = '?'
				}
			}
			return string(b)
		}
	}
	return mt
}

// AddRefused counts n discovered URLs of host refused for reason. Only
// hosts the Tally has a line of are counted: links to hosts the node
// never fetched from (the rest of the web) would grow it without bound.
func (t *Tally) AddRefused(host, reason string, n int64) {
	if host == "" || n <= 0 {
		return
	}
	s := t.shard(host)
	s.mu.Lock()
	if c := s.hosts[host]; c != nil {
		c.refused = add(c.refused, reason, n)
	}
	s.mu.Unlock()
}

// Len returns how many hosts the Tally has.
func (t *Tally) Len() int {
	k := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		k += len(s.hosts)
		s.mu.Unlock()
	}
	return k
}

func kinds(ks []kindCount) (map[string]int64, int64) {
	if len(ks) == 0 {
		return nil, 0
	}
	m := make(map[string]int64, len(ks))
	var sum int64
	for _, k := range ks {
		m[k.kind] += k.n
		sum += k.n
	}
	return m, sum
}

func stamp(ns int64) *time.Time {
	t := time.Unix(0, ns).UTC()
	return &t
}

// Hosts returns every host's figures (Queued is 0: the frontier has it),
// in no order.
func (t *Tally) Hosts() []Host {
	var out []Host
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for host, c := range s.hosts {
			h := Host{Host: host, Requests: c.requests, Pages: c.pages, Bytes: c.bytes,
				FirstFetch: stamp(c.first), LastFetch: stamp(c.last)}
			h.ErrorsByKind, h.Errors = kinds(c.errors)
			h.RefusedByReason, h.Refused = kinds(c.refused)
			out = append(out, h)
		}
		s.mu.Unlock()
	}
	return out
}

func counted[K comparable](t *Tally, pick func(*shard) map[K]*[2]int64, name func(K) string) []Count {
	sum := map[string]*Count{}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for k, v := range pick(s) {
			key := name(k)
			c := sum[key]
			if c == nil {
				c = &Count{Key: key}
				sum[key] = c
			}
			c.Pages += v[0]
			c.Bytes += v[1]
		}
		s.mu.Unlock()
	}
	out := make([]Count, 0, len(sum))
	for _, c := range sum {
		out = append(out, *c)
	}
	return SortCounts(out)
}

// MIMETypes returns the responses per MIME type ("unknown": none given),
// most first.
func (t *Tally) MIMETypes() []Count {
	return counted(t, func(s *shard) map[string]*[2]int64 { return s.mimes }, func(k string) string { return k })
}

// StatusCodes returns the responses per HTTP status code, most first.
func (t *Tally) StatusCodes() []Count {
	return counted(t, func(s *shard) map[int]*[2]int64 { return s.codes }, func(k int) string { return fmt.Sprint(k) })
}

// Refused returns the refusals per host and reason, for SaveRefused.
func (t *Tally) Refused() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for host, c := range s.hosts {
			if m, _ := kinds(c.refused); m != nil {
				out[host] = m
			}
		}
		s.mu.Unlock()
	}
	return out
}

// RefusedName is the file, in a node's data directory, where the node
// keeps the refused URLs per host and reason (they are in no other file).
const RefusedName = "refused.json"

// SaveRefused writes the refusals per host and reason to path (written to
// a temporary file, then renamed).
func (t *Tally) SaveRefused(path string) error {
	data, err := json.Marshal(t.Refused())
	if err != nil {
		return fmt.Errorf("report: refused URLs: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("report: save refused URLs: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("report: save refused URLs: %w", err)
	}
	return nil
}

// LoadRefused reads the refusals SaveRefused wrote, each a count to add
// once the host is known (fn); a missing file has none.
func LoadRefused(path string) (map[string]map[string]int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("report: load refused URLs: %w", err)
	}
	var m map[string]map[string]int64
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("report: load refused URLs from %s: %w", path, err)
	}
	return m, nil
}

// AddRefusedAll adds the refusals LoadRefused read (for hosts the Tally has).
func (t *Tally) AddRefusedAll(m map[string]map[string]int64) {
	for host, rs := range m {
		for reason, n := range rs {
			t.AddRefused(host, reason, n)
		}
	}
}

// ReadCrawlLog counts the lines of the crawl log at path into t, reading
// at most limit bytes (<= 0: the whole file). Lines that do not parse (a
// line torn by a crash) are skipped and counted. A missing file has no
// lines.
func (t *Tally) ReadCrawlLog(path string, limit int64) (lines, skipped int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("report: open crawl log: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, rerr := br.ReadSlice('\n')
		if errors.Is(rerr, bufio.ErrBufferFull) { // a line longer than 64 KiB
			var long []byte
			long = append(long, line...)
			for errors.Is(rerr, bufio.ErrBufferFull) {
				line, rerr = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 && !(len(line) == 1 && line[0] == '\n') {
			var e archive.LogEntry
			if json.Unmarshal(line, &e) != nil {
				skipped++
			} else {
				t.AddEntry(e)
				lines++
			}
		}
		if errors.Is(rerr, io.EOF) {
			return lines, skipped, nil
		}
		if rerr != nil {
			return lines, skipped, fmt.Errorf("report: read crawl log %s: %w", path, rerr)
		}
	}
}
