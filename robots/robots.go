// Package robots decides whether a URL may be fetched under its host's
// robots.txt (RFC 9309) and how long to wait between requests to the host
// (Crawl-delay). Its Cache fetches each host's robots.txt through a function
// the caller gives it, so it sends no request of its own, and shares the
// outcome with the other nodes of a cluster as a Record.
package robots

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/phasecrawl/phasecrawl/urlscope"
	"github.com/temoto/robotstxt"
)

// ErrUnavailable: a host's robots.txt answered 5xx (or 429), or could
// not be fetched, and no earlier copy is cached: the whole host is disallowed
// until Config.ErrorTTL has passed ("robots_unavailable").
var ErrUnavailable = errors.New("fetch: robots.txt unavailable")

// ErrStatus is wrapped (besides ErrUnavailable) when robots.txt
// answered 5xx or 429; fetch.ErrorKind classifies it as "http_5xx".
var ErrStatus = errors.New("fetch: robots.txt answered 5xx or 429")

// GetFunc fetches one URL (no redirects followed) and returns the status,
// the headers (for Location) and the body. Check passes it
// scheme://host/robots.txt and, for redirects, the Location targets.
type GetFunc = func(ctx context.Context, url string) (status int, header http.Header, body []byte, err error)

// Config configures the robots.txt cache. Zero fields take the defaults.
type Config struct {
	// UserAgent selects the robots.txt group: its product token (the leading
	// letters, "_" and "-", e.g. "phasecrawl" of "phasecrawl/0.1 (+url)")
	// matched case-insensitively and exactly (RFC 9309); else the "*" group.
	UserAgent string
	// TTL: how long rules (2xx) and allow-all answers (4xx, redirect loops)
	// are cached. Default 24h.
	TTL time.Duration
	// ErrorTTL: how long a 5xx/429/network failure is cached before the next
	// try. Default 10m.
	ErrorTTL time.Duration
	// MaxCrawlDelay caps the Crawl-delay a site asks for. Default 30s;
	// negative: Crawl-delay ignored (always 0).
	MaxCrawlDelay time.Duration
	// MaxSize: only the first MaxSize bytes of a robots.txt are parsed (RFC
	// 9309 asks for at least 500 KiB), cut back to the last full line.
	// Default 500 KiB.
	MaxSize int64
	// CacheSize: hosts kept (LRU). Default 100,000.
	CacheSize int
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
	// Shared, if set, is given every robots.txt this cache fetched (not
	// those it imported): a cluster hands it to the other nodes, which
	// Import it, so that a host's robots.txt is fetched once per TTL by the
	// whole cluster. It is called on the fetching goroutine and should
	// return quickly.
	Shared func(Record)
}

// Record is the outcome of one robots.txt fetch, as nodes exchange it.
type Record struct {
	// Key is scheme://host[:port] (lower case).
	Key string
	// Status is the final HTTP status after redirects: 2xx with Body, 4xx
	// (allow all), 5xx or 429 (unavailable); 0 when the host could not be
	// reached (unavailable).
	Status int
	// Body is the robots.txt reduced to the groups that apply to the user
	// agent (canonical form), for a 2xx.
	Body []byte
	// Fetched is when it was fetched; it expires TTL (ErrorTTL when
	// unavailable) later on every node.
	Fetched time.Time
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		UserAgent:     "phasecrawl",
		TTL:           24 * time.Hour,
		ErrorTTL:      10 * time.Minute,
		MaxCrawlDelay: 30 * time.Second,
		MaxSize:       500 << 10,
		CacheSize:     100000,
		Now:           time.Now,
	}
}

// maxRobotsRedirects is how many redirects of a robots.txt are followed (RFC 9309 §2.3.1.2).
const maxRobotsRedirects = 5

// maxRuleLen: longer Allow/Disallow values are dropped (no URL we fetch is
// longer than urlscope.MaxURLLength, so such a literal can never match).
const maxRuleLen = 2 * urlscope.MaxURLLength

// Cache caches per host (scheme://host[:port]) robots.txt rules with RFC 9309
// semantics. Parsing and rule matching use github.com/temoto/robotstxt after a
// lenient pre-pass (see canonicalRobots). temoto parses fractional
// Crawl-delay ("0.5" = 500ms); its wildcard rules are unanchored regexps, so
// "Disallow: /fish*.php" also blocks "/x/fish.php" (errs towards not
// fetching). Safe for concurrent use; concurrent Checks of one uncached host
// fetch its robots.txt once.
type Cache struct {
	cfg   Config
	token string // lower-cased product token, "" if none
	cache *lru.Cache[string, *robotsEntry]

	mu    sync.Mutex
	calls map[string]*robotsCall
}

