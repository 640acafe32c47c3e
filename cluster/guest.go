package cluster

import (
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// Guest is a URL another member (its owner) lent this node for the phase
// this node works on now (lend.go): the owner keeps the URL's record, this
// node fetches it within its trips to the host and reports the outcome
// (LentOutcome, ReportLent) back to the owner, which settles the record.
// Guests are kept in memory only: one that is not fetched by Until is
// dropped, and the owner lends it again or fetches it itself.
type Guest struct {
	frontier.NewURL
	Tries int
	// Lender is the member that lent it (its owner when it lent it), which
	// keeps the record: the outcome goes back to it.
	Lender string
	// Epoch is the epoch the URL was lent for; Until the local time at
	// which this node's phase in that epoch ends.
	Epoch int64
	Until time.Time
}

// LentOutcome is the result of a guest's fetch, for its owner.
type LentOutcome struct {
	URL    string
	Depth  int
	Lender string
	frontier.Result
}
