package node

import "github.com/phasecrawl/phasecrawl/bucket"

// tripList is the list of one host trip and what it may still take: the
// dispatched element's URLs, then the new URLs of the host its page writes
// took (frontier.SettleAsyncTaking, while the list is shorter than
// bucket.list_cap, as a dispatched list is), then the refills the
// scheduler gave it (bucket.Want: the host's queued URLs, while no other
// host waits for a worker). It is the trip's bookkeeping alone, without
// I/O: hostTrip asks it what to do next and tells it what happened.
type tripList struct {
	items    []bucket.Item
	next     int // the first not started
	listCap  int
	reserved int // room promised to page writes not answered yet

	// refills: the trip may ask the scheduler for more URLs of its host
	// (the live lane; not once the host looks down, held back or a page
	// could not be recorded). asked is the room of the refill asked for
	// and not answered yet (0: none); noMore is set once a refill was
	// refused, or came back empty once its list was done and its page
	// writes committed: the trip asks no more, and ends with its list (the
	// scan finds the host's later URLs for its next trip). An empty answer
	// before that (the pages still to fetch or record may queue URLs of the
	// host) waits until the pages the list holds are recorded (rearm: the
	// writes to see committed, one a page) and asks again.
	refills bool
	asked   int
	noMore  bool
	rearm   int
	back    []bucket.Item // refilled once the host was no longer fine: not to be fetched

	writes, committed int // page writes submitted, and committed (or failed)
}

// unstarted is how many URLs of the list are not started yet.
func (l *tripList) unstarted() int { return len(l.items) - l.next }

// pop returns the next URL to fetch and counts it started.
func (l *tripList) pop() (bucket.Item, bool) {
	if l.next >= len(l.items) {
		return bucket.Item{}, false
	}
	it := l.items[l.next]
	l.next++
	return it, true
}

// rest returns the URLs not started and counts them started (they go back
// to the queue).
func (l *tripList) rest() []bucket.Item {
	r := append(l.items[l.next:len(l.items):len(l.items)], l.back...)
	l.next, l.back = len(l.items), nil
	return r
}

// all returns every URL the trip holds or held: its list and the URLs it
// gives back untried.
func (l *tripList) all() []bucket.Item {
	if len(l.back) == 0 {
		return l.items
	}
	return append(l.items[:len(l.items):len(l.items)], l.back...)
}

// takingRoom is how many new URLs of the host the next page write may take
// for the trip: the list stays within list_cap in all, URLs promised to
// earlier writes included (none when !ok: the host looks down, or a page
// could not be recorded).
func (l *tripList) takingRoom(ok bool) int {
	if !ok {
		return 0
	}
	return max(l.listCap-len(l.items)-l.reserved, 0)
}

// refillRoom is the room of the refill to ask for now, 0 for none. Only a
// trip whose list reached list_cap asks (its host had that many URLs
// queued, or its pages linked to that many new ones: it has a backlog; a
// small host's trip costs the scheduler no pass), once no more than two
// lists' worth of URLs are left to start, for what tops the trip up to
// four, so the answer (the scheduler's next pass over the queue, up to
// ~10 ms away) comes while the connection is still busy with the URLs
// left.
func (l *tripList) refillRoom() int {
	if !l.refills || l.noMore || l.asked > 0 || l.rearm > 0 || len(l.items) < l.listCap || l.unstarted() > 2*l.listCap {
		return 0
	}
	return 4*l.listCap - l.unstarted()
}

// askedFor records that a refill of room was asked for.
func (l *tripList) askedFor(room int) { l.asked = room }

// refused records that a refill could not be asked for or was refused.
func (l *tripList) refused() { l.asked, l.noMore = 0, true }

// refilled records the answer to the refill asked for: its URLs join the
// list, or, when the host is no longer fine (!ok: down, backed off), go
// back to the queue untried with the rest; none ends the asking.
func (l *tripList) refilled(items []bucket.Item, ok bool) {
	l.asked = 0
	if !ok {
		l.back = append(l.back, items...)
		l.noMore = true
		return
	}
	if len(items) == 0 {
		if l.committed < l.writes || l.unstarted() > 0 {
			l.rearm = l.writes + l.unstarted()
		} else {
			l.noMore = true
		}
		return
	}
	l.items = append(l.items, items...)
}

// wrote records a page write submitted, committedWrite one committed (or
// failed), in order.
func (l *tripList) wrote() { l.writes++ }

func (l *tripList) committedWrite() {
	l.committed++
	if l.rearm > 0 && l.committed >= l.rearm {
		l.rearm = 0
	}
}

// awaitsWrites reports whether the list is done but page writes not
// committed yet may still add to it: URLs of the host they take for the
// trip (reserved), or queue for a refill asked again (rearm).
func (l *tripList) awaitsWrites() bool {
	return l.next == len(l.items) && l.committed < l.writes && (l.reserved > 0 || l.rearm > 0)
}

// waiting reports whether the list is done but a refill is still
// unanswered: the trip waits for the answer before it ends.
func (l *tripList) waiting() bool { return l.next == len(l.items) && l.asked > 0 }
