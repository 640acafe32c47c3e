package frontier

import "time"

// Guest is a URL another member (its owner) lent a node for the phase that
// node works on now (the cluster's lending): the owner keeps the URL's
// record, the guest's holder fetches it within its trips to the host and
// reports the outcome (LentOutcome) back to the owner, which settles the
// record (SettleLent). Guests are kept in memory only: one that is not
// fetched by Until is dropped, and the owner lends it again or fetches it
// itself. The cluster makes them and the node fetches them: the type is
// here, where both meet.
type Guest struct {
	NewURL
	Tries int
	// Lender is the member that lent it (its owner when it lent it), which
	// keeps the record: the outcome goes back to it.
	Lender string
	// Slot names the phase slot the URL was lent for (the cluster time, unix
	// ns, at which the slot began: an epoch holds more than one when the
	// member list switches inside it); Until is the local time at which the
	// holder's phase in that slot ends.
	Slot  int64
	Until time.Time
}

// LentOutcome is the result of a guest's fetch, for its owner.
type LentOutcome struct {
	URL    string
	Depth  int
	Lender string
	Result
}
