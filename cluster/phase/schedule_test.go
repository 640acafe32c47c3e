package phase

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/clock"
)

func TestOf(t *testing.T) {
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
			if got := Of(tc.member, tc.members, tc.epoch, tc.nphase); got != tc.want {
				t.Fatalf("Of(%q, %q, %d, %d) = %d, want %d", tc.member, tc.members, tc.epoch, tc.nphase, got, tc.want)
			}
		})
	}
}

func TestCount(t *testing.T) {
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
		if got := Count(tc.configured, tc.members, tc.columns); got != tc.want {
			t.Errorf("Count(%d, %d, %d) = %d, want %d", tc.configured, tc.members, tc.columns, got, tc.want)
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
		for _, nphase := range []int{m, m + 1 + r.IntN(5), Count(r.IntN(3*m), m, 1999)} {
			visits := make(map[string][]int, m)
			for epoch := int64(-300); epoch <= 300; epoch++ {
				seen := make(map[int]string, m)
				for _, mem := range members {
					p := Of(mem, members, epoch, nphase)
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

func newTestSchedule(t *testing.T, self string, clk TimeSource) *Schedule {
	t.Helper()
	cfg := testScheduleConfig(self)
	cfg.PhaseDuration = 10 * time.Second
	cfg.Guard = time.Second
	cfg.Clock = clk
	s, err := NewSchedule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScheduleConfigValidate(t *testing.T) {
	mod := func(f func(*ScheduleConfig)) ScheduleConfig {
		c := testScheduleConfig("a")
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
	if err := testScheduleConfig("a").Validate(); err != nil {
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

// TestScheduleBoundCutBySwitch: a request bound before a switch was
// scheduled inside its slot ends at that switch (less twice the
// uncertainty), not at the epoch's end its deadline named; one bound after
// takes the switch as its deadline; a switch scheduled past the deadline
// changes nothing. The local clock is a Fake an hour or more ahead of the
// real one, so that the contexts' deadlines (on the real clock) are far.
func TestScheduleBoundCutBySwitch(t *testing.T) {
	const unc = 50 * time.Millisecond
	tests := []struct {
		name     string
		switchIn time.Duration // from now, cluster time
		wantCut  bool
	}{
		{"a switch inside the slot", 300 * time.Millisecond, true},
		{"a switch after the slot's end", time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{}
			clk.unc.Store(int64(unc))
			local := clock.NewFake(EpochStart(Epoch(time.Now(), time.Hour)+2, time.Hour).Add(10 * time.Minute))
			cfg := testScheduleConfig("a")
			cfg.PhaseDuration, cfg.Guard, cfg.Clock, cfg.Local = time.Hour, 100*time.Millisecond, clk, local
			s, err := NewSchedule(cfg)
			if err != nil {
				t.Fatal(err)
			}
			now := local.Now()
			epochStart := EpochStart(Epoch(now, time.Hour), time.Hour)
			s.SetMembersFromInstant(epochStart, []string{"a", "b"})
			deadline := s.At(now).RequestDeadline
			ctx, cancel := s.Bound(context.Background(), now)
			defer cancel()
			at := now.Add(tc.switchIn)
			s.SetMembersFromInstant(at, []string{"a", "b", "c"})
			end := deadline // the last instant it may run
			if tc.wantCut {
				end = at.Add(-2 * unc)
			}
			local.Set(end.Add(-1))
			if err := ctx.Err(); err != nil {
				t.Fatalf("ended %v before %v (the switch less twice the uncertainty, or its deadline): %v", end.Sub(local.Now()), end, err)
			}
			if !tc.wantCut {
				return
			}
			local.Advance(1)
			select { // the cut's cancel runs in a goroutine of its own (context.AfterFunc)
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			if err := ctx.Err(); !errors.Is(err, context.Canceled) {
				t.Fatalf("at the switch less twice the uncertainty: %v, want cut (context.Canceled)", err)
			}
			ctx2, cancel2 := s.Bound(context.Background(), local.Now())
			defer cancel2()
			if dl, ok := ctx2.Deadline(); !ok || dl.After(at) {
				t.Fatalf("bound after the switch was known: deadline %v after the switch %v", dl, at)
			}
		})
	}
}

// testScheduleConfig is a member's schedule with the defaults of config.Default
// (cluster.phase_duration 30s, phases 1, bucket.columns 1999) and a 5s guard.
func testScheduleConfig(self string) ScheduleConfig {
	return ScheduleConfig{Self: self, PhaseDuration: 30 * time.Second, Phases: 1, Columns: 1999, Guard: 5 * time.Second}
}
