package phase

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/clock"
)

// Of returns the phase member works on during epoch (KSpider §3.3): the
// member of rank i in the sorted, deduplicated member list works on phase
// (i + epoch) mod nphase. It returns -1 when member is not in members or
// nphase < 1. With nphase >= len(members), two distinct members never get
// the same phase in the same epoch.
func Of(member string, members []string, epoch int64, nphase int) int {
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

// Count returns the number of phases for a cluster of members nodes:
// max(configured, members, 1), raised further until it is not a multiple of
// the bucket's column count (a prime), since with Nphase a multiple of
// Columns every host of a phase would fall into a single bucket column.
// columns <= 1 disables that check.
func Count(configured, members, columns int) int {
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

// EpochStart returns the cluster time at which epoch begins, saturated at
// the ends of the range of UnixNano.
func EpochStart(epoch int64, phaseDuration time.Duration) time.Time {
	d := int64(phaseDuration)
	switch {
	case d > 0 && epoch > math.MaxInt64/d:
		return time.Unix(0, math.MaxInt64).UTC()
	case d > 0 && epoch < math.MinInt64/d:
		return time.Unix(0, math.MinInt64).UTC()
	}
	return time.Unix(0, epoch*d).UTC()
}

// ScheduleConfig configures a Schedule. Its fields have no defaults of
// their own: a node's come from its configuration (cluster.*, bucket.columns),
// whose defaults config.Default writes.
type ScheduleConfig struct {
	// Self is this node's member name. Required.
	Self string
	// PhaseDuration is the length of an epoch (cluster.phase_duration). Valid 100ms..24h.
	PhaseDuration time.Duration
	// Phases is the configured Nphase (cluster.phases). Valid 1..65536;
	// raised to the member count by Count.
	Phases int
	// Columns is the bucket column count; Nphase is never a multiple of it.
	// 0 disables the check (bucket.columns).
	Columns int
	// Guard is the longest allowed request. The guard interval before each
	// swap, when no new request may start, is Guard + 2×clock uncertainty
	// (this node's clock may be late and a peer's early by the uncertainty),
	// capped at 3/4 of PhaseDuration so that a node still works
	// (cluster.guard). Valid 0..PhaseDuration/2.
	Guard time.Duration
	// Clock gives cluster time and its uncertainty. Default: the local clock
	// with zero uncertainty (LocalClock).
	Clock TimeSource
	// Local is the local clock the schedule reads when it is not given the
	// time (SetMembers, SetMembersAfter, SetMembersAt, the cut of the
	// requests bound before a switch). Default clock.Real.
	Local clock.Clock
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

// State is the phase rotation at one instant, as seen by this node.
type State struct {
	Epoch  int64 // floor(clusterTime / PhaseDuration)
	Phase  int   // the phase this node works on; -1 when it is not in the member snapshot
	NPhase int   // number of phases in this epoch
	// Open is false in the guard interval before the swap, and whenever this
	// node is not in the member snapshot in effect: no new request may start.
	Open bool
	// NextSwap is the cluster time at which this phase slot ends: the end
	// of the epoch, or the switch of the member list scheduled inside it
	// (a join's announced instant), whichever comes first.
	NextSwap time.Time
	// Slot names the phase slot in effect: the cluster time (unix ns) at
	// which it began, the later of the epoch's start and the switch that
	// brought the member list in effect. An epoch holds more than one slot
	// when the member list switches inside it; a lend names its slot, not
	// only its epoch, since one phase has another holder in each.
	Slot int64
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

// Current is the phase this node works on: -1 while it works on none
// (held, or not in the member snapshot).
func (st State) Current() int {
	if st.Held || st.Phase < 0 {
		return -1
	}
	return st.Phase
}

// snapshot is a member list in effect from the cluster time at on: an
// epoch boundary, or a switch instant inside an epoch (switchAt).
type snapshot struct {
	at      time.Time
	members []string // sorted, deduplicated
}

// Schedule is the cluster's phase rotation for one node, driven by an
// NTP-corrected clock. It implements node.PhaseClock. Membership changes
// take effect at epoch boundaries or, for an announced join, at the switch
// instant announced (AnnounceAt), with a guard before it as before a
// boundary. Safe for concurrent use.
type Schedule struct {
	cfg   ScheduleConfig
	clock TimeSource
	local clock.Clock

	mu    sync.Mutex
	snaps []snapshot // ascending by at
	// cut is cancelled, at the switch less twice the uncertainty, when a
	// switch is scheduled after requests bound to it started (Bound):
	// their deadline was the end of a slot that the switch cuts short.
	cut       context.Context
	cutCancel context.CancelFunc
	hold      atomic.Bool
	fence     atomic.Int64 // cluster epoch before which this node stays off its phase (Fence)

	quorumLost  atomic.Bool // SetQuorumLost
	storageHold atomic.Bool // SetStorageHold
}

// SetQuorumLost holds this node off its phase (Active reports closed) while
// on is true: the cluster layer sets it while the node does not see a
// majority of the member view it agreed on (see cluster/quorum.go).
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
	return &Schedule{cfg: cfg, clock: clk, local: clock.Or(cfg.Local)}, nil
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
	return Epoch(s.SetMembersAt(members, EpochStart(notBefore, s.cfg.PhaseDuration), false), s.cfg.PhaseDuration)
}

// SetMembersAt is SetMembersAfter for a change announced for an instant
// (NodeMeta.FromAt of a joining member, NodeMeta.ViewAt of the members that
// scheduled the same list); the zero notBefore announces nothing. An
// announced instant whose guard has not started yet is taken as it is
// (switchAt: the end of its epoch when it falls in that epoch's guard),
// inside an epoch if so announced; one heard too late for that gives way
// to the rule of SetMembers, max(the next boundary that is not in its
// guard, notBefore). A list equal to the latest one keeps its instant,
// unless notBefore is later and that instant's guard has not started yet
// (the members agree on the latest choice). It returns the instant from
// which the list is in effect.
//
// late takes an announced instant heard inside its guard as it is, as
// long as it is still ahead: this node then starts no request before it
// (its slot ends there, its guard has started) and Bound ends the requests
// in flight at it, where the rule of SetMembers would have this node
// switch at a later boundary than the members that heard in time, and
// work with the old list meanwhile while they work with the new one.
func (s *Schedule) SetMembersAt(members []string, notBefore time.Time, late bool) time.Time {
	cnow, u := s.clusterNow(s.local.Now())
	d := s.cfg.PhaseDuration
	e := Epoch(cnow, d)
	guard, _ := s.guard(u)
	from := EpochStart(e+1, d)
	if !cnow.Before(from.Add(-guard)) {
		from = EpochStart(e+2, d)
	}
	if !notBefore.IsZero() {
		notBefore = s.switchAt(notBefore)
	}
	at := from
	switch {
	case !notBefore.IsZero() && cnow.Before(notBefore.Add(-guard)):
		at = notBefore
	case late && cnow.Before(notBefore):
		at = notBefore
	case notBefore.After(at):
		at = notBefore
	}
	return s.setMembers(at, members, func(scheduled time.Time) time.Time {
		if notBefore.After(scheduled) && cnow.Before(scheduled.Add(-guard)) {
			return notBefore
		}
		return scheduled
	})
}

// switchAt returns the instant at which a change planned for at takes
// effect: at itself, or the end of at's epoch when at falls in the guard
// before that end (the configured Guard, the same on every member), since
// nobody works in that guard anyway: the change then costs no more than a
// boundary, and a member never waits a whole epoch for a switch that fell
// into a guard.
func (s *Schedule) switchAt(at time.Time) time.Time {
	d := s.cfg.PhaseDuration
	end := EpochStart(Epoch(at, d)+1, d)
	if !at.Before(end.Add(-s.cfg.Guard)) {
		return end
	}
	return at
}

// AnnounceAt returns the switch instant a joining member announces
// (NodeMeta.FromAt): the guard before it starts at least lead (plus twice
// the clock uncertainty) after local time now, so that every member, having
// heard of the join within lead, stops its requests before it; moved to the
// end of its epoch when it falls in that epoch's guard (switchAt). It is
// rounded up to the millisecond.
func (s *Schedule) AnnounceAt(now time.Time, lead time.Duration) time.Time {
	cnow, u := s.clusterNow(now)
	guard, _ := s.guard(u)
	at := cnow.Add(max(lead, 0) + 2*max(u, 0) + guard)
	if r := at.Truncate(time.Millisecond); r.Before(at) {
		at = r.Add(time.Millisecond)
	}
	return s.switchAt(at)
}

// PhaseDuration returns the length of an epoch.
func (s *Schedule) PhaseDuration() time.Duration { return s.cfg.PhaseDuration }

// ClusterNow returns the cluster time at local time now.
func (s *Schedule) ClusterNow(now time.Time) time.Time {
	c, _ := s.clusterNow(now)
	return c
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

// LatestAt returns the cluster time from which the latest list is in
// effect (zero before any).
func (s *Schedule) LatestAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.snaps); n > 0 {
		return s.snaps[n-1].at
	}
	return time.Time{}
}

// SetMembersFrom makes members the snapshot in effect from epoch from on,
// replacing any snapshot scheduled at or after from. Use it when the
// membership layer has agreed on an activation epoch (e.g. carried in node
// metadata); tests use it for exact control. A list equal to the latest
// one is ignored (it keeps its epoch).
func (s *Schedule) SetMembersFrom(from int64, members []string) {
	s.setMembers(EpochStart(from, s.cfg.PhaseDuration), members, nil)
}

// SetMembersFromInstant is SetMembersFrom for a switch at cluster time at,
// taken as it is (no guard rule): a member alone at its start takes its
// first list at once (nobody else works on any phase with it), and tests
// use it for exact control. It returns the instant the latest list is in
// effect from.
func (s *Schedule) SetMembersFromInstant(at time.Time, members []string) time.Time {
	return s.setMembers(at, members, nil)
}

// setMembers schedules members from cluster time from on; when they equal
// the latest list, that list keeps its instant, or the one move returns
// for it.
func (s *Schedule) setMembers(from time.Time, members []string, move func(scheduled time.Time) time.Time) time.Time {
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
			s.snaps[n-1].at = move(s.snaps[n-1].at)
		}
		return s.snaps[n-1].at
	}
	i := 0
	for i < len(s.snaps) && s.snaps[i].at.Before(from) {
		i++
	}
	s.snaps = append(s.snaps[:i], snapshot{at: from, members: ms})
	s.cutAtLocked(from)
	return from
}

