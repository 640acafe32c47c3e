package salvage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// Config configures Run. Zero values take the defaults.
type Config struct {
	// Node is the exchange address HOST:PORT of a live member (its
	// --exchange; `phasecrawl status` lists every member's). Required
	// unless DryRun.
	Node string
	// Key is the cluster key (--cluster-key-file). Required unless DryRun.
	Key []byte
	// Name is the name given in the exchange handshake. Default "salvage".
	Name string
	// BatchSize is the most entries one batch carries. Default 1000, valid
	// 1..100000 (a batch is also cut below the receiver's frame size).
	BatchSize int
	// Attempts is how many times a batch is sent before Run gives up (the
	// connection is dialed again between attempts). Default 5, valid 1..100.
	Attempts int
	// Backoff is the pause after the first failed attempt, doubled after
	// each one. Default 500ms.
	Backoff time.Duration
	// DryRun reads and counts everything, and sends nothing.
	DryRun bool
	// Logger, default slog.Default().
	Logger *slog.Logger

	// dial connects to the receiver (tests); default exchange.Dial.
	dial func(ctx context.Context) (sender, error)
}

// sender is what Run needs of a connection (*exchange.Client).
type sender interface {
	Send(ctx context.Context, id uint64, entries []exchange.Entry) (uint64, error)
	Peer() string
	MaxBatchBytes() int
	Close() error
}

// Defaults of Config.
const (
	DefaultName      = "salvage"
	DefaultBatchSize = 1000
	DefaultAttempts  = 5
	DefaultBackoff   = 500 * time.Millisecond
)

func (c *Config) fill() error {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Attempts == 0 {
		c.Attempts = DefaultAttempts
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.BatchSize < 1 || c.BatchSize > 100_000:
		return fmt.Errorf("batch=%d: must be 1..100000", c.BatchSize)
	case c.Attempts < 1 || c.Attempts > 100:
		return fmt.Errorf("attempts=%d: must be 1..100", c.Attempts)
	case c.Backoff < 0:
		return fmt.Errorf("backoff=%s: must be >= 0", c.Backoff)
	case !c.DryRun && c.Node == "":
		return errors.New("node: the exchange address HOST:PORT of a live member is required")
	}
	if c.dial == nil && !c.DryRun {
		cc := exchange.ClientConfig{Name: c.Name, Key: c.Key, HandshakeTimeout: 5 * time.Second}
		c.dial = func(ctx context.Context) (sender, error) { return exchange.Dial(ctx, c.Node, cc) }
	}
	return nil
}

// FrontierCounts counts the frontier records sent, by state.
type FrontierCounts struct {
	InList     int `json:"in_list"`
	Stalled    int `json:"stalled"`
	InProgress int `json:"in_progress"`
	Completed  int `json:"completed"` // replicas included
	Replicas   int `json:"replicas"`  // COMPLETED records kept as another member's replica
}

// Summary is what Run did.
type Summary struct {
	Data string `json:"data"`
	Node string `json:"node"`
	Peer string `json:"peer"` // the receiving member's name
	// Frontier counts the frontier records sent, Outbox the outbox entries
	// by kind ("new", "done", "moved", "replica", "outcome": a lent URL's
	// outcome, for its owner), Kinds every entry by the kind it was sent as.
	Frontier FrontierCounts `json:"frontier"`
	Outbox   map[string]int `json:"outbox"`
	Kinds    map[string]int `json:"kinds"`
	Sent     int            `json:"sent"`    // entries acknowledged by the receiver
	Skipped  int            `json:"skipped"` // entries the receiver's decoder would refuse (too long), not sent
	// Added is how many entries were new to the receiving member's
	// frontier (records it forwarded at once are not counted there): 0 on
	// a second run, unless the member moved the records on to their owners.
	Added    uint64  `json:"added"`
	Batches  int     `json:"batches"`
	Resent   int     `json:"resent"` // batch attempts that failed and were sent again
	DryRun   bool    `json:"dry_run,omitempty"`
	ElapsedS float64 `json:"elapsed_s"`
}

func newSummary(d *Dir, node string) Summary {
	return Summary{Data: d.Path(), Node: node, Outbox: map[string]int{}, Kinds: map[string]int{}}
}

func (s *Summary) count(it Item) {
	if it.Source == FromOutbox {
		s.Outbox[it.Kind.String()]++
	} else {
		switch it.State {
		case frontier.InList:
			s.Frontier.InList++
		case frontier.Stalled:
			s.Frontier.Stalled++
		case frontier.InProgress:
			s.Frontier.InProgress++
		case frontier.Completed:
			s.Frontier.Completed++
			if it.Reason == frontier.ReasonReplica {
				s.Frontier.Replicas++
			}
		}
	}
	s.Kinds[it.Kind.String()]++
}

// String is the summary for people.
func (s Summary) String() string {
	var b strings.Builder
	verb := "salvaged"
	if s.DryRun {
		verb = "would salvage (dry run)"
	}
	to := s.Node
	if s.Peer != "" {
		to = fmt.Sprintf("%s (%s)", s.Peer, s.Node)
	}
	if to != "" {
		to = " into " + to
	}
	fmt.Fprintf(&b, "%s %s%s in %.3fs\n", verb, s.Data, to, s.ElapsedS)
	f := s.Frontier
	fmt.Fprintf(&b, "  frontier: %d in_list, %d stalled, %d in_progress (sent as moved), %d completed (%d of them replicas)\n",
		f.InList, f.Stalled, f.InProgress, f.Completed, f.Replicas)
	fmt.Fprintf(&b, "  outbox:   %d new, %d done, %d moved, %d replica, %d copied, %d outcome\n", s.Outbox["new"], s.Outbox["done"], s.Outbox["moved"], s.Outbox["replica"], s.Outbox["copied"], s.Outbox["outcome"])
	fmt.Fprintf(&b, "  sent:     %d entries (%d done, %d replica, %d copied, %d moved, %d new, %d outcome) in %d batches, %d resent; %d new to the receiving member; %d skipped\n",
		s.Sent, s.Kinds["done"], s.Kinds["replica"], s.Kinds["copied"], s.Kinds["moved"], s.Kinds["new"], s.Kinds["outcome"], s.Batches, s.Resent, s.Added, s.Skipped)
	return b.String()
}

