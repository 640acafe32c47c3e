package node

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/robots"
)

// Server back-off: a host that answers 429, 503 with Retry-After, or 5xx
// twice in a row is asking the crawler to slow down. Its delay doubles
// (one level per back-off, relaxed a level by every good answer), no
// request goes to it before the pause ends (the larger of Retry-After and
// the grown delay; a Crawl-delay still spaces the requests after it), and
// the URL is STALLED until then without using up a try. A host that backs
// off park_after times in a row is parked for park_duration: its URLs wait
// that long, and that wait does use up a try, so a host that never
// recovers ends its URLs at fetch.max_tries ("host_parked").

// Back-off reasons (the reason label of phasecrawl_host_backoffs_total).
const (
	backoffRateLimited  = "rate_limited"  // 429
	backoffUnavailable  = "unavailable"   // 503 with Retry-After
	backoffServerErrors = "server_errors" // 5xx twice in a row
)

const (
	// errors5xxInARow is how many 5xx in a row make a back-off.
	errors5xxInARow = 2
	// maxBackoffLevel bounds the delay's doubling.
	maxBackoffLevel = 16
	// minBackoffPause is the shortest pause of a back-off without Retry-After.
	minBackoffPause = time.Second
	// maxBackoffHosts bounds how many hosts the node tracks; beyond it a
	// new host's back-off is applied to its trip only.
	maxBackoffHosts = 1 << 16
)

// backoffs is the node's per-host back-off state, shared by its workers.
// Only hosts that backed off and have not relaxed yet have an entry.
type backoffs struct {
	maxPause  time.Duration
	parkAfter int
	parkFor   time.Duration

	mu    sync.Mutex
	hosts map[string]*hostBackoff
}

type hostBackoff struct {
	level   int       // the host's delay is multiplied by 2^level
	strikes int       // back-offs in a row, reset by a good answer and by a park
	errs5xx int       // 5xx answers in a row
	until   time.Time // no request before
	parked  bool      // until is the end of a park
}

// backoffVerdict is what one answer means for its host.
type backoffVerdict struct {
	reason string    // "" when the answer asks for nothing
	until  time.Time // no request to the host before
	parked bool      // the host is parked until then
	pause  time.Duration
	level  int
}

func newBackoffs(maxPause time.Duration, parkAfter int, parkFor time.Duration) *backoffs {
	return &backoffs{maxPause: maxPause, parkAfter: parkAfter, parkFor: parkFor, hosts: make(map[string]*hostBackoff)}
}

