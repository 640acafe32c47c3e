package node

import (
	"sync/atomic"

	"github.com/phasecrawl/phasecrawl/bucket"
)

// refillAsk is a running trip's request to the scheduler for more URLs of
// its host (scheduler.refill), answered exactly once on reply, with the
// URLs (IN_PROGRESS, the trip's like its list) or none.
type refillAsk struct {
	id    bucket.ElementID
	host  string
	room  int
	reply chan []bucket.Item // buffered: the scheduler never waits
	dry   atomic.Bool        // the trip has nothing left to fetch until the answer
}

// askRefill asks the scheduler for more URLs of the host when the list
// wants them (tripList.refillRoom) and the host is fine (refillable). A
// full request channel counts as a refusal.
func (t *hostTrip) askRefill() {
	if !t.refillable() || t.n.refills == nil {
		return
	}
	room := t.list.refillRoom()
	if room == 0 {
		return
	}
	a := &refillAsk{id: t.id, host: t.host, room: room, reply: make(chan []bucket.Item, 1)}
	select {
	case t.n.refills <- a:
		t.refill = a
		t.list.askedFor(room)
	default:
		t.list.refused()
	}
}

// refillable reports whether the host is fine for more of its URLs: not
// down, not backed off, and its pages recorded.
func (t *hostTrip) refillable() bool {
	return t.down == "" && !t.downFree && !t.failed && t.held.reason == ""
}

// takeRefill takes the answer to the refill asked for, if any: at once
// (!wait), or waiting for it until the scheduler has stopped (it answers
// every refill it took before it stops; one it never took holds no URL).
// It reports whether an answer was taken or none was outstanding. An
// answer already there is always taken, so its URLs (IN_PROGRESS, the
// trip's) go back with the trip's list. The URLs of an answer that comes
// once the host is no longer fine go back to the queue untried.
func (t *hostTrip) takeRefill(wait bool) bool {
	a := t.refill
	if a == nil {
		return true
	}
	var items []bucket.Item
	select {
	case items = <-a.reply:
	default:
		if !wait {
			return false
		}
		select {
		case items = <-a.reply:
		case <-t.n.schedDone:
			select {
			case items = <-a.reply:
			default:
				return false
			}
		}
	}
	t.refill = nil
	ok := t.refillable()
	t.list.refilled(items, ok)
	if ok {
		t.n.m.URLsRefilled.Add(float64(len(items)))
	}
	return true
}
