// Package salvage recovers the URLs of a cluster member that is gone for
// good. A node's unfinished URLs (its frontier's IN_LIST, STALLED and
// IN_PROGRESS records) and the URLs waiting in its outbox for their owners
// exist nowhere else: the other members hold only replicas of the pages it
// fetched. Salvage reads the dead node's data directory read-only and sends
// all of it, with the fingerprints of the pages it completed, to a live
// member's exchange, which files every entry as it files a member's: the
// records go on to their owners there (rebalance), discovered URLs are
// forwarded, and nothing is stored twice (dedup by fingerprint), so
// salvaging a directory twice fetches nothing twice.
package salvage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/frontier"
)

// File names in a node's data directory (as the node names them).
const (
	FrontierFile = "frontier.db"
	OutboxFile   = "outbox.db"
)

// Source is where an Item comes from.
type Source string

// Sources of items.
const (
	FromFrontier Source = "frontier"
	FromOutbox   Source = "outbox"
)

// Item is one entry to send: a frontier record or an outbox entry, with
// the kind the receiver files it under.
type Item struct {
	exchange.Entry
	Source Source
	// State is the frontier record's state (FromFrontier).
	State frontier.State
	// Reason is the frontier record's reason (FromFrontier).
	Reason string
	// Peer is the member the outbox entry waited for (FromOutbox).
	Peer string
}

// Dir is a dead node's data directory opened read-only: its frontier and,
// when the node ran in a cluster, its outbox. While it is open, no node
// can open those files.
type Dir struct {
	path   string
	front  *frontier.ReadOnly
	outbox *exchange.OutboxReader // nil: no outbox file (the node ran alone)
}

// ErrLocked is wrapped by OpenDir's error when a running node holds the
// directory's files.
var ErrLocked = frontier.ErrLocked

// OpenDir opens the frontier and the outbox of the data directory dir
// read-only, waiting at most lockTimeout (0: 1s) for each file's shared
// lock. A directory a running node holds is refused (ErrLocked).
func OpenDir(dir string, lockTimeout time.Duration) (*Dir, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("data directory %s: not a directory", dir)
	}
	fp := filepath.Join(dir, FrontierFile)
	if _, err := os.Stat(fp); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("data directory %s holds no %s: not a phasecrawl data directory", dir, FrontierFile)
	}
	d := &Dir{path: dir}
	if d.front, err = frontier.OpenReadOnly(fp, lockTimeout); err != nil {
		return nil, lockedHint(err)
	}
	op := filepath.Join(dir, OutboxFile)
	if _, err := os.Stat(op); err == nil {
		if d.outbox, err = exchange.OpenOutboxReadOnly(op, lockTimeout); err != nil {
			d.front.Close()
			return nil, lockedHint(err)
		}
	}
	return d, nil
}

func lockedHint(err error) error {
	if errors.Is(err, ErrLocked) {
		return fmt.Errorf("%w; salvage is for a node that is gone for good: a node that runs, or will run again, keeps its URLs", err)
	}
	return err
}

// Path returns the directory.
func (d *Dir) Path() string { return d.path }

// HasOutbox reports whether the directory has an outbox (the node ran in a
// cluster).
func (d *Dir) HasOutbox() bool { return d.outbox != nil }

// Close releases the files.
func (d *Dir) Close() error {
	var errs []error
	errs = append(errs, d.front.Close())
	if d.outbox != nil {
		errs = append(errs, d.outbox.Close())
	}
	return errors.Join(errs...)
}

// KindOf is the kind a frontier record is sent as: a COMPLETED record as
// KindDone (its fingerprint: never fetched again), KindReplica when the
// node kept it as another member's replica, or KindCopied when it kept a
// copy of one moved to it; an unfinished one (IN_LIST,
// STALLED, or IN_PROGRESS: being fetched when the node died, and put back in
// the list by a restart) as KindMoved, with its depth.
func KindOf(r frontier.Record) exchange.Kind {
	switch {
	case r.State != frontier.Completed:
		return exchange.KindMoved
	case r.Reason == frontier.ReasonReplica:
		return exchange.KindReplica
	case r.Reason == frontier.ReasonCopied:
		return exchange.KindCopied
	default:
		return exchange.KindDone
	}
}

// Each calls fn with every item to send, in this order: the completed
// fingerprints (frontier records, then the outbox's done and replica
// entries), then the URLs to crawl (the frontier's unfinished records, then
// the outbox's other entries: new and moved URLs, and the outcomes of the
// URLs other members lent the dead node and it fetched, which the
// receiver passes on to their owners). The outbox's lends are left out:
// the URLs the dead node lent are its own, unfinished records. The fingerprints go first so that
// the receiving member knows a page is done before a URL of it arrives.
// fn's error stops the walk and is returned.
func (d *Dir) Each(fn func(Item) error) error {
	done := func(k exchange.Kind) bool {
		return k == exchange.KindDone || k == exchange.KindReplica || k == exchange.KindCopied
	}
	for _, finished := range []bool{true, false} {
		err := d.front.Records(func(s frontier.State) bool { return (s == frontier.Completed) == finished },
			func(r frontier.Record) error {
				return fn(Item{Entry: exchange.Entry{Kind: KindOf(r), NewURL: frontier.NewURL{URL: r.URL, Host: r.Host, Depth: r.Depth, Run: r.Run, Due: r.Due}},
					Source: FromFrontier, State: r.State, Reason: r.Reason})
			})
		if err != nil {
			return err
		}
		if d.outbox == nil {
			continue
		}
		err = d.outbox.Entries(func(peer string, e exchange.Entry) error {
			if done(e.Kind) != finished || e.Kind == exchange.KindLend {
				// A lend (cluster.lend) is the dead node lending a URL of
				// its own: the URL's record is in its frontier, sent above
				// or below as the record it is.
				return nil
			}
			return fn(Item{Entry: e, Source: FromOutbox, Peer: peer})
		})
		if err != nil {
			return err
		}
	}
	return nil
}
