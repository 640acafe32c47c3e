package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/membership"
	"github.com/phasecrawl/phasecrawl/cluster/phase"
)

// TestMinExcludeOutlastsFence: the members drop a member declared dead
// from the schedule only after it has fenced itself (FenceAfter, noticed
// within a heartbeat, after the last heartbeat it could have heard).
func TestMinExcludeOutlastsFence(t *testing.T) {
	for _, after := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second, 10 * time.Minute} {
		hb := membership.HeartbeatInterval(after)
		if hb > after/4 || hb <= 0 {
			t.Errorf("fence_after %s: heartbeat every %s, want at least 4 per fence_after", after, hb)
		}
		if fencedBy := after + 2*hb; membership.MinExclude(after) <= fencedBy {
			t.Errorf("fence_after %s: exclusion after %s, but the node cut off may still start requests until %s", after, membership.MinExclude(after), fencedBy)
		}
	}
	c := &Cluster{cfg: NodeConfig{Timeouts: Timeouts{TakeoverAfter: 0, FenceAfter: 2 * time.Second}}}
	if got := c.excludeAfter(); got != membership.MinExclude(2*time.Second) {
		t.Errorf("takeover_after 0: exclusion after %s, want the minimum %s", got, membership.MinExclude(2*time.Second))
	}
	c.cfg.TakeoverAfter = 2 * time.Minute
	if got := c.excludeAfter(); got != 2*time.Minute {
		t.Errorf("takeover_after 2m: exclusion after %s", got)
	}
}

// TestScheduleQuorumLost: while the quorum is lost the phase clock reports
// closed, and opens again when it is back.
func TestScheduleQuorumLost(t *testing.T) {
	cfg := testScheduleConfig("a")
	cfg.PhaseDuration, cfg.Guard = time.Hour, time.Millisecond
	s, err := phase.NewSchedule(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.SetMembersFrom(0, []string{"a", "b", "c"})
	now := time.Now()
	if st := s.At(now); !st.Open || st.Held {
		t.Fatalf("before: %+v", st)
	}
	s.SetQuorumLost(true)
	if _, _, open := s.Active(now); open {
		t.Fatal("open while the quorum is lost")
	}
	if st := s.At(now); !st.Held || st.Open {
		t.Fatalf("quorum lost: %+v, want held and closed", st)
	}
	s.SetQuorumLost(false)
	if _, _, open := s.Active(now); !open {
		t.Fatal("closed after the quorum is back")
	}
	// A node short of disk space is held off its phase the same way.
	s.SetStorageHold(true)
	if st := s.At(now); !st.Held || st.Open || st.Current() != -1 {
		t.Fatalf("storage hold: %+v, want held and closed", st)
	}
	s.SetStorageHold(false)
	if _, _, open := s.Active(now); !open {
		t.Fatal("closed after the storage hold ended")
	}
}

// TestScheduleNames: a member declared dead stays in the schedule (its
// phase idle) until excludeAfter, and beyond while this node does not see
// a majority of the latest list; a member that left goes at once.
func TestScheduleNames(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name      string
		deadAgo   time.Duration
		state     membership.MemberState
		bHeardAgo time.Duration // b's last heartbeat; b's gossip is a minute old
		want      []string
		dropped   bool
		fenced    bool     // this node is fenced (or rejoining)
		bView     []string // the list b scheduled (membership.NodeMeta.View)
	}{
		{"declared dead a moment ago", 5 * time.Second, membership.StateDead, 0, []string{"a", "b", "c"}, false, false, nil},
		{"dead past takeover_after, majority seen", 20 * time.Second, membership.StateDead, 100 * time.Millisecond, []string{"a", "b"}, true, false, nil},
		{"dead past takeover_after, no majority", 20 * time.Second, membership.StateDead, 3 * time.Second, []string{"a", "b", "c"}, false, false, nil},
		{"left", time.Second, membership.StateLeft, 0, []string{"a", "b"}, false, false, nil},
		{"majority seen, still fenced", 20 * time.Second, membership.StateDead, 0, []string{"a", "b", "c"}, false, true, nil},
		{"declared dead a moment ago, b dropped it", 5 * time.Second, membership.StateDead, 100 * time.Millisecond, []string{"a", "b"}, true, false, []string{"a", "b"}},
		{"declared dead a moment ago, b dropped another", 5 * time.Second, membership.StateDead, 100 * time.Millisecond, []string{"a", "b", "c"}, false, false, []string{"a", "c"}},
		{"declared dead a moment ago, b dropped it, no majority", 5 * time.Second, membership.StateDead, 3 * time.Second, []string{"a", "b", "c"}, false, false, []string{"a", "b"}},
		{"declared dead a moment ago, b dropped it, still fenced", 5 * time.Second, membership.StateDead, 0, []string{"a", "b", "c"}, false, true, []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := testScheduleConfig("a")
			sched, err := phase.NewSchedule(sc)
			if err != nil {
				t.Fatal(err)
			}
			sched.SetMembersFrom(0, []string{"a", "b", "c"})
			b := membership.Member{Name: "b", State: membership.StateAlive, Seen: now.Add(-time.Minute)}
			if tc.bView != nil {
				b.View, b.ViewFrom = RingHash(tc.bView), 7
			}
			ms := membership.Static(map[string]membership.Member{
				"a": {Name: "a", State: membership.StateAlive, Seen: now.Add(-time.Minute)},
				"b": b,
			}, map[string]membership.Member{"c": {Name: "c", State: tc.state, Seen: now.Add(-tc.deadAgo)}})
			c := &Cluster{cfg: NodeConfig{Name: "a", Timeouts: Timeouts{TakeoverAfter: 10 * time.Second, FenceAfter: time.Second}},
				members: ms, sched: sched, q: newQuorum("a", time.Second)}
			c.q.Hear(membership.Heartbeat("b"), now.Add(-tc.bHeardAgo))
			c.q.fenced.Store(tc.fenced)
			got, dropped := c.scheduleNames([]string{"a", "b"}, now)
			if !slices.Equal(got, tc.want) || dropped != tc.dropped {
				t.Errorf("scheduled %v (dropped %v), want %v (dropped %v)", got, dropped, tc.want, tc.dropped)
			}
		})
	}
}

