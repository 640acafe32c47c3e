package frontier

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// State is the state of a URL in the frontier (KSpider §3.4, Fig. 6).
type State uint8

// The four URL states of the paper's URLStates array.
const (
	// InList: discovered, waiting in its phase's scan queue.
	InList State = 1
	// InProgress: taken by the scheduler (in the bucket or being fetched).
	InProgress State = 2
	// Completed: fetched, or given up on (robots, HTTP error, tries used up).
	Completed State = 3
	// Stalled: could not be fetched (timeout, connection error); waits in the
	// retry lane until its RetryAt.
	Stalled State = 4
)

// String returns "in_list", "in_progress", "completed" or "stalled"
// (the label values used in metrics and the status API).
func (s State) String() string {
	switch s {
	case InList:
		return "in_list"
	case InProgress:
		return "in_progress"
	case Completed:
		return "completed"
	case Stalled:
		return "stalled"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Record is everything the frontier keeps about one URL.
type Record struct {
	FP    uint64 // Fingerprint(URL)
	URL   string // normalized URL
	Host  string // host[:port], lower case
	Depth int    // link distance from a seed
	// Run is the number of steps (the next month, day or page) on the
	// way the URL was found (urlscope.TrapConfig.Run): its links' runs count
	// from it. 0 in records written before runs were kept.
	Run    int
	Tries  int // fetch attempts finished so far
	State  State
	Status int    // last HTTP status (0 if none)
	Reason string // why COMPLETED/STALLED: "ok", "robots", "redirect", "http_error", "timeout", ...
	// Discovered is when the URL was first added; Fetched when its last fetch
	// attempt finished (kept so a COMPLETED URL can become due again later);
	// NextTry is when a STALLED URL may be retried.
	Discovered, Fetched, NextTry time.Time
	// Due is when the URL is due to be fetched again (recurring crawls;
	// zero: never). A COMPLETED record with a Due waits in the due index
	// until then; once released to the queue it keeps the Due it was
	// released for, so its fetch knows how late it came (Due is then set
	// anew, or cleared, by the fetch's result).
	Due time.Time
	// Page is what the URL's fetches kept for recurring crawls: its
	// validators, payload digest, revisit interval and change history.
	Page PageState
}

// Ref names one URL of the frontier: its fingerprint and its host (as in
// Record.Host; any case). The records are kept in host order (HostKey), so
// the calls that change a known URL's state take its Ref, not only its FP.
type Ref struct {
	FP   uint64
	Host string
}

// Ref returns the Ref of r's URL.
func (r Record) Ref() Ref { return Ref{FP: r.FP, Host: r.Host} }

// HeldAsCopy reports whether r is COMPLETED here only as a copy of
// another member's record: a replica (ReasonReplica), or a replica's copy
// a rebalance moved here (ReasonCopied).
func (r Record) HeldAsCopy() bool {
	return r.State == Completed && (r.Reason == ReasonReplica || r.Reason == ReasonCopied)
}

// RefOf returns the Ref of a normalized URL (its FP and its host); the host
// is empty when the URL does not parse.
func RefOf(normalizedURL string) Ref {
	var host string
	if u, err := url.Parse(normalizedURL); err == nil {
		host = u.Host
	}
	return Ref{FP: Fingerprint(normalizedURL), Host: host}
}

// NewURL is a URL to add. URL must already be normalized by urlscope.Normalize;
// Host is its host[:port] (derived from URL when empty).
type NewURL struct {
	URL   string
	Host  string
	Depth int
	// Run is the URL's run (Record.Run), computed where it was found; a
	// known URL keeps the run it was first added with.
	Run int
	// Due, for a URL moved from another node (rebalance), is when it is
	// due to be fetched again: a COMPLETED record (Tx.AddCompleted)
	// waits until then; a queued revisit (Add) keeps it for its lag. Zero:
	// none.
	Due time.Time
	// Redirects is the length of the redirect chain that led to URL (0: a
	// link). It travels with a redirect's target to the target's owner,
	// which limits chains (fetch.max_redirects) however many members they
	// cross; the frontier does not keep it.
	Redirects int
	// LastMod is when a sitemap says URL last changed (its <lastmod>;
	// zero: not said). A known COMPLETED URL waiting for its revisit
	// whose last capture is older becomes due at once (Add); a new URL
	// ignores it.
	LastMod time.Time
}

// Result is the outcome of one fetch, reported with Finish.
type Result struct {
	FP     uint64
	Host   string // the URL's host, as in Record.Host
	State  State  // Completed or Stalled
	Status int
	Reason string
	// RetryAt is, for Stalled, when the retry lane may release the URL
	// (zero = at once).
	RetryAt time.Time
	// Bytes is the body size, for per-host statistics.
	Bytes int64
	// Delay is the host's politeness delay in effect (HostStats.Delay);
	// 0 leaves the recorded one.
	Delay time.Duration
	// Revisit, when its Interval is > 0, makes a URL that this result
	// COMPLETES due again (see Schedule; a Stalled result whose tries are
	// used up included); zero: the URL is not fetched again.
	Revisit Schedule
	// Change says whether the page changed since its last fetch (recorded
	// in Page.History and used by an adaptive Schedule).
	Change Change
	// Page, when not nil, replaces the stored validators and digest
	// (ETag, LastModified, Digest, Archived); Interval and History are
	// the frontier's and are ignored here.
	Page *PageState
	// Free, for Stalled, means the attempt does not count against MaxTries:
	// the server asked to be called back later (429, or 503 with
	// Retry-After), or no request was sent. Tries is left as it was.
	Free bool
	// Captured, when not nil, is the page's payload archived in full (a
	// response record): recorded in the digest index (LookupDigest),
	// unless its digest is there already, when the result is taken with
	// Durable true. Nil for a page archived as a revisit record, or not
	// archived.
	Captured *Capture
	// Durable, when not nil, is asked in the write transaction, after the
	// before-commit hook (SetBeforeCommit), whether what the fetch wrote
	// elsewhere (its WARC records, its crawl-log line) reached its files.
	// False puts the URL back to IN_LIST at its queue position, untried,
	// as Requeue does: a page whose records a write error lost is fetched
	// again, never recorded as fetched. It must be quick and must not call
	// the Frontier.
	Durable func() bool
}

// Counts is how many URLs are in each state.
type Counts struct {
	InList, InProgress, Completed, Stalled int64
}

// Total is the number of URLs known to the frontier.
func (c Counts) Total() int64 { return c.InList + c.InProgress + c.Completed + c.Stalled }

// Cursor is an opaque position in a phase's queue; nil means the start.
type Cursor []byte

// HostStats are the persistent per-host counters.
type HostStats struct {
	Host string
	// Admitted is how many distinct URLs of the host were added (what
	// MaxPerHost limits).
	Admitted int64
	// Fetched is how many fetch attempts were finished (Finish), Errors how
	// many of them failed (Stalled, Status >= 400, or a Reason other than
	// "ok"/""). Bytes sums Result.Bytes.
	Fetched, Errors int64
	Bytes           int64
	// LastFetch is when the last attempt was finished.
	LastFetch time.Time
	// Delay is the host's politeness delay (max(delay, Crawl-delay)) in
	// effect at its last attempt (Result.Delay), so a restarted node keeps
	// it before it has read robots.txt again. 0 when never recorded.
	Delay time.Duration
	// RoundFetched and RoundBytes count the attempts and bytes of the
	// host's current round, LastRoundFetched and LastRoundBytes those of
	// its last finished one (0: none yet). The first round ends at the
	// host's first revisit; a later one when a revisit finds it with as
	// many attempts as the host has URLs (Admitted). Recurring crawls
	// estimate a site's data amount from its last round.
	RoundFetched, RoundBytes         int64
	LastRoundFetched, LastRoundBytes int64
	// RoundTime and LastRoundTime are what the current and the last
	// finished round cost the workers: the sum of the durations of the
	// host's trips (a worker holds a host's element from the moment it
	// takes it to the moment it reports the trip done: the requests, the
	// politeness waits between them and the trip's commit; not the waits
	// between two trips, when the worker serves other hosts). Reported
	// with AddRoundTimeAsync; 0: not measured (records written before
	// round times were kept read as 0).
	RoundTime, LastRoundTime time.Duration
}

// LatestRound returns the host's latest measured round: the current one
// when it is finished as far as the counters tell (at least as many
// attempts as the host has URLs; it becomes the last round at the host's
// next revisit), else the last finished one. ok is false when that round
// has no attempt or no measured time.
func (h HostStats) LatestRound() (fetched, bytes int64, took time.Duration, ok bool) {
	if h.RoundFetched > 0 && h.RoundFetched >= h.Admitted && h.RoundTime > 0 {
		return h.RoundFetched, h.RoundBytes, h.RoundTime, true
	}
	if h.LastRoundFetched > 0 && h.LastRoundTime > 0 {
		return h.LastRoundFetched, h.LastRoundBytes, h.LastRoundTime, true
	}
	return 0, 0, 0, false
}

// Options configure Open. Zero values of Phases, MaxTries and BatchSize mean
// their defaults.
type Options struct {
	// Path is the bbolt file (created if missing). Required.
	Path string
	// Phases is Nphase: queue keys are prefixed by
	// PhaseOf(Unit.Hash(host), Phases). Default 1, valid 1..65535.
	Phases int
	// Unit is the politeness unit phases are hashed from (nil: the host).
	Unit Unit
	// UnitName names Unit ("" or "host" for nil). It is kept in the
	// frontier: opened with another name, the queue is re-keyed for the
	// new unit, as for another Phases.
	UnitName string
	// MaxPerHost admits at most this many URLs per host (0 = unlimited,
	// the default); counted persistently per host. Valid >= 0.
	MaxPerHost int
	// OnSkipped, if set, is called with the host of each new URL Add
	// refused over MaxPerHost (in the writer's transaction: it must be
	// quick and must not call the Frontier). A write applied again after
	// a failed commit calls it again.
	OnSkipped func(host string)
	// MaxTries: a URL that stalls on its MaxTries-th attempt is COMPLETED
	// with its last reason instead. Default 3, valid 1..1000.
	MaxTries int
	// BatchSize is the most items (URLs, fingerprints, results) one write
	// transaction gathers. Default 2048, valid 1..1000000.
	BatchSize int
	// BatchDelay is the longest the writer waits for more items after the
	// first one of a batch (0 = commit as soon as the writer is free; calls
	// that arrive during a commit still share the next one). It stops
	// waiting sooner when no write arrives for a quarter of BatchDelay (light
	// load: waiting longer would only delay the callers). Default 0, valid
	// 0..1s.
	BatchDelay time.Duration
	// NoSync skips fsync on commit. Tests and benchmarks only: a crash may
	// lose or corrupt data.
	NoSync bool
	// DigestCache is how many entries of the digest index (LookupDigest)
	// stay in memory, the most recently used; the index itself is in the
	// file. Default DefaultDigestCache, valid 1..1<<24.
	DigestCache int

	// For measurements only (tests in this package): bbolt's array freelist
	// and a synced freelist instead of the defaults.
	arrayFreelist, syncFreelist bool
}

// Defaults for Options.
const (
	DefaultPhases     = 1
	DefaultMaxTries   = 3
	DefaultBatchSize  = 2048
	DefaultBatchDelay = 0
)

// DefaultOptions returns the default Options for the bbolt file at path.
func DefaultOptions(path string) Options {
	return Options{
		Path:       path,
		Phases:     DefaultPhases,
		MaxTries:   DefaultMaxTries,
		BatchSize:  DefaultBatchSize,
		BatchDelay: DefaultBatchDelay,
	}
}

// withDefaults fills zero fields and validates; errors name the key and range.
func (o Options) withDefaults() (Options, error) {
	if o.Phases == 0 {
		o.Phases = DefaultPhases
	}
	if o.MaxTries == 0 {
		o.MaxTries = DefaultMaxTries
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.DigestCache == 0 {
		o.DigestCache = DefaultDigestCache
	}
	var errs []error
	if o.Path == "" {
		errs = append(errs, errors.New("frontier: path: must not be empty"))
	}
	if o.Phases < 1 || o.Phases > maxPhases {
		errs = append(errs, fmt.Errorf("frontier: phases=%d: must be in 1..%d", o.Phases, maxPhases))
	}
	if o.MaxPerHost < 0 {
		errs = append(errs, fmt.Errorf("frontier: max_per_host=%d: must be >= 0 (0 = unlimited)", o.MaxPerHost))
	}
	if o.MaxTries < 1 || o.MaxTries > 1000 {
		errs = append(errs, fmt.Errorf("frontier: max_tries=%d: must be in 1..1000", o.MaxTries))
	}
	if o.BatchSize < 1 || o.BatchSize > 1000000 {
		errs = append(errs, fmt.Errorf("frontier: batch_size=%d: must be in 1..1000000", o.BatchSize))
	}
	if o.BatchDelay < 0 || o.BatchDelay > time.Second {
		errs = append(errs, fmt.Errorf("frontier: batch_delay=%s: must be in 0..1s", o.BatchDelay))
	}
	if o.DigestCache < 1 || o.DigestCache > 1<<24 {
		errs = append(errs, fmt.Errorf("frontier: digest_cache=%d: must be in 1..%d", o.DigestCache, 1<<24))
	}
	return o, errors.Join(errs...)
}

// maxPhases is the largest Nphase: the phase is a 16-bit key prefix.
const maxPhases = 1<<16 - 1

// ErrClosed is returned by calls on a closed Frontier.
var ErrClosed = errors.New("frontier: closed")
