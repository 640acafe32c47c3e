package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPhaseOf(t *testing.T) {
	abc := []string{"c", "a", "b"}
	tests := []struct {
		name    string
		member  string
		members []string
		epoch   int64
		nphase  int
		want    int
	}{
		{"rank0 epoch0", "a", abc, 0, 3, 0},
		{"rank1 epoch0", "b", abc, 0, 3, 1},
		{"rank2 epoch0", "c", abc, 0, 3, 2},
		{"rotates", "c", abc, 1, 3, 0},
		{"round robin", "a", abc, 7, 3, 1},
		{"more phases than members", "c", abc, 4, 5, 1},
		{"negative epoch", "a", abc, -1, 3, 2},
		{"large negative epoch", "b", abc, -301, 3, 0},
		{"duplicates and empty names ignored", "c", []string{"a", "a", "", "c"}, 0, 2, 1},
		{"join of a smaller name shifts ranks", "b", []string{"a0", "a", "b", "c"}, 0, 4, 2},
		{"join of a larger name keeps ranks", "b", []string{"a", "b", "c", "d"}, 0, 4, 1},
		{"leave of a smaller name shifts ranks", "c", []string{"b", "c"}, 0, 2, 1},
		{"leave: leaver has no phase", "a", []string{"b", "c"}, 0, 2, -1},
		{"nphase grows with members", "d", []string{"a", "b", "c", "d"}, 3, 4, 2},
		{"nphase 1", "b", abc, 9, 1, 0},
		{"nphase 0", "a", abc, 0, 0, -1},
		{"empty member", "", abc, 0, 3, -1},
		{"no members", "a", nil, 0, 3, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PhaseOf(tc.member, tc.members, tc.epoch, tc.nphase); got != tc.want {
				t.Fatalf("PhaseOf(%q, %q, %d, %d) = %d, want %d", tc.member, tc.members, tc.epoch, tc.nphase, got, tc.want)
			}
		})
	}
}

func TestNPhase(t *testing.T) {
	tests := []struct{ configured, members, columns, want int }{
		{1, 3, 1999, 3},
		{5, 3, 1999, 5},
		{0, 0, 1999, 1},
		{-4, 0, 0, 1},
		{2, 10, 1999, 10},
		{1999, 1, 1999, 2000}, // equal to the columns: bumped
		{1, 1999, 1999, 2000},
		{3998, 2, 1999, 3999}, // a multiple of the columns: bumped too
		{199, 1, 199, 200},
		{1999, 1, 0, 1999}, // check disabled
		{7, 1, 7, 8},
	}
	for _, tc := range tests {
		if got := NPhase(tc.configured, tc.members, tc.columns); got != tc.want {
			t.Errorf("NPhase(%d, %d, %d) = %d, want %d", tc.configured, tc.members, tc.columns, got, tc.want)
		}
	}
}

func TestEpoch(t *testing.T) {
	d := 30 * time.Second
	tests := []struct {
		t    time.Time
		d    time.Duration
		want int64
	}{
		{time.Unix(0, 0), d, 0},
		{time.Unix(29, 999999999), d, 0},
		{time.Unix(30, 0), d, 1},
		{time.Unix(-1, 0), d, -1},
		{time.Unix(0, -1), d, -1},
		{time.Unix(-30, 0), d, -1},
		{time.Unix(-30, -1), d, -2},
		{time.Unix(-31, 0), d, -2},
		{time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC), time.Hour, -1},
		{time.Date(2025, 1, 1, 0, 0, 30, 0, time.UTC), d, 1735689600/30 + 1},
		{time.Date(2025, 1, 1, 0, 0, 30, 0, time.FixedZone("x", 7*3600)), d, (1735689600-7*3600)/30 + 1},
		{time.Unix(100, 0), 0, 0},
		{time.Unix(100, 0), -time.Second, 0},
		{time.Unix(0, 1500), 1000, 1},
		{time.Unix(0, -1500), 1000, -2},
	}
	for _, tc := range tests {
		got := Epoch(tc.t, tc.d)
		if got != tc.want {
			t.Errorf("Epoch(%v, %v) = %d, want %d", tc.t, tc.d, got, tc.want)
		}
		if tc.d > 0 {
			start := EpochStart(got, tc.d)
			if tc.t.Before(start) || !tc.t.Before(start.Add(tc.d)) {
				t.Errorf("%v not in [EpochStart(%d), +%v) = [%v, ...)", tc.t, got, tc.d, start)
			}
		}
	}
}