// Run sends everything the dead node's directory d holds to the live
// member cfg.Node, in batches, each acknowledged once the member stored it.
// A failed batch is sent again (cfg.Attempts times, dialing again each
// time); when it still fails, Run returns what it did so far and an error
// naming the batch. Running it again is safe: the receiver dedups.
func Run(ctx context.Context, d *Dir, cfg Config) (Summary, error) {
	start := time.Now()
	if err := cfg.fill(); err != nil {
		return Summary{}, err
	}
	s := newSummary(d, cfg.Node)
	s.DryRun = cfg.DryRun
	end := func(err error) (Summary, error) {
		s.ElapsedS = time.Since(start).Seconds()
		return s, err
	}
	r := &run{cfg: cfg, s: &s, log: cfg.Logger.With("component", "salvage")}
	defer r.close()
	if !cfg.DryRun {
		if err := r.connect(ctx); err != nil {
			return end(err)
		}
		s.Peer = r.conn.Peer()
		r.log.Info("salvaging", "data", d.Path(), "node", cfg.Node, "peer", s.Peer)
	}
	err := d.Each(func(it Item) error {
		if err := it.Valid(); err != nil {
			s.Skipped++
			r.log.Warn("skipping an entry the receiver would refuse", "url", truncate(it.URL, 200), "source", it.Source, "err", err)
			return nil
		}
		s.count(it)
		if cfg.DryRun {
			return nil
		}
		return r.add(ctx, it.Entry)
	})
	if err == nil && !cfg.DryRun {
		err = r.flush(ctx)
	}
	if err != nil {
		return end(err)
	}
	r.log.Info("salvage done", "sent", s.Sent, "added", s.Added, "batches", s.Batches, "resent", s.Resent, "skipped", s.Skipped)
	return end(nil)
}

// run is one Run's sending state.
type run struct {
	cfg   Config
	s     *Summary
	log   *slog.Logger
	conn  sender
	batch []exchange.Entry
	bytes int
	id    uint64
}

func (r *run) connect(ctx context.Context) error {
	c, err := r.cfg.dial(ctx)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", r.cfg.Node, hint(err))
	}
	r.conn = c
	return nil
}

// hint explains a failed handshake: the usual cause is an address that is
// not an exchange (the API's), or another cluster key.
func hint(err error) error {
	if errors.Is(err, exchange.ErrHandshake) && !strings.Contains(err.Error(), "cluster key") {
		return fmt.Errorf("%w (is --node the member's exchange address, its --exchange, and not its API address? `phasecrawl status` lists the members' exchange addresses)", err)
	}
	return err
}

func (r *run) close() {
	if r.conn != nil {
		_ = r.conn.Close()
		r.conn = nil
	}
}

func (r *run) add(ctx context.Context, e exchange.Entry) error {
	size := exchange.EntrySize(e)
	if len(r.batch) > 0 && r.bytes+size > r.conn.MaxBatchBytes() {
		if err := r.flush(ctx); err != nil {
			return err
		}
	}
	r.batch = append(r.batch, e)
	r.bytes += size
	if len(r.batch) >= r.cfg.BatchSize {
		return r.flush(ctx)
	}
	return nil
}

// flush sends the batch, dialing again and resending on failure.
func (r *run) flush(ctx context.Context) error {
	if len(r.batch) == 0 {
		return nil
	}
	r.id++
	wait := r.cfg.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		if r.conn == nil {
			err = r.connect(ctx)
		}
		if r.conn != nil {
			var added uint64
			added, err = r.conn.Send(ctx, r.id, r.batch)
			if err == nil {
				r.s.Added += added
				r.s.Sent += len(r.batch)
				r.s.Batches++
				r.batch, r.bytes = r.batch[:0], 0
				if r.s.Batches%100 == 0 {
					r.log.Info("salvage progress", "sent", r.s.Sent, "added", r.s.Added, "batches", r.s.Batches)
				}
				return nil
			}
			if !errors.Is(err, exchange.ErrNack) {
				r.close() // the connection is unusable after a failed round trip
			}
		}
		if ctx.Err() != nil || attempt >= r.cfg.Attempts {
			break
		}
		r.s.Resent++
		r.log.Warn("salvage: batch failed, sending it again", "batch", r.id, "entries", len(r.batch), "attempt", attempt, "err", err)
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return fmt.Errorf("batch %d (%s) to %s failed after %d sent (%d batches): %w; run salvage again to finish: the receiver dedups what it already has",
		r.id, describe(r.batch), r.cfg.Node, r.s.Sent, r.s.Batches, err)
}

// describe says what a batch holds: entries by kind.
func describe(es []exchange.Entry) string {
	var n [exchange.KindCopied + 1]int
	for _, e := range es {
		if int(e.Kind) < len(n) {
			n[e.Kind]++
		}
	}
	var parts []string
	for k, c := range n {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, exchange.Kind(k)))
		}
	}
	return strings.Join(parts, ", ")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