// TestViewsAgree: a node fenced and back in the majority waits until every
// member of its view it sees alive has the same view scheduled and in
// effect, and its own latest view is in effect.
func TestViewsAgree(t *testing.T) {
	view := []string{"a", "b", "c"}
	h := RingHash(view)
	cases := []struct {
		name    string
		b, c    membership.Member
		future  bool // this node's latest view starts at a later epoch
		waiting []string
	}{
		{"all agree", membership.Member{View: h, ViewFrom: 1}, membership.Member{View: h, ViewFrom: 1}, false, nil},
		{"c has another view", membership.Member{View: h, ViewFrom: 1}, membership.Member{View: RingHash([]string{"a", "b"}), ViewFrom: 1}, false, []string{"c"}},
		{"c switches later", membership.Member{View: h, ViewFrom: 1}, membership.Member{View: h, ViewFrom: 1 << 40}, false, []string{"c"}},
		{"ours switches later", membership.Member{View: h, ViewFrom: 1}, membership.Member{View: h, ViewFrom: 1}, true, []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := phase.NewSchedule(testScheduleConfig("a"))
			if err != nil {
				t.Fatal(err)
			}
			sched.SetMembersFrom(0, view)
			if tc.future {
				sched.SetMembersFrom(1<<40, []string{"a", "b", "c", "d"})
			}
			tc.b.Name, tc.b.State, tc.c.Name, tc.c.State = "b", membership.StateAlive, "c", membership.StateAlive
			ms := membership.Static(map[string]membership.Member{"a": {Name: "a", State: membership.StateAlive}, "b": tc.b, "c": tc.c}, map[string]membership.Member{})
			c := &Cluster{cfg: NodeConfig{Name: "a"}, members: ms, sched: sched, q: newQuorum("a", time.Second)}
			ok, waiting := c.viewsAgree(time.Now())
			if ok != (len(tc.waiting) == 0) || !slices.Equal(waiting, tc.waiting) {
				t.Errorf("agree %v, waiting for %v; want waiting for %v", ok, waiting, tc.waiting)
			}
		})
	}
}

