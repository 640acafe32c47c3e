// Package lend keeps the lending's state and its wire formats
// (cluster.lend, docs/design/lending.md): a URL waits in its owner's
// frontier for the owner's turn on its host's phase, up to Nphase epochs;
// the owner lends it meanwhile to the member that works on that phase now,
// which fetches it and reports the outcome back. The record never leaves
// the owner's frontier: the owner only remembers, in memory, "lent to P
// until T" (a Mark in its Ledger) and skips the URL meanwhile. A mark that
// expires, or is lost in a restart, makes the URL lendable and fetchable
// again: nothing is lost, and a page is fetched twice only when its
// outcome was lost with a crash.
//
// The package holds the ledger of marks, the outcomes that came before
// their records, the URLs given back to be lent again, the encodings of
// lends, outcomes and lent records in an exchange entry's Host, and the
// queue of the replicas of settled lent pages. The cluster package runs
// the lend rounds and settles the outcomes with them.
package lend

import "time"

const (
	// Interval is how often the owner lends; URLs arriving from other
	// members start a round at once.
	Interval = 50 * time.Millisecond
	// Scan bounds the records read per member and round.
	Scan = 4096
	// MaxLentPerMember bounds the URLs lent to one member and not settled.
	MaxLentPerMember = 8192
	// MinLeft: a member whose phase's guard starts sooner than this is
	// not lent anything more in that phase.
	MinLeft = 150 * time.Millisecond
	// MaxOutcomeHops bounds how often an outcome is passed on (its entry's
	// Redirects counts the hops), should members' views disagree for a while.
	MaxOutcomeHops = 3
)
