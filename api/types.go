package api

import (
	"encoding/json"
	"time"
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
	// Paused is true while the node starts no new request because it is
	// paused: between POST /v1/pause and POST /v1/resume, or while its data
	// directory is short of free space (storage.min_free).
	Paused bool `json:"paused"`
	// PausedReason says why (comma-separated when both): "operator" or
	// "disk"; empty when the node is not paused.
	PausedReason string `json:"paused_reason,omitempty"`
	// Budget is the crawl budget (max_pages, max_duration) and, once
	// spent, why and when.
	Budget BudgetStatus `json:"budget"`
	// DoneGraceS is the node's done_grace in seconds when it runs with
	// exit_when_done (0 otherwise): the members of a cluster wait the
	// largest of theirs before they exit.
	DoneGraceS float64 `json:"done_grace_s,omitempty"`
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

// MemberStatus is one member of the cluster as this node sees it.
type MemberStatus struct {
	Name     string `json:"name"`
	API      string `json:"api"`
	Exchange string `json:"exchange"`
	State    string `json:"state"` // alive, suspect, dead, left
}

// BudgetStatus is the crawl budget in GET /v1/status.
type BudgetStatus struct {
	MaxPages     int64      `json:"max_pages"`      // 0: unlimited
	MaxDurationS float64    `json:"max_duration_s"` // 0: unlimited
	Reached      string     `json:"reached,omitempty"`
	ReachedAt    *time.Time `json:"reached_at,omitempty"`
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

// PauseResult answers POST /v1/pause and /v1/resume: whether the node is
// paused now, and whether the request changed that.
type PauseResult struct {
	Changed bool `json:"changed"`
	Paused  bool `json:"paused"`
}

// CrawlLogTail answers GET /v1/crawl-log: the last lines of the crawl log
// (as written: JSON objects), oldest first.
type CrawlLogTail struct {
	Lines []json.RawMessage `json:"lines"`
}

// MemberView is one member in GET /v1/members: what gossip says of it and
// its own /v1/status (asked by this node), or why that failed.
type MemberView struct {
	MemberStatus
	Self   bool    `json:"self,omitempty"`
	Status *Status `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// PlanSite is one row of GET /v1/plan.
type PlanSite struct {
	Host     string     `json:"host"`
	Priority int        `json:"priority"`
	RevisitS float64    `json:"revisit_s"`
	NextDue  *time.Time `json:"next_due"`
	// LastRoundS is the host's round time: its latest round as measured
	// (the time its trips held a worker; LastRoundMeasured) or, before
	// one was measured, its pages times its politeness delay; times the
	// phase count.
	LastRoundS        float64 `json:"last_round_s"`
	LastRoundMeasured bool    `json:"last_round_measured"`
	Pages             int64   `json:"pages"`
	Bytes             int64   `json:"bytes"`
	DeadlineS         float64 `json:"deadline_s"`
}

// PlanPage is GET /v1/plan's answer: a page of sites in host order (next:
// the host to pass as ?after= for the next page, "" at the end) and the
// plan's spare time over every site (null before it was computed, or
// without any site to revisit).
type PlanPage struct {
	Sites  []PlanSite `json:"sites"`
	Next   string     `json:"next"`
	SpareS *float64   `json:"spare_s"`
	// FirstRoundEnd estimates when the URLs queued now will have been
	// fetched (null: nothing queued, or nothing fetched in the last minute).
	FirstRoundEnd *time.Time `json:"first_round_end"`
}