// backoffReason classifies an answer: the back-off reason it may call for,
// and whether it is a server error that only counts towards one.
func backoffReason(status int, h http.Header) (reason string, is5xx bool) {
	switch {
	case status == http.StatusTooManyRequests:
		return backoffRateLimited, false
	case status == http.StatusServiceUnavailable && h.Get("Retry-After") != "":
		return backoffUnavailable, false
	case status >= 500 && status <= 599:
		return "", true
	}
	return "", false
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date. ok
// is false when it is absent or malformed; a date in the past is 0.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(1<<62/time.Second) {
			secs = int64(1 << 62 / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// answered records a host's answer (status and headers) given at now, the
// host's politeness delay being delay (Crawl-delay included), and returns
// what it means: a back-off (reason set), or nothing.
func (b *backoffs) answered(host string, status int, h http.Header, delay time.Duration, now time.Time) backoffVerdict {
	reason, is5xx := backoffReason(status, h)
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.hosts[host]
	if reason == "" && !is5xx {
		// A good answer (or a 4xx, which is about the page): relax.
		if s != nil {
			s.errs5xx, s.strikes = 0, 0
			s.level = max(s.level-1, 0)
			if s.level == 0 && !s.until.After(now) {
				delete(b.hosts, host)
			}
		}
		return backoffVerdict{}
	}
	if s == nil {
		s = &hostBackoff{}
		if len(b.hosts) < maxBackoffHosts {
			b.hosts[host] = s
		}
	}
	if is5xx {
		s.errs5xx++
		if s.errs5xx < errors5xxInARow {
			return backoffVerdict{}
		}
		reason = backoffServerErrors
	}
	s.errs5xx = 0
	s.level = min(s.level+1, maxBackoffLevel)
	s.strikes++
	pause, ok := retryAfter(h.Get("Retry-After"), now)
	if !ok {
		pause = max(delay, minBackoffPause) << (s.level - 1)
	}
	pause = min(max(pause, delay), b.maxPause)
	v := backoffVerdict{reason: reason, pause: pause, level: s.level}
	if s.strikes >= b.parkAfter {
		s.strikes, s.parked = 0, true
		pause = max(pause, b.parkFor)
		v.parked = true
	} else {
		s.parked = false
	}
	v.until = now.Add(pause)
	if v.until.After(s.until) {
		s.until = v.until
	}
	v.until = s.until
	return v
}

// hold returns when the host may next be sent a request (zero: no back-off
// under way), whether it is parked until then, and the host's delay grown
// by its back-off level (0 without one).
func (b *backoffs) hold(host string, delay time.Duration, now time.Time) (until time.Time, parked bool, grown time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.hosts[host]
	if s == nil {
		return time.Time{}, false, 0
	}
	if s.level > 0 {
		grown = min(max(delay, 1)<<s.level, b.maxPause)
	}
	return s.until, s.parked && s.until.After(now), grown
}

// parked counts the hosts parked at now (phasecrawl_hosts_parked).
func (b *backoffs) parkedAt(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := 0
	for host, s := range b.hosts {
		switch {
		case s.parked && s.until.After(now):
			k++
		case s.level == 0 && !s.until.After(now):
			delete(b.hosts, host)
		}
	}
	return k
}

const (
	// maxInTripWait is the longest back-off pause a trip waits out; a
	// longer one ends the trip and its URLs wait in the retry lane.
	maxInTripWait = time.Second
	// maxBackoffTimeWait bounds how long a backed-off host's element stays
	// in TIMEWAIT after its trip.
	maxBackoffTimeWait = 30 * time.Second
)

// errBackedOff: robots.txt's answer was a back-off. It wraps
// robots.ErrAborted, so the robots cache keeps nothing (robots.txt is
// asked again after the pause) and the page waits out the pause.
var errBackedOff = fmt.Errorf("node: the host asked to be called back later: %w", robots.ErrAborted)

// tripHold is a back-off met during a trip: the rest of its list is
// STALLED until then, without a request.
type tripHold struct {
	reason string // crawl log reason: "host_backoff" or "host_parked"
	msg    string
	until  time.Time
	parked bool
}

// gap is the host's delay between two requests: the configured delay (or
// its Crawl-delay), grown by its back-offs.
func (p *tripPace) gap() time.Duration { return max(p.delay, p.grown, p.slowed) }

// onHold reports whether the host is backed off: the trip met a back-off
// already, or the node's back-off state holds the host for longer than a
// trip waits. A shorter pause is waited out by pace.
func (t *hostTrip) onHold() bool {
	if t.held.reason != "" {
		return true
	}
	now := t.n.clock.Now()
	until, parked, grown := t.n.backoff.hold(t.host, t.delay, now)
	t.grown = grown
	wait := until.Sub(now)
	if wait <= 0 {
		return false
	}
	if wait <= maxInTripWait && !parked {
		t.notBefore = until
		return false
	}
	t.held = tripHold{reason: "host_backoff", msg: "host backed off", until: until, parked: parked}
	if parked {
		t.held.reason, t.held.msg = "host_parked", "host parked"
	}
	return true
}

// stallHeld stalls the page until the end of the trip's hold: for free
// (Result.Free) during a back-off, using up a try while the host is parked.
func (t *hostTrip) stallHeld(res *frontier.Result, entry *archive.LogEntry) {
	res.State, res.Reason, res.RetryAt, res.Free = frontier.Stalled, t.held.reason, t.held.until, !t.held.parked
	entry.Reason, entry.Error = t.held.reason, t.held.msg
}

// answered gives the host's answer to the back-off state and reports
// whether it was a back-off: the trip is then on hold.
func (t *hostTrip) answered(status int, h http.Header) bool {
	n := t.n
	if n.deadJobs != nil {
		n.inactive.clear(t.host) // it answers: live again
	}
	now := n.clock.Now()
	v := n.backoff.answered(t.host, status, h, t.delay, now)
	if v.reason == "" {
		if t.grown > 0 {
			_, _, t.grown = n.backoff.hold(t.host, t.delay, now)
		}
		return false
	}
	n.m.HostBackoffs.WithLabelValues(v.reason).Inc()
	msg := fmt.Sprintf("HTTP %d: %s, paused %s (delay level %d)", status, v.reason, v.pause.Round(time.Millisecond), v.level)
	t.held = tripHold{reason: "host_backoff", msg: msg, until: v.until}
	if v.parked {
		t.held = tripHold{reason: "host_parked", msg: fmt.Sprintf("parked until %s after %d back-offs in a row (last: %s)",
			v.until.UTC().Format(time.RFC3339), n.cfg.Fetch.ParkAfter, msg), until: v.until, parked: true}
		n.log.Warn("host parked", "host", t.host, "reason", v.reason, "status", status, "until", v.until, "back_offs", n.cfg.Fetch.ParkAfter)
	}
	_, _, t.grown = n.backoff.hold(t.host, t.delay, now)
	return true
}
