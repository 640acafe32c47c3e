package membership

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Quorum fencing (docs/design/partitions.md). The agreed view is the member
// list this node scheduled last for its phases (Schedule.Latest). A node
// that does not see a majority of it starts no request: the phase clock
// reports it held (Schedule.SetQuorumLost) until it sees a majority again
// and the members agree on the view once more. A member is seen when it sent
// a heartbeat (a small gossip user message, every FenceAfter/5) within the
// last FenceAfter; one never heard from yet counts from when gossip told of
// it alive (a newcomer's first heartbeat is on its way); the node itself
// always counts. The members that see a majority drop a member declared dead from
// their schedule (and work on its hosts) only excludeAfter after they
// declared it dead, by which time it has fenced itself.

// heartbeatMagic starts a heartbeat; the sender's name follows.
var heartbeatMagic = []byte("phasecrawl-hb1:")

// maxHeard bounds the heartbeat senders remembered.
const maxHeard = 4096

// Heard is which members this node hears from: the local time of each
// member's last heartbeat (Hear).
type Heard struct {
	self string

	mu    sync.Mutex
	heard map[string]time.Time // local time of each member's last heartbeat; never pruned (a name heard once never gets the newcomer's grace again)
}

// NewHeard returns the heartbeats heard by the member self: none yet.
func NewHeard(self string) *Heard {
	return &Heard{self: self, heard: map[string]time.Time{}}
}

// HeartbeatInterval is how often a node sends its heartbeat to every member
// it sees alive: five per FenceAfter, so one lost datagram does not fence.
func HeartbeatInterval(after time.Duration) time.Duration {
	return max(after/5, 10*time.Millisecond)
}

// Heartbeat is the message member name sends.
func Heartbeat(name string) []byte { return append(slices.Clone(heartbeatMagic), name...) }

// Hear records a heartbeat (a Members OnMessage callback; never blocks for long).
func (q *Heard) Hear(msg []byte, now time.Time) {
	if !bytes.HasPrefix(msg, heartbeatMagic) {
		return
	}
	name := string(msg[len(heartbeatMagic):])
	if name == "" || name == q.self || len(name) > 512 {
		return
	}
	q.mu.Lock()
	if _, ok := q.heard[name]; ok || len(q.heard) < maxHeard {
		q.heard[name] = now
	}
	q.mu.Unlock()
}

// LastHeard returns the local time of the last heartbeat of each member.
func (q *Heard) LastHeard() map[string]time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]time.Time, len(q.heard))
	for k, v := range q.heard {
		out[k] = v
	}
	return out
}

// Majority is the number of members of a view of n that make a majority.
func Majority(n int) int { return n/2 + 1 }

// SeenOf returns the members of view that self sees at now (self, and
// those whose last sign of life, last(name), is less than after old) and
// how many make a majority of view, or of a longer view of size larger
// that a member gossips. An empty view needs nobody.
func SeenOf(view []string, self string, last func(name string) time.Time, now time.Time, after time.Duration, larger int) (seen []string, need int) {
	if len(view) == 0 {
		return nil, 0
	}
	for _, m := range view {
		if m == self {
			seen = append(seen, m)
			continue
		}
		if t := last(m); !t.IsZero() && now.Sub(t) < after {
			seen = append(seen, m)
		}
	}
	return seen, Majority(max(len(view), larger))
}

// FenceReason is the status and log text for a node that sees seen of the
// view's n members and needs need.
func FenceReason(seen, n, need int) string {
	if need != Majority(n) {
		return fmt.Sprintf("sees %d of %d members of the agreed view; a member's view has more members: a majority is %d", seen, n, need)
	}
	return fmt.Sprintf("sees %d of %d members of the agreed view; a majority is %d", seen, n, need)
}

// MinExclude is the shortest safe exclusion delay for FenceAfter after: a
// member cut off stops hearing the others' heartbeats at the latest one
// heartbeat after they declared it dead; it is fenced FenceAfter later,
// noticed within a heartbeat; one second more covers the spread of the
// death among the members (gossip) and the clocks.
func MinExclude(after time.Duration) time.Duration {
	return after + 2*HeartbeatInterval(after) + time.Second
}

// Send sends msg to the member name at its gossip address (best effort,
// one datagram, encrypted with the cluster key).
func (m *Members) Send(name, addr string, msg []byte) error {
	m.mu.Lock()
	stopped := m.stopped
	m.mu.Unlock()
	if stopped {
		return nil
	}
	return m.ml.SendToAddress(memberlist.Address{Addr: addr, Name: name}, msg)
}