// TestSeenHeartbeatsOnly: once a member was heard, only its heartbeats
// count (fresh gossip about it, which may come from a member that declared
// this node dead, does not); a member never heard from counts from when
// gossip told of it alive.
func TestSeenHeartbeatsOnly(t *testing.T) {
	now := time.Now()
	sched, err := phase.NewSchedule(testScheduleConfig("a"))
	if err != nil {
		t.Fatal(err)
	}
	view := []string{"a", "b", "c", "d", "e"}
	sched.SetMembersFrom(0, view)
	ms := membership.Static(map[string]membership.Member{
		"a": {Name: "a", State: membership.StateAlive, Seen: now},
		"b": {Name: "b", State: membership.StateAlive, Seen: now},                        // heard 5s ago, gossip just now
		"c": {Name: "c", State: membership.StateAlive, Seen: now.Add(-time.Minute)},      // heard just now
		"d": {Name: "d", State: membership.StateAlive, Seen: now.Add(-time.Second / 2)},  // never heard: a newcomer
		"e": {Name: "e", State: membership.StateAlive, Seen: now.Add(-10 * time.Second)}, // never heard, long ago
	}, map[string]membership.Member{})
	c := &Cluster{cfg: NodeConfig{Name: "a", Timeouts: Timeouts{FenceAfter: time.Second}}, members: ms, sched: sched, q: newQuorum("a", time.Second)}
	c.q.Hear(membership.Heartbeat("b"), now.Add(-5*time.Second))
	c.q.Hear(membership.Heartbeat("c"), now)
	seen, need := c.seen(view, now)
	if want := []string{"a", "c", "d"}; !slices.Equal(seen, want) || need != 3 {
		t.Errorf("seen %v need %d, want %v need 3", seen, need, want)
	}
}

// TestWithoutUnannounced: a member that joined the gossip but has not
// announced its switch instant yet is left out of the phase schedule's
// list, unless it is in the latest list already (restarted under its name).
func TestWithoutUnannounced(t *testing.T) {
	cases := []struct {
		name   string
		latest []string
		d      membership.Member
		want   []string
	}{
		{"announced join", []string{"a", "b"}, membership.Member{FromAt: 5}, []string{"a", "b", "d"}},
		{"unannounced join", []string{"a", "b"}, membership.Member{}, []string{"a", "b"}},
		{"leave announced by epoch", []string{"a", "b"}, membership.Member{From: 3}, []string{"a", "b", "d"}},
		{"restarted, in the latest list", []string{"a", "b", "d"}, membership.Member{}, []string{"a", "b", "d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := phase.NewSchedule(testScheduleConfig("a"))
			if err != nil {
				t.Fatal(err)
			}
			sched.SetMembersFrom(0, tc.latest)
			tc.d.Name, tc.d.State, tc.d.Started = "d", membership.StateAlive, 1
			ms := membership.Static(map[string]membership.Member{"a": {Name: "a", State: membership.StateAlive, Started: 1},
				"b": {Name: "b", State: membership.StateAlive, Started: 1, FromAt: 1}, "d": tc.d}, map[string]membership.Member{})
			c := &Cluster{cfg: NodeConfig{Name: "a"}, members: ms, sched: sched, q: newQuorum("a", time.Second)}
			if got := c.withoutUnannounced([]string{"a", "b", "d"}); !slices.Equal(got, tc.want) {
				t.Errorf("withoutUnannounced = %v, want %v", got, tc.want)
			}
		})
	}
}

// testScheduleConfig is member self's schedule with 30s phases, one phase,
// 1999 columns and a 5s guard.
func testScheduleConfig(self string) phase.ScheduleConfig {
	return phase.ScheduleConfig{Self: self, PhaseDuration: 30 * time.Second, Phases: 1, Columns: 1999, Guard: 5 * time.Second}
}
