package cluster

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// PhaseOf returns the phase member works on during epoch (KSpider §3.3): the
// member of rank i in the sorted, deduplicated member list works on phase
// (i + epoch) mod nphase. It returns -1 when member is not in members or
// nphase < 1. With nphase >= len(members), two distinct members never get
// the same phase in the same epoch.
func PhaseOf(member string, members []string, epoch int64, nphase int) int {
	if nphase < 1 {
		return -1
	}
	r := Rank(member, members)
	if r < 0 {
		return -1
	}
	return phaseAt(r, epoch, nphase)
}

// phaseAt is (rank + epoch) mod nphase, for any sign of epoch.
func phaseAt(rank int, epoch int64, nphase int) int {
	n := int64(nphase)
	p := (int64(rank)%n + epoch%n) % n
	if p < 0 {
		p += n
	}
	return int(p)
}

// Rank returns member's index in the sorted, deduplicated members (empty
// names ignored), or -1 when it is not there.
func Rank(member string, members []string) int {
	if member == "" {
		return -1
	}
	rank, found := 0, false
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		switch {
		case m == member:
			found = true
		case m < member:
			rank++
		}
	}
	if !found {
		return -1
	}
	return rank
}

// NPhase returns the number of phases for a cluster of members nodes:
// max(configured, members, 1), raised further until it is not a multiple of
// the bucket's column count (a prime), since with Nphase a multiple of
// Columns every host of a phase would fall into a single bucket column.
// columns <= 1 disables that check.
func NPhase(configured, members, columns int) int {
	n := max(configured, members, 1)
	if columns > 1 {
		for n%columns == 0 {
			n++
		}
	}
	return n
}

// Epoch returns floor(clusterTime / phaseDuration) counted from the Unix
// epoch, correct on both sides of it (times in 1678..2262, the range of
// UnixNano). It returns 0 for phaseDuration <= 0.
func Epoch(clusterTime time.Time, phaseDuration time.Duration) int64 {
	if phaseDuration <= 0 {
		return 0
	}
	ns, d := clusterTime.UnixNano(), int64(phaseDuration)
	q := ns / d
	if ns%d != 0 && ns < 0 {
		q--
	}
	return q
}

// EpochStart returns the cluster time at which epoch begins.
func EpochStart(epoch int64, phaseDuration time.Duration) time.Time {
	return time.Unix(0, epoch*int64(phaseDuration)).UTC()
}

// ScheduleConfig configures a Schedule.
type ScheduleConfig struct {
	// Self is this node's member name. Required.
	Self string
	// PhaseDuration is the length of an epoch. Default 30s, valid 100ms..24h.
	PhaseDuration time.Duration
	// Phases is the configured Nphase (--phases). Default 1, valid 1..65536;
	// raised to the member count by NPhase.
	Phases int
	// Columns is the bucket column count; Nphase is never a multiple of it.
	// Default 1999; 0 disables the check.
	Columns int
	// Guard is the longest allowed request. The guard interval before each
	// swap, when no new request may start, is Guard + 2×clock uncertainty
	// (this node's clock may be late and a peer's early by the uncertainty),
	// capped at 3/4 of PhaseDuration so that a node still works. Default 5s,
	// valid 0..PhaseDuration/2.
	Guard time.Duration
	// Clock gives cluster time and its uncertainty. Default: the local clock
	// with zero uncertainty (LocalClock).
	Clock TimeSource
}

// DefaultScheduleConfig returns the defaults for node self.
func DefaultScheduleConfig(self string) ScheduleConfig {
	return ScheduleConfig{Self: self, PhaseDuration: 30 * time.Second, Phases: 1, Columns: 1999, Guard: 5 * time.Second}
}

// Validate checks the configuration; errors name the key and allowed range.
func (c ScheduleConfig) Validate() error {
	switch {
	case c.Self == "":
		return fmt.Errorf("cluster: schedule self: must be a non-empty member name")
	case c.PhaseDuration < 100*time.Millisecond || c.PhaseDuration > 24*time.Hour:
		return fmt.Errorf("cluster: phase_duration=%s: must be in 100ms..24h", c.PhaseDuration)
	case c.Phases < 1 || c.Phases > 65536:
		return fmt.Errorf("cluster: phases=%d: must be in 1..65536", c.Phases)
	case c.Columns < 0:
		return fmt.Errorf("cluster: columns=%d: must be >= 0", c.Columns)
	case c.Guard < 0 || c.Guard > c.PhaseDuration/2:
		return fmt.Errorf("cluster: phase_guard=%s: must be in 0..phase_duration/2 (%s)", c.Guard, c.PhaseDuration/2)
	}
	return nil
}