type robotsEntry struct {
	group   *robotstxt.Group // nil: allow all
	delay   time.Duration    // capped Crawl-delay
	err     error            // non-nil: unavailable, everything disallowed
	expires time.Time
}

type robotsCall struct {
	done chan struct{}
	e    *robotsEntry
	err  error // context error of the leader; nothing cached
}

// NewCache returns an empty cache.
func NewCache(c Config) *Cache {
	d := DefaultConfig()
	if c.UserAgent == "" {
		c.UserAgent = d.UserAgent
	}
	if c.TTL <= 0 {
		c.TTL = d.TTL
	}
	if c.ErrorTTL <= 0 {
		c.ErrorTTL = d.ErrorTTL
	}
	if c.MaxCrawlDelay == 0 {
		c.MaxCrawlDelay = d.MaxCrawlDelay
	}
	if c.MaxSize <= 0 {
		c.MaxSize = d.MaxSize
	}
	if c.CacheSize <= 0 {
		c.CacheSize = d.CacheSize
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	cache, err := lru.New[string, *robotsEntry](c.CacheSize)
	if err != nil { // only for size <= 0, excluded above
		panic(err)
	}
	return &Cache{cfg: c, token: productToken(c.UserAgent), cache: cache, calls: map[string]*robotsCall{}}
}

// Check reports whether u may be fetched and the host's Crawl-delay (capped at
// MaxCrawlDelay). When the host's rules are not cached (or expired), it calls
// get for scheme://host/robots.txt:
//
//   - 2xx: the first MaxSize bytes are parsed; cached for TTL;
//   - 3xx: Location followed (through get, any host) up to 5 redirects; more,
//     or a missing/unusable Location: allow all (RFC 9309 "unavailable");
//   - 4xx except 429: allow all, cached for TTL;
//   - 429, 5xx, other statuses, get errors: the host is unreachable: if an
//     expired copy of its rules is still cached, that copy is used for another
//     ErrorTTL (RFC 9309 §2.4); otherwise Check returns allowed=false and an
//     error wrapping ErrUnavailable (and get's error), cached for
//     ErrorTTL then retried.
//
// "/robots.txt" itself is always allowed. If ctx ends while fetching, Check
// returns ctx's error and caches nothing. u must be an absolute http(s) URL.
func (r *Cache) Check(ctx context.Context, u *url.URL, get GetFunc) (allowed bool, crawlDelay time.Duration, err error) {
	if u == nil || u.Host == "" || (!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) {
		return false, 0, fmt.Errorf("robots: check %v: %w", u, urlscope.ErrScheme)
	}
	key := strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
	e, err := r.entry(ctx, key, get)
	if err != nil {
		return false, 0, err
	}
	if e.err != nil {
		return false, 0, e.err
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	if path == "/robots.txt" || e.group == nil {
		return true, e.delay, nil
	}
	return e.group.Test(path), e.delay, nil
}

// entry returns the fresh cache entry of key, loading it once for all
// concurrent callers.
func (r *Cache) entry(ctx context.Context, key string, get GetFunc) (*robotsEntry, error) {
	if e, ok := r.cache.Get(key); ok && r.cfg.Now().Before(e.expires) {
		return e, nil
	}
	for {
		r.mu.Lock()
		if e, ok := r.cache.Peek(key); ok && r.cfg.Now().Before(e.expires) {
			r.mu.Unlock()
			return e, nil
		}
		if c, ok := r.calls[key]; ok {
			r.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if c.err == nil {
				return c.e, nil
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue // the loader's context ended; load with ours
		}
		c := &robotsCall{done: make(chan struct{})}
		r.calls[key] = c
		r.mu.Unlock()
		return r.lead(ctx, key, get, c)
	}
}

func (r *Cache) lead(ctx context.Context, key string, get GetFunc, c *robotsCall) (*robotsEntry, error) {
	c.err = errors.New("robots: fetch panicked")
	defer func() {
		if c.err == nil {
			r.cache.Add(key, c.e)
		}
		r.mu.Lock()
		delete(r.calls, key)
		r.mu.Unlock()
		close(c.done)
	}()
	var stale *robotsEntry
	if old, ok := r.cache.Peek(key); ok && old.err == nil {
		stale = old
	}
	var rec Record
	c.e, rec, c.err = r.load(ctx, key, get, stale)
	if c.err == nil && r.cfg.Shared != nil {
		rec.Key = key
		r.cfg.Shared(rec)
	}
	return c.e, c.err
}

// Import caches a robots.txt another node fetched, unless a copy fetched
// later is cached already. Expired records are ignored.
func (r *Cache) Import(rec Record) {
	key := strings.ToLower(rec.Key)
	if key == "" || rec.Fetched.IsZero() {
		return
	}
	var e *robotsEntry
	switch s := rec.Status; {
	case s >= 200 && s < 300:
		e = r.parseAt(rec.Body, rec.Fetched)
	case s >= 300 && s < 500 && s != http.StatusTooManyRequests:
		e = &robotsEntry{expires: rec.Fetched.Add(r.cfg.TTL)}
	default:
		var stale *robotsEntry
		if old, ok := r.cache.Peek(key); ok && old.err == nil {
			stale = old
		}
		e = r.unavailable(stale, fmt.Errorf("robots: %s/robots.txt (fetched by another node): %w", key, ErrUnavailable))
		e.expires = rec.Fetched.Add(r.cfg.ErrorTTL)
	}
	if !r.cfg.Now().Before(e.expires) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.cache.Peek(key); ok && !old.expires.Before(e.expires) {
		return
	}
	r.cache.Add(key, e)
}

// ErrAborted, returned (wrapped) by a GetFunc, means the caller chose
// not to send the request (for example its crawl phase is ending): the
// robots.txt is not marked unavailable, nothing is cached, and Check
// returns the error.
var ErrAborted = errors.New("fetch: request not sent")

// load fetches and parses key's robots.txt, and returns the record of the
// outcome for the other nodes (Record, Key unset). Its error is only
// ctx's.
func (r *Cache) load(ctx context.Context, key string, get GetFunc, stale *robotsEntry) (*robotsEntry, Record, error) {
	target := key + "/robots.txt"
	rec := Record{Fetched: r.cfg.Now()}
	for hops := 0; ; hops++ {
		status, header, body, err := get(ctx, target)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, rec, cerr
			}
			if errors.Is(err, ErrAborted) {
				return nil, rec, err // not the server's fault: nothing is cached
			}
			return r.unavailable(stale, fmt.Errorf("robots: %s: %w: %w", target, ErrUnavailable, err)), rec, nil
		}
		rec.Status = status
		switch {
		case status >= 200 && status < 300:
			rec.Body = canonicalRobots(r.truncate(body), r.token)
			return r.parseCanonical(rec.Body, r.cfg.Now()), rec, nil
		case status >= 300 && status < 400:
			loc := header.Get("Location")
			if hops >= maxRobotsRedirects || loc == "" {
				return r.allowAll(), rec, nil
			}
			base, err := url.Parse(target)
			if err != nil {
				return r.allowAll(), rec, nil
			}
			next, err := urlscope.Resolve(base, loc)
			if err != nil {
				return r.allowAll(), rec, nil
			}
			target = next
		case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
			return r.allowAll(), rec, nil
		default:
			return r.unavailable(stale, fmt.Errorf("robots: %s: HTTP %d: %w: %w", target, status, ErrUnavailable, ErrStatus)), rec, nil
		}
	}
}

// truncate cuts body to MaxSize, back to its last full line.
func (r *Cache) truncate(body []byte) []byte {
	if int64(len(body)) > r.cfg.MaxSize {
		body = body[:r.cfg.MaxSize]
		if i := bytes.LastIndexAny(body, "\r\n"); i >= 0 {
			body = body[:i]
		}
	}
	return body
}

func (r *Cache) allowAll() *robotsEntry {
	return &robotsEntry{expires: r.cfg.Now().Add(r.cfg.TTL)}
}

func (r *Cache) unavailable(stale *robotsEntry, err error) *robotsEntry {
	exp := r.cfg.Now().Add(r.cfg.ErrorTTL)
	if stale != nil {
		return &robotsEntry{group: stale.group, delay: stale.delay, expires: exp}
	}
	return &robotsEntry{err: err, expires: exp}
}

// parseAt builds the entry of a 2xx robots.txt body fetched at fetched.
func (r *Cache) parseAt(body []byte, fetched time.Time) *robotsEntry {
	return r.parseCanonical(canonicalRobots(r.truncate(body), r.token), fetched)
}

// parseCanonical builds the entry of a robots.txt in canonical form
// (canonicalRobots) fetched at fetched.
func (r *Cache) parseCanonical(canon []byte, fetched time.Time) *robotsEntry {
	e := &robotsEntry{expires: fetched.Add(r.cfg.TTL)}
	data, err := robotstxt.FromBytes(canon)
	if err != nil { // cannot happen for canonical input; parse nothing, allow all
		return e
	}
	agent := r.token
	if agent == "" {
		agent = "*"
	}
	g := data.FindGroup(agent)
	e.group = g
	switch d := g.CrawlDelay; {
	case r.cfg.MaxCrawlDelay < 0:
	case d < 0 || d > r.cfg.MaxCrawlDelay:
		e.delay = r.cfg.MaxCrawlDelay
	default:
		e.delay = d
	}
	return e
}

// productToken returns the lower-cased leading run of letters, "_" and "-".
func productToken(ua string) string {
	ua = strings.TrimSpace(ua)
	i := 0
	for i < len(ua) && (ua[i] >= 'a' && ua[i] <= 'z' || ua[i] >= 'A' && ua[i] <= 'Z' || ua[i] == '_' || ua[i] == '-') {
		i++
	}
	return strings.ToLower(ua[:i])
}

// robotsGroup collects the records that apply to one agent class.
type robotsGroup struct {
	seen              bool
	allows, disallows []string
	delay             string
}

// canonicalRobots is the lenient RFC 9309 pre-pass in front of temoto's
// parser, which rejects a whole file for one bad line and matches user agents
// by prefix. It reads the body line by line (CR, LF or CRLF; "#" comments;
// "key: value"), keeps user-agent, allow, disallow and crawl-delay records,
// drops records before the first user-agent, unparsable or negative
// Crawl-delays and rules longer than maxRuleLen, and merges all groups that
// name our product token (exact, case-insensitive) and all "*" groups. It
// writes at most two groups (ours, "*") with normalized percent-encoding
// (so rules compare like normalized URLs) and allow rules before disallow
// rules (so an allow wins a tie of equal length, as RFC 9309 asks).
func canonicalRobots(body []byte, token string) []byte {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	var ours, star robotsGroup
	var cur []*robotsGroup
	inAgents := false
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		key := strings.ToLower(string(bytes.TrimSpace(k)))
		val := string(bytes.TrimSpace(v))
		switch key {
		case "user-agent", "useragent", "user agent":
			if !inAgents {
				cur, inAgents = cur[:0], true
			}
			var g *robotsGroup
			switch {
			case strings.HasPrefix(val, "*"):
				g = &star
			case token != "" && productToken(val) == token:
				g = &ours
			}
			if g != nil && (len(cur) == 0 || cur[0] != g) && (len(cur) < 2 || cur[1] != g) {
				g.seen = true
				cur = append(cur, g)
			}
		case "allow", "disallow":
			inAgents = false
			if val == "" || len(val) > maxRuleLen {
				continue
			}
			rule := urlscope.NormalizeEscapes(val)
			for _, g := range cur {
				if key == "allow" {
					g.allows = append(g.allows, rule)
				} else {
					g.disallows = append(g.disallows, rule)
				}
			}
		case "crawl-delay", "crawldelay":
			inAgents = false
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || f < 0 || math.IsNaN(f) {
				continue
			}
			f = math.Min(f, 86400)
			for _, g := range cur {
				g.delay = strconv.FormatFloat(f, 'f', -1, 64)
			}
		}
	}
	var out bytes.Buffer
	emit := func(agent string, g *robotsGroup) {
		if !g.seen {
			return
		}
		out.WriteString("user-agent: " + agent + "\n")
		out.WriteString("allow: /robots.txt\n") // makes the group exist even without rules
		for _, a := range g.allows {
			out.WriteString("allow: " + a + "\n")
		}
		for _, d := range g.disallows {
			out.WriteString("disallow: " + d + "\n")
		}
		if g.delay != "" {
			out.WriteString("crawl-delay: " + g.delay + "\n")
		}
	}
	emit(token, &ours)
	emit("*", &star)
	return out.Bytes()
}