// TestPhasesNeverCollide is the proof-style sweep: for any member set and
// epoch, distinct members get distinct phases when nphase >= members, every
// phase lies in [0, nphase), and over nphase consecutive epochs each member
// visits every phase exactly once (round robin, §3.3).
func TestPhasesNeverCollide(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 60; trial++ {
		m := 1 + r.IntN(12)
		members := make([]string, m)
		for i := range members {
			members[i] = fmt.Sprintf("n%x", r.Uint32())
		}
		for _, nphase := range []int{m, m + 1 + r.IntN(5), NPhase(r.IntN(3*m), m, 1999)} {
			visits := make(map[string][]int, m)
			for epoch := int64(-300); epoch <= 300; epoch++ {
				seen := make(map[int]string, m)
				for _, mem := range members {
					p := PhaseOf(mem, members, epoch, nphase)
					if p < 0 || p >= nphase {
						t.Fatalf("phase %d out of [0,%d)", p, nphase)
					}
					if other, dup := seen[p]; dup && other != mem {
						t.Fatalf("epoch %d nphase %d: %s and %s both on phase %d (members %q)", epoch, nphase, other, mem, p, members)
					}
					seen[p] = mem
					if epoch >= 0 && epoch < int64(nphase) {
						visits[mem] = append(visits[mem], p)
					}
				}
			}
			for mem, ps := range visits {
				slices.Sort(ps)
				for i, p := range ps {
					if i != p {
						t.Fatalf("%s visits %v over %d epochs, want each phase once", mem, ps, nphase)
					}
				}
			}
		}
	}
}

// fakeClock is a TimeSource with a settable offset and uncertainty.
type fakeClock struct {
	off, unc atomic.Int64
}

func (f *fakeClock) Now() time.Time             { return time.Now().Add(f.Offset()) }
func (f *fakeClock) Offset() time.Duration      { return time.Duration(f.off.Load()) }
func (f *fakeClock) Uncertainty() time.Duration { return time.Duration(f.unc.Load()) }

// at puts cluster time at c (for code that reads time.Now itself).
func (f *fakeClock) at(c time.Time) { f.off.Store(int64(c.Sub(time.Now()))) }