// PhaseState is the phase rotation at one instant, as seen by this node.
type PhaseState struct {
	Epoch  int64 // floor(clusterTime / PhaseDuration)
	Phase  int   // the phase this node works on; -1 when it is not in the member snapshot
	NPhase int   // number of phases in this epoch
	// Open is false in the guard interval before the swap, and whenever this
	// node is not in the member snapshot in effect: no new request may start.
	Open bool
	// NextSwap is the cluster time at which this epoch ends.
	NextSwap time.Time
	// GuardStart is the cluster time at which the guard interval begins.
	GuardStart time.Time
	// Guard is the guard interval in effect; GuardCapped tells that the
	// clock uncertainty made it longer than allowed and it was capped (the
	// no-overlap guarantee is then weaker).
	Guard       time.Duration
	GuardCapped bool
	// RequestDeadline is the LOCAL wall-clock time by which a request of
	// this phase must be finished (NextSwap − 2×uncertainty, converted to
	// the local clock): pass it to context.WithDeadline.
	RequestDeadline time.Time
	// Members is the member snapshot in effect (sorted; do not modify).
	Members []string
	// Held is true while the cluster layer holds this node off its phase
	// (joining: waiting for the members to move its records to it;
	// leaving: handing its records off). Open is then false.
	Held bool
}

// snapshot is a member list in effect from epoch from on.
type snapshot struct {
	from    int64
	members []string // sorted, deduplicated
}

// Schedule is the cluster's phase rotation for one node, driven by an
// NTP-corrected clock. It implements node.PhaseClock. Membership changes
// take effect only at epoch boundaries. Safe for concurrent use.
type Schedule struct {
	cfg   ScheduleConfig
	clock TimeSource

	mu    sync.Mutex
	snaps []snapshot // ascending by from
	hold  atomic.Bool
	fence atomic.Int64 // cluster epoch before which this node stays off its phase (Fence)

	quorumLost  atomic.Bool // SetQuorumLost
	storageHold atomic.Bool // SetStorageHold
}

// SetQuorumLost holds this node off its phase (Active reports closed) while
// on is true: the cluster layer sets it while the node does not see a
// majority of the member view it agreed on (see quorum.go).
func (s *Schedule) SetQuorumLost(on bool) { s.quorumLost.Store(on) }

// SetStorageHold holds this node off its phase (Active reports closed,
// the status's phase -1) while on is true: the node sets it while its data
// directory is short of free space (storage.min_free). As a fenced member,
// the node then fetches nothing, lends nothing and gives back at once what
// other members lend it; its records stay where they are.
func (s *Schedule) SetStorageHold(on bool) { s.storageHold.Store(on) }

// Fence keeps this node off its phase (Active reports closed) until the
// start of the epoch `epochs` after the current one. The cluster layer calls
// it when the process was frozen (SIGSTOP, a VM pause, a stalled host) for
// long enough that the others may have declared it dead and moved its phase
// to someone else: the member lists converge again and the new assignment
// takes effect at an epoch boundary, so the node waits for those before it
// contacts a web server again.
func (s *Schedule) Fence(now time.Time, epochs int) int64 {
	cnow, _ := s.clusterNow(now)
	until := Epoch(cnow, s.cfg.PhaseDuration) + int64(max(epochs, 1))
	for {
		old := s.fence.Load()
		if old >= until || s.fence.CompareAndSwap(old, until) {
			return max(old, until)
		}
	}
}

// SetHold holds this node off its phase (Active reports closed) while on is
// true, whatever the member snapshot says.
func (s *Schedule) SetHold(on bool) { s.hold.Store(on) }

// NewSchedule returns a Schedule with no members yet: Active reports closed
// until a member list containing Self takes effect.
func NewSchedule(cfg ScheduleConfig) (*Schedule, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	clk := cfg.Clock
	if clk == nil {
		clk = LocalClock{}
	}
	return &Schedule{cfg: cfg, clock: clk}, nil
}