// cutAtLocked ends the requests bound so far (Bound) at the switch at,
// less twice the clock uncertainty, should they still run then: they
// started before this node knew of the switch, with the end of a slot it
// cuts short as their deadline. The requests bound from now on take a new
// context (their deadline knows of the switch). s.mu is held.
func (s *Schedule) cutAtLocked(at time.Time) {
	if s.cut == nil {
		return // no request bound yet
	}
	cnow, u := s.clusterNow(s.local.Now())
	if !at.After(cnow) {
		return
	}
	cancel := s.cutCancel
	s.local.AfterFunc(at.Add(-2*max(u, 0)).Sub(cnow), cancel)
	s.cut, s.cutCancel = nil, nil
}

// Bound implements node.PhaseDeadline: the context of a request started at
// local time now, under parent. It ends at the request deadline of the
// slot in effect (RequestDeadline: the end of the epoch or the next switch
// known now, less twice the clock uncertainty), or at a switch scheduled
// inside that slot later, less twice the uncertainty (a join announced
// while the request runs), whichever comes first. The deadline is the
// context's, on the real clock; the cut at a switch is timed on Local.
func (s *Schedule) Bound(parent context.Context, now time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(parent, s.At(now).RequestDeadline)
	s.mu.Lock()
	if s.cut == nil {
		s.cut, s.cutCancel = context.WithCancel(context.Background())
	}
	cut := s.cut
	s.mu.Unlock()
	stop := context.AfterFunc(cut, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// Deadline implements node.PhaseDeadline: the local time by which a request
// started at now must end so that it does not outlive this node's phase
// slot, as far as this node knows now (Bound also ends it at a switch
// scheduled later inside the slot).
func (s *Schedule) Deadline(now time.Time) time.Time { return s.At(now).RequestDeadline }

// Handover implements node.PhaseDeadline: the latest local time at which the
// member that had this node's current phase in the previous slot (epoch, or
// the part of it before a switch of the member list) may have started a
// request (its guard start; its clock may be 2×uncertainty ahead of ours).
func (s *Schedule) Handover(now time.Time) time.Time {
	cnow, u := s.clusterNow(now)
	g, _ := s.guard(u)
	st, _ := s.stateAt(cnow, u)
	start := time.Unix(0, st.Slot)
	return now.Add(start.Add(-g + 2*max(u, 0)).Sub(cnow))
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
func (s *Schedule) At(now time.Time) State {
	cnow, u := s.clusterNow(now)
	st, end := s.stateAt(cnow, u)
	st.RequestDeadline = now.Add(end.Add(-2 * u).Sub(cnow))
	return st
}

// slotAt returns, at cluster time t, the member list in effect and the
// instant it took effect (zero: none), and the next switch scheduled after
// t (zero: none). It also drops snapshots that can no longer be in effect
// when drop is set (t is now).
func (s *Schedule) slotAt(t time.Time, drop bool) (members []string, at, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := -1
	for i, sn := range s.snaps {
		if sn.at.After(t) {
			next = sn.at
			break
		}
		k = i
	}
	if k >= 0 {
		members, at = s.snaps[k].members, s.snaps[k].at
		if drop {
			s.snaps = s.snaps[k:]
		}
	}
	return members, at, next
}

// stateAt computes the state at cluster time cnow with clock uncertainty u,
// and the cluster time by which a request started now must end (the slot's
// end, or later when this node keeps its phase past it).
func (s *Schedule) stateAt(cnow time.Time, u time.Duration) (State, time.Time) {
	d := s.cfg.PhaseDuration
	e := Epoch(cnow, d)
	members, at, next := s.slotAt(cnow, true)
	n := Count(s.cfg.Phases, len(members), s.cfg.Columns)
	epochEnd := EpochStart(e+1, d)
	end := epochEnd
	if !next.IsZero() && next.Before(end) {
		end = next
	}
	start := EpochStart(e, d)
	if at.After(start) {
		start = at
	}
	guard, capped := s.guard(u)
	st := State{
		Epoch: e, NPhase: n, Phase: -1, NextSwap: end, Slot: start.UnixNano(),
		GuardStart: end.Add(-guard), Guard: guard, GuardCapped: capped,
		Members: members,
	}
	reqEnd := end
	if r, ok := slices.BinarySearch(members, s.cfg.Self); ok {
		st.Phase = phaseAt(r, e, n)
		st.Open = cnow.Before(st.GuardStart)
		if n == 1 && end.Equal(epochEnd) {
			// Alone in the list, with one phase: the boundary changes
			// nothing (nobody else works on any phase), so it needs no
			// guard; only the next switch of the list does.
			reqEnd = epochEnd.Add(d)
			if !next.IsZero() && next.Before(reqEnd) {
				reqEnd = next
			}
			st.Open = cnow.Before(reqEnd.Add(-guard))
		}
	}
	if s.hold.Load() || e < s.fence.Load() || s.quorumLost.Load() || s.storageHold.Load() {
		st.Held, st.Open = true, false
	}
	return st, reqEnd
}

// BusyHosts returns a test telling whether a host (by its hash) belongs to
// the phase this node works on now, or to the next one when the swap is
// less than lookahead away: the hosts whose URLs its scheduler may hold or
// take soon. It changes no state.
func (s *Schedule) BusyHosts(now time.Time, lookahead time.Duration) func(hostHash uint64) bool {
	cnow, _ := s.clusterNow(now)
	d := s.cfg.PhaseDuration
	times := []time.Time{cnow}
	_, _, next := s.slotAt(cnow, false)
	swap := EpochStart(Epoch(cnow, d)+1, d)
	if !next.IsZero() && next.Before(swap) {
		swap = next
	}
	if swap.Sub(cnow) < lookahead {
		times = append(times, swap)
	}
	type pn struct{ phase, n int }
	var busy []pn
	for _, t := range times {
		members, _, _ := s.slotAt(t, false)
		if r, ok := slices.BinarySearch(members, s.cfg.Self); ok {
			n := Count(s.cfg.Phases, len(members), s.cfg.Columns)
			busy = append(busy, pn{phaseAt(r, Epoch(t, d), n), n})
		}
	}
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
		off = s.clock.Now().Sub(s.local.Now())
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