func newTestSchedule(t *testing.T, self string, clk TimeSource) *Schedule {
	t.Helper()
	cfg := DefaultScheduleConfig(self)
	cfg.PhaseDuration = 10 * time.Second
	cfg.Guard = time.Second
	cfg.Clock = clk
	s, err := NewSchedule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScheduleGuardBoundaries(t *testing.T) {
	clk := &fakeClock{}
	clk.unc.Store(int64(100 * time.Millisecond))
	s := newTestSchedule(t, "b", clk)
	s.SetMembersFrom(0, []string{"a", "b", "c"})
	// Guard = 1s + 2×100ms = 1.2s; epoch 5 is [50s, 60s), guard from 58.8s.
	base := time.Unix(50, 0)
	tests := []struct {
		at            time.Duration
		phase, nphase int
		open          bool
	}{
		{0, 0, 3, true}, // (1 + 5) mod 3
		{5 * time.Second, 0, 3, true},
		{8800*time.Millisecond - 1, 0, 3, true},
		{8800 * time.Millisecond, 0, 3, false},
		{10*time.Second - 1, 0, 3, false},
		{10 * time.Second, 1, 3, true}, // swapped
		{-1, 2, 3, false},              // previous epoch's guard
	}
	for _, tc := range tests {
		p, n, open := s.Active(base.Add(tc.at))
		if p != tc.phase || n != tc.nphase || open != tc.open {
			t.Errorf("at +%v: Active = (%d, %d, %v), want (%d, %d, %v)", tc.at, p, n, open, tc.phase, tc.nphase, tc.open)
		}
	}
	st := s.At(base.Add(time.Second))
	if st.Epoch != 5 || !st.NextSwap.Equal(time.Unix(60, 0)) || st.Guard != 1200*time.Millisecond || st.GuardCapped ||
		!st.GuardStart.Equal(time.Unix(58, 8e8)) || !st.RequestDeadline.Equal(time.Unix(59, 8e8)) {
		t.Fatalf("At = %+v", st)
	}
	// A large uncertainty caps the guard at 3/4 of the phase.
	clk.unc.Store(int64(time.Minute))
	if st := s.At(base); st.Guard != 7500*time.Millisecond || !st.GuardCapped || !st.Open {
		t.Fatalf("capped guard: %+v", st)
	}
	if _, _, open := s.Active(base.Add(2500 * time.Millisecond)); open {
		t.Fatal("open inside a capped guard")
	}
}

func TestScheduleOffsetApplied(t *testing.T) {
	clk := &fakeClock{}
	clk.off.Store(int64(time.Hour)) // cluster time is one hour ahead of local
	s := newTestSchedule(t, "a", clk)
	s.SetMembersFrom(0, []string{"a", "b"})
	local := time.Unix(1000, 0) // cluster 4600s: epoch 460
	st := s.At(local)
	if st.Epoch != 460 || st.Phase != 0 || !st.RequestDeadline.Equal(time.Unix(1010, 0)) {
		t.Fatalf("At = %+v", st)
	}
}

func TestScheduleMembershipAtEpochBoundaries(t *testing.T) {
	clk := &fakeClock{}
	ep := func(e int64, in time.Duration) time.Time { return time.Unix(e*10, 0).Add(in) }
	type want struct {
		phase, nphase int
		open          bool
	}
	check := func(s *Schedule, at time.Time, w want) {
		t.Helper()
		p, n, open := s.Active(at)
		if p != w.phase || n != w.nphase || open != w.open {
			t.Fatalf("%s at %v: (%d, %d, %v), want %+v", s.cfg.Self, at.Unix(), p, n, open, w)
		}
	}
	a, b, c := newTestSchedule(t, "b", clk), newTestSchedule(t, "c", clk), newTestSchedule(t, "a", clk)
	all := []*Schedule{a, b, c}
	// No members yet: closed.
	check(a, ep(1, 0), want{0, 1, false})
	for _, s := range all {
		s.SetMembersFrom(2, []string{"b", "c"})
		s.SetMembersFrom(5, []string{"a", "b", "c"}) // a joins at epoch 5: ranks shift, Nphase 2 -> 3
		s.SetMembersFrom(8, []string{"a", "c"})      // b leaves at epoch 8: c's rank shifts, Nphase 3 -> 2
	}
	check(a, ep(1, 0), want{0, 1, false})
	check(a, ep(2, 0), want{0, 2, true}) // b rank 0
	check(b, ep(2, 0), want{1, 2, true}) // c rank 1
	check(c, ep(4, 0), want{0, 2, false})
	check(a, ep(4, 5*time.Second), want{0, 2, true}) // (0+4) mod 2
	check(a, ep(5, 0), want{0, 3, true})             // b now rank 1: (1+5) mod 3
	check(b, ep(5, 0), want{1, 3, true})             // c rank 2: (2+5) mod 3
	check(c, ep(5, 0), want{2, 3, true})             // a rank 0
	check(b, ep(8, 0), want{1, 2, true})             // c rank 1 of {a,c}: (1+8) mod 2
	check(a, ep(8, 0), want{0, 2, false})            // b left
	check(c, ep(8, 0), want{0, 2, true})
	// Distinct phases at every instant for the members in effect.
	for e := int64(2); e < 12; e++ {
		seen := map[int]string{}
		for _, s := range all {
			if p, _, open := s.Active(ep(e, time.Second)); open {
				if o, dup := seen[p]; dup {
					t.Fatalf("epoch %d: %s and %s on phase %d", e, o, s.cfg.Self, p)
				}
				seen[p] = s.cfg.Self
			}
		}
	}
}

func TestScheduleSetMembersTakesEffectNextBoundary(t *testing.T) {
	clk := &fakeClock{}
	s := newTestSchedule(t, "a", clk)
	local := func(c time.Time) time.Time { return c.Add(-clk.Offset()) } // local time of cluster time c
	// Guard is 1s (zero uncertainty); epoch 100 is [1000s, 1010s).
	clk.at(time.Unix(1002, 0))
	if from := s.SetMembers([]string{"a"}); from != 101 {
		t.Fatalf("SetMembers early in epoch 100: from %d, want 101", from)
	}
	if _, _, open := s.Active(local(time.Unix(1005, 0))); open {
		t.Fatal("membership applied before the boundary")
	}
	if p, n, open := s.Active(local(time.Unix(1010, 0))); !open || n != 1 || p != 0 {
		t.Fatalf("at the boundary: (%d, %d, %v)", p, n, open)
	}
	clk.at(time.Unix(1019, 500e6)) // inside epoch 101's guard
	if from := s.SetMembers([]string{"a", "b"}); from != 103 {
		t.Fatalf("SetMembers inside the guard: from %d, want 103", from)
	}
	if _, n, _ := s.Active(local(time.Unix(1025, 0))); n != 1 {
		t.Fatalf("epoch 102: nphase %d, want 1", n)
	}
	if _, n, _ := s.Active(local(time.Unix(1030, 0))); n != 2 {
		t.Fatalf("epoch 103: nphase %d, want 2", n)
	}
	clk.at(time.Unix(1031, 0))
	if from := s.SetMembers([]string{"b", "a"}); from != 103 {
		t.Fatalf("same list again: from %d, want 103 (no change)", from)
	}
}

// Two nodes that learn of the same change on either side of the guard start
// would switch one epoch apart; with the epoch the changing node announced
// (NodeMeta.From) they switch together, and a later update with the same
// list does not move the switch earlier.
func TestScheduleAnnouncedEpoch(t *testing.T) {
	clkA, clkB := &fakeClock{}, &fakeClock{}
	a, b := newTestSchedule(t, "a", clkA), newTestSchedule(t, "b", clkB)
	// Guard 1s, epochs of 10s: epoch 100 is [1000s, 1010s), its guard [1009s, 1010s).
	clkA.at(time.Unix(1002, 0))
	if got := a.AnnounceEpoch(time.Now(), 2*time.Second); got != 101 {
		t.Fatalf("AnnounceEpoch 2s ahead at 1002s: %d, want 101", got)
	}
	if got := a.AnnounceEpoch(time.Now(), 8*time.Second); got != 102 {
		t.Fatalf("AnnounceEpoch 8s ahead at 1002s: %d, want 102 (101's guard starts at 1009s)", got)
	}
	clkA.at(time.Unix(1008, 990e6)) // a learns of it just before the guard
	clkB.at(time.Unix(1009, 10e6))  // b just after
	if fa, fb := a.SetMembers([]string{"a", "b"}), b.SetMembers([]string{"a", "b"}); fa == fb {
		t.Fatalf("without an announced epoch both chose %d; the test no longer shows the split", fa)
	}
	a2, b2 := newTestSchedule(t, "a", clkA), newTestSchedule(t, "b", clkB)
	fa, fb := a2.SetMembersAfter([]string{"a", "b"}, 102), b2.SetMembersAfter([]string{"a", "b"}, 102)
	if fa != 102 || fb != 102 {
		t.Fatalf("announced epoch 102: a from %d, b from %d", fa, fb)
	}
	if f := a2.SetMembers([]string{"b", "a"}); f != 102 {
		t.Fatalf("same list again without the announcement: from %d, want 102 kept", f)
	}
	// Learned too late (after 102's guard started): the node's own choice wins.
	clkB.at(time.Unix(1019, 500e6))
	b3 := newTestSchedule(t, "b", clkB)
	if f := b3.SetMembersAfter([]string{"a", "b"}, 102); f != 103 {
		t.Fatalf("announced epoch already in its guard: from %d, want 103", f)
	}
	if l := a2.Latest(); !slices.Equal(l, []string{"a", "b"}) {
		t.Fatalf("Latest = %v", l)
	}
}

// TestScheduleAgreesOnLatestChoice: members that learn of a failure apart
// (nobody announces an epoch) choose different epochs around a guard start;
// once each hears the other's choice (NodeMeta.ViewFrom) they switch at the
// later one, unless the earlier one's guard has already started.
func TestScheduleAgreesOnLatestChoice(t *testing.T) {
	clkA, clkB := &fakeClock{}, &fakeClock{}
	a, b := newTestSchedule(t, "a", clkA), newTestSchedule(t, "b", clkB)
	// Guard 1s, epochs of 10s: epoch 100 is [1000s, 1010s), its guard [1009s, 1010s).
	clkA.at(time.Unix(990, 0))
	clkB.at(time.Unix(990, 0))
	a.SetMembersFrom(99, []string{"a", "b", "c"})
	b.SetMembersFrom(99, []string{"a", "b", "c"})
	// Each chooses the first epoch whose guard starts 2s ahead (Cluster.update
	// does so for a failure): a learns that c failed 2.1s before 101's
	// guard (1009s), b 1.9s before.
	clkA.at(time.Unix(1006, 900e6))
	clkB.at(time.Unix(1007, 100e6))
	after := []string{"a", "b"}
	fa := a.SetMembersAfter(after, a.AnnounceEpoch(time.Now(), 2*time.Second))
	fb := b.SetMembersAfter(after, b.AnnounceEpoch(time.Now(), 2*time.Second))
	if fa != 101 || fb != 102 {
		t.Fatalf("own choices: a %d, b %d; want 101 and 102", fa, fb)
	}
	clkA.at(time.Unix(1007, 300e6)) // a hears b's choice before 101's guard
	if f := a.SetMembersAfter(after, fb); f != 102 {
		t.Fatalf("a after hearing b's 102: from %d, want 102", f)
	}
	if f := b.SetMembersAfter(after, fa); f != 102 {
		t.Fatalf("b after hearing a's 101: from %d, want 102 kept", f)
	}
	// Both now use the same phase count and different phases at every
	// instant around the switch (without the agreement, a works epoch 101
	// with 2 phases while b still counts 3).
	for _, at := range []time.Time{time.Unix(1015, 0), time.Unix(1019, 500e6), time.Unix(1020, 100e6), time.Unix(1025, 0)} {
		clkA.at(at)
		clkB.at(at)
		if sa, sb := a.At(time.Now()), b.At(time.Now()); sa.NPhase != sb.NPhase || sa.Phase == sb.Phase || sa.Epoch != sb.Epoch {
			t.Fatalf("at %v: a %+v, b %+v", at, sa, sb)
		}
	}
	// Too late: a later choice heard inside the guard of the scheduled
	// epoch does not move it.
	c := newTestSchedule(t, "a", clkA)
	clkA.at(time.Unix(1030, 0))
	c.SetMembersFrom(103, []string{"a", "b"})
	clkA.at(time.Unix(1039, 500e6)) // 103 is in effect
	if f := c.SetMembersAfter([]string{"a", "b"}, 105); f != 103 {
		t.Fatalf("list in effect since 103, later choice 105 heard: from %d, want 103", f)
	}
	d := newTestSchedule(t, "a", clkA)
	clkA.at(time.Unix(1030, 0))
	d.SetMembersFrom(99, []string{"a", "b", "c"})
	d.SetMembersFrom(104, []string{"a", "b"})
	clkA.at(time.Unix(1039, 500e6)) // inside 104's guard [1039s, 1040s)
	if f := d.SetMembersAfter([]string{"a", "b"}, 105); f != 104 {
		t.Fatalf("later choice heard inside 104's guard: from %d, want 104 kept", f)
	}
	clkA.at(time.Unix(1038, 0))
	d.SetMembersFrom(106, []string{"a"})
	if f := d.SetMembersAfter([]string{"a"}, 107); f != 107 {
		t.Fatalf("later choice heard before 106's guard: from %d, want 107", f)
	}
}

func TestScheduleConfigValidate(t *testing.T) {
	mod := func(f func(*ScheduleConfig)) ScheduleConfig {
		c := DefaultScheduleConfig("a")
		f(&c)
		return c
	}
	bad := []ScheduleConfig{
		mod(func(c *ScheduleConfig) { c.Self = "" }),
		mod(func(c *ScheduleConfig) { c.PhaseDuration = time.Millisecond }),
		mod(func(c *ScheduleConfig) { c.Phases = 0 }),
		mod(func(c *ScheduleConfig) { c.Columns = -1 }),
		mod(func(c *ScheduleConfig) { c.Guard = 16 * time.Second }),
		mod(func(c *ScheduleConfig) { c.Guard = -1 }),
	}
	for i, c := range bad {
		if _, err := NewSchedule(c); err == nil {
			t.Errorf("case %d: %+v accepted", i, c)
		}
	}
	if err := DefaultScheduleConfig("a").Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleConcurrent changes the members and reads the phase from
// several goroutines at once (for the race detector): every change is
// scheduled for the next epoch or the one after, every read is a state a
// member of the lists set could be in, and the list set last is the latest.
func TestScheduleConcurrent(t *testing.T) {
	s := newTestSchedule(t, "a", nil) // 10s epochs
	d := s.cfg.PhaseDuration
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(bad) < 10 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	for i := range 4 {
		wg.Go(func() {
			for j := range 500 {
				if i%2 == 0 {
					e := Epoch(time.Now(), d)
					if from := s.SetMembers([]string{"a", fmt.Sprint(j % 3)}); from < e+1 || from > e+3 {
						fail("SetMembers in epoch %d scheduled the list from epoch %d", e, from)
					}
					continue
				}
				if p, n, _ := s.Active(time.Now()); n < 1 || p < 0 || p >= n {
					fail("Active = phase %d of %d", p, n)
				}
				st := s.At(time.Now())
				if st.NPhase < 1 || st.Phase < -1 || st.Phase >= st.NPhase {
					fail("At: phase %d of %d", st.Phase, st.NPhase)
				}
				if st.Members != nil && (len(st.Members) != 2 || !slices.Contains(st.Members, "a")) {
					fail("At: members %v, want a and one other", st.Members)
				}
			}
		})
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("concurrent schedule:\n%s", strings.Join(bad, "\n"))
	}
	// Both writers set {a, 499 mod 3} last.
	if got := s.Latest(); !slices.Equal(got, []string{"1", "a"}) {
		t.Errorf("Latest = %v, want [1 a]", got)
	}
}

// TestScheduleHoldAndBusyHosts: a held node works on no phase (current -1,
// closed) whatever the snapshot says; busyHosts names the hosts of the
// phase it works on, and of the next one shortly before a swap, across a
// change of Nphase at an epoch boundary.
func TestScheduleHoldAndBusyHosts(t *testing.T) {
	clk := &fakeClock{}
	s := newTestSchedule(t, "b", clk) // 10s epochs
	s.SetMembersFrom(0, []string{"a", "b", "c"})
	s.SetMembersFrom(6, []string{"a", "b", "c", "d"}) // a join: Nphase 3 -> 4 from epoch 6
	base := time.Unix(50, 0)                          // epoch 5: b works on (1+5) mod 3 = 0
	s.SetHold(true)
	if p, n, open := s.Active(base); p != 0 || n != 3 || open {
		t.Fatalf("held: Active = (%d, %d, %v), want (0, 3, false)", p, n, open)
	}
	if st := s.At(base); !st.Held || st.Open || current(st) != -1 || st.Phase != 0 {
		t.Fatalf("held: At = %+v, current %d", st, current(st))
	}
	s.SetHold(false)
	if st := s.At(base); st.Held || !st.Open || current(st) != 0 {
		t.Fatalf("released: %+v", st)
	}
	tests := []struct {
		at        time.Duration
		lookahead time.Duration
		busy      []uint64 // host hashes that must be busy
		free      []uint64
	}{
		// Epoch 5, Nphase 3: phase 0 (hashes 0, 3, 6 ...); the swap is 9s away.
		{time.Second, time.Second, []uint64{0, 3, 6}, []uint64{1, 2, 4, 5}},
		// 0.5s before the swap to epoch 6, where b works on (1+6) mod 4 = 3 of 4.
		{9500 * time.Millisecond, time.Second, []uint64{0, 3, 6, 7, 11}, []uint64{1, 2, 4, 5, 8}},
		// The same instant without lookahead: only the current phase.
		{9500 * time.Millisecond, 0, []uint64{0, 3, 6}, []uint64{7, 11}},
		// Epoch 6 itself: Nphase 4, phase 3.
		{10 * time.Second, 0, []uint64{3, 7, 11}, []uint64{0, 1, 2, 4, 6}},
	}
	for _, tc := range tests {
		busy := s.busyHosts(base.Add(tc.at), tc.lookahead)
		for _, h := range tc.busy {
			if !busy(h) {
				t.Errorf("at +%v lookahead %v: host hash %d not busy", tc.at, tc.lookahead, h)
			}
		}
		for _, h := range tc.free {
			if busy(h) {
				t.Errorf("at +%v lookahead %v: host hash %d busy", tc.at, tc.lookahead, h)
			}
		}
	}
	// busyHosts changes no state: the current snapshot is still in effect.
	if p, n, _ := s.Active(base); p != 0 || n != 3 {
		t.Fatalf("after busyHosts: Active = (%d, %d)", p, n)
	}
	// A node not in the snapshot (a leaver) has no busy host.
	s2 := newTestSchedule(t, "z", clk)
	s2.SetMembersFrom(0, []string{"a", "b"})
	if s2.busyHosts(base, time.Second)(0) {
		t.Fatal("a non-member has busy hosts")
	}
}

func TestScheduleFence(t *testing.T) {
	clk := &fakeClock{}
	s := newTestSchedule(t, "b", clk) // 10s epochs
	s.SetMembersFrom(0, []string{"a", "b", "c"})
	base := time.Unix(53, 0) // epoch 5
	if until := s.Fence(base, 2); until != 7 {
		t.Fatalf("Fence = epoch %d, want 7", until)
	}
	// A shorter fence never shortens a longer one.
	if until := s.Fence(base.Add(10*time.Second), 1); until != 7 {
		t.Fatalf("second Fence = epoch %d, want 7", until)
	}
	for _, tt := range []struct {
		at   time.Duration
		open bool
	}{
		{0, false},                      // epoch 5
		{16 * time.Second, false},       // epoch 6
		{17 * time.Second, true},        // epoch 7: fenced no more
		{17*time.Second - 1, false},     // the last instant of epoch 6
		{25 * time.Second, true},        // epoch 7, before its guard
		{26*time.Second + 999e6, false}, // epoch 7, in the guard (1s)
	} {
		st := s.At(base.Add(tt.at))
		held := tt.at < 17*time.Second
		if st.Open != tt.open || st.Held != held {
			t.Errorf("at +%v: open %v held %v, want open %v held %v", tt.at, st.Open, st.Held, tt.open, held)
		}
	}
}

func TestScheduleHandover(t *testing.T) {
	clk := &fakeClock{}
	clk.off.Store(int64(time.Hour))   // cluster time is one hour ahead of local
	s := newTestSchedule(t, "a", clk) // 10s epochs, 1s guard
	s.SetMembersFrom(0, []string{"a", "b"})
	local := time.Unix(1003, 0) // cluster 4603s: epoch 460 began at cluster 4600s = local 1000s
	tests := []struct {
		unc  time.Duration
		want time.Time
	}{
		// The previous owner stopped starting requests 1s before the swap.
		{0, time.Unix(999, 0)},
		// With uncertainty u its guard was 1s+2u long, and its clock may
		// run 2u ahead of ours: still 1s before the swap on our clock.
		{100 * time.Millisecond, time.Unix(999, 0)},
	}
	for _, tt := range tests {
		clk.unc.Store(int64(tt.unc))
		if got := s.Handover(local); !got.Equal(tt.want) {
			t.Errorf("uncertainty %v: Handover = %v, want %v", tt.unc, got.Unix(), tt.want.Unix())
		}
	}
}