// SetMembers records a new member list seen now by the membership layer. It
// takes effect at the next epoch boundary, or at the one after when the
// change arrives inside the guard interval (so nodes that learn of it a
// little apart still switch together). It returns the epoch from which the
// list is in effect.
func (s *Schedule) SetMembers(members []string) int64 { return s.SetMembersAfter(members, 0) }

// SetMembersAfter is SetMembers for a change whose epoch was announced
// (NodeMeta.From of a joining or leaving member, or NodeMeta.ViewFrom of the
// members that already scheduled the same list): the list takes effect at
// max(notBefore, the epoch SetMembers would choose). Every node that learns
// of the change before that epoch's guard starts then switches at the same
// boundary, however far apart they learned of it. A list equal to the
// latest one keeps its epoch, unless notBefore is later and that epoch's
// guard has not started yet: then the switch moves to notBefore (members
// that chose different epochs for one change agree on the latest).
func (s *Schedule) SetMembersAfter(members []string, notBefore int64) int64 {
	cnow, u := s.clusterNow(time.Now())
	d := s.cfg.PhaseDuration
	e := Epoch(cnow, d)
	from := e + 1
	guard, _ := s.guard(u)
	if !cnow.Before(EpochStart(e+1, d).Add(-guard)) {
		from = e + 2
	}
	return s.setMembers(max(from, notBefore), members, func(scheduled int64) int64 {
		if notBefore > scheduled && cnow.Before(EpochStart(scheduled, d).Add(-guard)) {
			return notBefore
		}
		return scheduled
	})
}

// AnnounceEpoch returns the first epoch whose guard starts at least lead
// after local time now (at least the next one): the epoch a joining or
// leaving node announces (NodeMeta.From) so that every member, having heard
// of the change within lead, applies it at the same boundary.
func (s *Schedule) AnnounceEpoch(now time.Time, lead time.Duration) int64 {
	cnow, u := s.clusterNow(now)
	d := s.cfg.PhaseDuration
	guard, _ := s.guard(u)
	e := Epoch(cnow, d) + 1
	for EpochStart(e, d).Add(-guard).Sub(cnow) < lead+2*max(u, 0) {
		e++
	}
	return e
}

// Latest returns the member list scheduled last (in effect now or from a
// later epoch); nil before any.
func (s *Schedule) Latest() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.snaps); n > 0 {
		return s.snaps[n-1].members
	}
	return nil
}

// SetMembersFrom makes members the snapshot in effect from epoch from on,
// replacing any snapshot scheduled at or after from. Use it when the
// membership layer has agreed on an activation epoch (e.g. carried in node
// metadata); tests use it for exact control. A list equal to the latest
// one is ignored (it keeps its epoch).
func (s *Schedule) SetMembersFrom(from int64, members []string) {
	s.setMembersFrom(from, members)
}

// setMembersFrom is SetMembersFrom returning the epoch the latest list is in
// effect from.
func (s *Schedule) setMembersFrom(from int64, members []string) int64 {
	return s.setMembers(from, members, nil)
}

// setMembers schedules members from epoch from on; when they equal the
// latest list, that list keeps its epoch, or the one move returns for it.
func (s *Schedule) setMembers(from int64, members []string, move func(scheduled int64) int64) int64 {
	ms := slices.Clone(members)
	ms = slices.DeleteFunc(ms, func(m string) bool { return m == "" })
	slices.Sort(ms)
	ms = slices.Compact(ms)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.snaps); n > 0 && slices.Equal(s.snaps[n-1].members, ms) {
		// Already the latest list: keep its epoch (a later call must not
		// move an announced switch earlier), or move it later if allowed.
		if move != nil {
			s.snaps[n-1].from = move(s.snaps[n-1].from)
		}
		return s.snaps[n-1].from
	}
	i := 0
	for i < len(s.snaps) && s.snaps[i].from < from {
		i++
	}
	s.snaps = append(s.snaps[:i], snapshot{from: from, members: ms})
	return from
}

// Active implements node.PhaseClock; now is the local wall clock. While
// this node is not in the member snapshot in effect it returns phase 0 and
// open=false.
func (s *Schedule) Active(now time.Time) (phase, nphase int, open bool) {
	st := s.At(now)
	if st.Phase < 0 {
		return 0, st.NPhase, false
	}
	return st.Phase, st.NPhase, st.Open
}

// At returns the full phase state at local time now.
func (s *Schedule) At(now time.Time) PhaseState {
	cnow, u := s.clusterNow(now)
	st := s.stateAt(cnow, u)
	st.RequestDeadline = now.Add(st.NextSwap.Add(-2 * u).Sub(cnow))
	return st
}

// stateAt computes the state at cluster time cnow with clock uncertainty u.
// It also drops snapshots that can no longer be in effect.
func (s *Schedule) stateAt(cnow time.Time, u time.Duration) PhaseState {
	d := s.cfg.PhaseDuration
	e := Epoch(cnow, d)
	s.mu.Lock()
	var members []string
	k := -1
	for i, sn := range s.snaps {
		if sn.from <= e {
			k = i
		}
	}
	if k >= 0 {
		members = s.snaps[k].members
		s.snaps = s.snaps[k:]
	}
	s.mu.Unlock()

	n := NPhase(s.cfg.Phases, len(members), s.cfg.Columns)
	next := EpochStart(e+1, d)
	guard, capped := s.guard(u)
	st := PhaseState{
		Epoch: e, NPhase: n, Phase: -1, NextSwap: next,
		GuardStart: next.Add(-guard), Guard: guard, GuardCapped: capped,
		Members: members,
	}
	if r, ok := slices.BinarySearch(members, s.cfg.Self); ok {
		st.Phase = phaseAt(r, e, n)
		st.Open = cnow.Before(st.GuardStart)
	}
	if s.hold.Load() || e < s.fence.Load() || s.quorumLost.Load() || s.storageHold.Load() {
		st.Held, st.Open = true, false
	}
	return st
}

// busyHosts returns a test telling whether a host (by its hash) belongs to
// the phase this node works on now, or to the next one when the swap is
// less than lookahead away: the hosts whose URLs its scheduler may hold or
// take soon. It changes no state.
func (s *Schedule) busyHosts(now time.Time, lookahead time.Duration) func(hostHash uint64) bool {
	cnow, _ := s.clusterNow(now)
	e := Epoch(cnow, s.cfg.PhaseDuration)
	epochs := []int64{e}
	if EpochStart(e+1, s.cfg.PhaseDuration).Sub(cnow) < lookahead {
		epochs = append(epochs, e+1)
	}
	type pn struct{ phase, n int }
	var busy []pn
	s.mu.Lock()
	for _, ep := range epochs {
		var members []string
		for _, sn := range s.snaps {
			if sn.from <= ep {
				members = sn.members
			}
		}
		if r, ok := slices.BinarySearch(members, s.cfg.Self); ok {
			n := NPhase(s.cfg.Phases, len(members), s.cfg.Columns)
			busy = append(busy, pn{phaseAt(r, ep, n), n})
		}
	}
	s.mu.Unlock()
	return func(h uint64) bool {
		for _, b := range busy {
			if b.n <= 1 || int(h%uint64(b.n)) == b.phase {
				return true
			}
		}
		return false
	}
}

// guard returns the guard interval for clock uncertainty u.
func (s *Schedule) guard(u time.Duration) (time.Duration, bool) {
	if u < 0 {
		u = 0
	}
	g := s.cfg.Guard + 2*min(u, math.MaxInt64/4)
	if lim := s.cfg.PhaseDuration * 3 / 4; g > lim {
		return lim, true
	}
	return g, false
}

// clusterNow converts local time now to cluster time.
func (s *Schedule) clusterNow(now time.Time) (time.Time, time.Duration) {
	var off time.Duration
	if o, ok := s.clock.(interface{ Offset() time.Duration }); ok {
		off = o.Offset()
	} else {
		off = s.clock.Now().Sub(time.Now())
	}
	return now.Add(off), s.clock.Uncertainty()
}

// TimeSource is a clock giving cluster time: the NTP-corrected Clock, or a
// fake in tests. A TimeSource that also has Offset() time.Duration (cluster
// time minus local time) lets Schedule convert a given local time exactly.
type TimeSource interface {
	Now() time.Time
	Uncertainty() time.Duration
}

// LocalClock is the local wall clock as a TimeSource, with zero offset and
// zero uncertainty.
type LocalClock struct{}

// Now returns time.Now().
func (LocalClock) Now() time.Time { return time.Now() }

// Uncertainty returns 0.
func (LocalClock) Uncertainty() time.Duration { return 0 }

// Offset returns 0.
func (LocalClock) Offset() time.Duration { return 0 }
