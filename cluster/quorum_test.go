package cluster

import (
	"slices"
	"testing"
	"time"
)

// TestSeenOf: a node sees itself and the members it heard from within
// FenceAfter; it needs a majority of its agreed view (2 of 2, 2 of 3, 3 of
// 5); an empty view needs nobody.
func TestSeenOf(t *testing.T) {
	now := time.Now()
	after := time.Second
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	cases := []struct {
		name     string
		view     []string
		heard    map[string]time.Time
		seen     []string
		need     int
		quorate  bool
		fenceMsg string
		larger   int // the longest view another member gossips
	}{
		{"alone in a view of one", []string{"a"}, nil, []string{"a"}, 1, true, "sees 1 of 1 members of the agreed view; a majority is 1", 0},
		{"cut off from two", []string{"a", "b", "c"}, map[string]time.Time{"b": ago(2 * time.Second), "c": ago(5 * time.Second)},
			[]string{"a"}, 2, false, "sees 1 of 3 members of the agreed view; a majority is 2", 0},
		{"majority side of three", []string{"a", "b", "c"}, map[string]time.Time{"b": ago(100 * time.Millisecond)},
			[]string{"a", "b"}, 2, true, "sees 2 of 3 members of the agreed view; a majority is 2", 0},
		{"two of two", []string{"a", "b"}, map[string]time.Time{"b": ago(999 * time.Millisecond)}, []string{"a", "b"}, 2, true, "", 0},
		{"one of two is fenced", []string{"a", "b"}, map[string]time.Time{"b": ago(time.Second)}, []string{"a"}, 2, false,
			"sees 1 of 2 members of the agreed view; a majority is 2", 0},
		{"minority of five", []string{"a", "b", "c", "d", "e"}, map[string]time.Time{"b": ago(0)}, []string{"a", "b"}, 3, false, "", 0},
		{"majority of five", []string{"a", "b", "c", "d", "e"}, map[string]time.Time{"b": ago(0), "e": ago(10 * time.Millisecond)},
			[]string{"a", "b", "e"}, 3, true, "", 0},
		{"heard from outside the view", []string{"a", "b", "c"}, map[string]time.Time{"x": ago(0), "y": ago(0)}, []string{"a"}, 2, false, "", 0},
		{"empty view", nil, nil, nil, 0, true, "", 0},
		{"joined the minority side", []string{"a", "b"}, map[string]time.Time{"b": ago(0)}, []string{"a", "b"}, 3, false,
			"sees 2 of 2 members of the agreed view; a member's view has more members: a majority is 3", 5},
		{"a member's view is shorter", []string{"a", "b", "c"}, map[string]time.Time{"b": ago(0)}, []string{"a", "b"}, 2, true, "", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen, need := seenOf(tc.view, "a", func(n string) time.Time { return tc.heard[n] }, now, after, tc.larger)
			if !slices.Equal(seen, tc.seen) || need != tc.need || (len(seen) >= need) != tc.quorate {
				t.Errorf("seen %v need %d; want %v need %d quorate %v", seen, need, tc.seen, tc.need, tc.quorate)
			}
			if tc.fenceMsg != "" {
				if got := fenceReason(len(seen), len(tc.view), need); got != tc.fenceMsg {
					t.Errorf("reason %q, want %q", got, tc.fenceMsg)
				}
			}
		})
	}
}

// TestQuorumHear: only heartbeats count, never from this node itself.
func TestQuorumHear(t *testing.T) {
	q := newQuorum("a", time.Second)
	now := time.Now()
	q.hear(heartbeat("b"), now)
	q.hear(heartbeat("a"), now)
	q.hear([]byte("something else"), now)
	q.hear(heartbeatMagic, now)
	got := q.lastHeard()
	if len(got) != 1 || !got["b"].Equal(now) {
		t.Fatalf("heard %v, want only b at %v", got, now)
	}
}

// TestMinExcludeOutlastsFence: the members drop a member declared dead
// from the schedule only after it has fenced itself (FenceAfter, noticed
// within a heartbeat, after the last heartbeat it could have heard).
func TestMinExcludeOutlastsFence(t *testing.T) {
	for _, after := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second, 10 * time.Minute} {
		hb := heartbeatInterval(after)
		if hb > after/4 || hb <= 0 {
			t.Errorf("fence_after %s: heartbeat every %s, want at least 4 per fence_after", after, hb)
		}
		if fencedBy := after + 2*hb; minExclude(after) <= fencedBy {
			t.Errorf("fence_after %s: exclusion after %s, but the node cut off may still start requests until %s", after, minExclude(after), fencedBy)
		}
	}
	c := &Cluster{cfg: NodeConfig{TakeoverAfter: 0, FenceAfter: 2 * time.Second}}
	if got := c.excludeAfter(); got != minExclude(2*time.Second) {
		t.Errorf("takeover_after 0: exclusion after %s, want the minimum %s", got, minExclude(2*time.Second))
	}
	c.cfg.TakeoverAfter = 2 * time.Minute
	if got := c.excludeAfter(); got != 2*time.Minute {
		t.Errorf("takeover_after 2m: exclusion after %s", got)
	}
}

// TestReconnectTargets: the members declared dead less than the timeout
// ago and, then, the join addresses; not the members that left, nor the
// alive ones, nor this node.
func TestReconnectTargets(t *testing.T) {
	now := time.Now()
	m := func(name, addr string, st MemberState, ago time.Duration) Member {
		return Member{Name: name, Gossip: addr, State: st, Seen: now.Add(-ago)}
	}
	join := []string{"10.0.0.1:7946", "10.0.0.9:7946"}
	cases := []struct {
		name    string
		all     []Member
		timeout time.Duration
		want    []string
	}{
		{"all alive", []Member{m("a", "a:1", StateAlive, 0), m("b", "b:1", StateAlive, 0)}, time.Hour, nil},
		{"one dead", []Member{m("a", "a:1", StateAlive, 0), m("b", "b:1", StateAlive, 0), m("c", "c:1", StateDead, time.Minute)}, time.Hour,
			[]string{"10.0.0.1:7946", "10.0.0.9:7946", "c:1"}},
		{"dead too long", []Member{m("a", "a:1", StateAlive, 0), m("b", "b:1", StateAlive, 0), m("c", "c:1", StateDead, 2*time.Hour)}, time.Hour, nil},
		{"forever", []Member{m("a", "a:1", StateAlive, 0), m("b", "b:1", StateAlive, 0), m("c", "c:1", StateDead, 2*time.Hour)}, 0,
			[]string{"10.0.0.1:7946", "10.0.0.9:7946", "c:1"}},
		{"left", []Member{m("a", "a:1", StateAlive, 0), m("b", "b:1", StateAlive, 0), m("c", "c:1", StateLeft, time.Second)}, time.Hour, nil},
		{"join address of a member alive", []Member{m("a", "a:1", StateAlive, 0), m("b", "10.0.0.9:7946", StateAlive, 0), m("c", "c:1", StateDead, time.Second)}, time.Hour,
			[]string{"10.0.0.1:7946", "c:1"}},
		{"alone", []Member{m("a", "a:1", StateAlive, 0)}, time.Hour, join},
		{"own address", []Member{m("a", "10.0.0.1:7946", StateAlive, 0), m("b", "b:1", StateDead, time.Second)}, time.Hour,
			[]string{"10.0.0.9:7946", "b:1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			self := tc.all[0]
			got := reconnectTargets(tc.all, self.Name, self.Gossip, join, now, tc.timeout)
			if !slices.Equal(got, tc.want) {
				t.Errorf("targets %v, want %v", got, tc.want)
			}
		})
	}
}

// TestScheduleQuorumLost: while the quorum is lost the phase clock reports
// closed, and opens again when it is back.
func TestScheduleQuorumLost(t *testing.T) {
	cfg := DefaultScheduleConfig("a")
	cfg.PhaseDuration, cfg.Guard = time.Hour, time.Millisecond
	s, err := NewSchedule(cfg)
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
	if st := s.At(now); !st.Held || st.Open || current(st) != -1 {
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
		state     MemberState
		bHeardAgo time.Duration // b's last heartbeat; b's gossip is a minute old
		want      []string
		dropped   bool
		fenced    bool     // this node is fenced (or rejoining)
		bView     []string // the list b scheduled (NodeMeta.View)
	}{
		{"declared dead a moment ago", 5 * time.Second, StateDead, 0, []string{"a", "b", "c"}, false, false, nil},
		{"dead past takeover_after, majority seen", 20 * time.Second, StateDead, 100 * time.Millisecond, []string{"a", "b"}, true, false, nil},
		{"dead past takeover_after, no majority", 20 * time.Second, StateDead, 3 * time.Second, []string{"a", "b", "c"}, false, false, nil},
		{"left", time.Second, StateLeft, 0, []string{"a", "b"}, false, false, nil},
		{"majority seen, still fenced", 20 * time.Second, StateDead, 0, []string{"a", "b", "c"}, false, true, nil},
		{"declared dead a moment ago, b dropped it", 5 * time.Second, StateDead, 100 * time.Millisecond, []string{"a", "b"}, true, false, []string{"a", "b"}},
		{"declared dead a moment ago, b dropped another", 5 * time.Second, StateDead, 100 * time.Millisecond, []string{"a", "b", "c"}, false, false, []string{"a", "c"}},
		{"declared dead a moment ago, b dropped it, no majority", 5 * time.Second, StateDead, 3 * time.Second, []string{"a", "b", "c"}, false, false, []string{"a", "b"}},
		{"declared dead a moment ago, b dropped it, still fenced", 5 * time.Second, StateDead, 0, []string{"a", "b", "c"}, false, true, []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := DefaultScheduleConfig("a")
			sched, err := NewSchedule(sc)
			if err != nil {
				t.Fatal(err)
			}
			sched.SetMembersFrom(0, []string{"a", "b", "c"})
			b := Member{Name: "b", State: StateAlive, Seen: now.Add(-time.Minute)}
			if tc.bView != nil {
				b.View, b.ViewFrom = RingHash(tc.bView), 7
			}
			ms := &Members{
				nodes: map[string]Member{
					"a": {Name: "a", State: StateAlive, Seen: now.Add(-time.Minute)},
					"b": b,
				},
				gone: map[string]Member{"c": {Name: "c", State: tc.state, Seen: now.Add(-tc.deadAgo)}},
			}
			c := &Cluster{cfg: NodeConfig{Name: "a", TakeoverAfter: 10 * time.Second, FenceAfter: time.Second},
				members: ms, sched: sched, q: newQuorum("a", time.Second)}
			c.q.hear(heartbeat("b"), now.Add(-tc.bHeardAgo))
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
		b, c    Member
		future  bool // this node's latest view starts at a later epoch
		waiting []string
	}{
		{"all agree", Member{View: h, ViewFrom: 1}, Member{View: h, ViewFrom: 1}, false, nil},
		{"c has another view", Member{View: h, ViewFrom: 1}, Member{View: RingHash([]string{"a", "b"}), ViewFrom: 1}, false, []string{"c"}},
		{"c switches later", Member{View: h, ViewFrom: 1}, Member{View: h, ViewFrom: 1 << 40}, false, []string{"c"}},
		{"ours switches later", Member{View: h, ViewFrom: 1}, Member{View: h, ViewFrom: 1}, true, []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := NewSchedule(DefaultScheduleConfig("a"))
			if err != nil {
				t.Fatal(err)
			}
			sched.SetMembersFrom(0, view)
			if tc.future {
				sched.SetMembersFrom(1<<40, []string{"a", "b", "c", "d"})
			}
			tc.b.Name, tc.b.State, tc.c.Name, tc.c.State = "b", StateAlive, "c", StateAlive
			ms := &Members{nodes: map[string]Member{"a": {Name: "a", State: StateAlive}, "b": tc.b, "c": tc.c}, gone: map[string]Member{}}
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
	sched, err := NewSchedule(DefaultScheduleConfig("a"))
	if err != nil {
		t.Fatal(err)
	}
	view := []string{"a", "b", "c", "d", "e"}
	sched.SetMembersFrom(0, view)
	ms := &Members{nodes: map[string]Member{
		"a": {Name: "a", State: StateAlive, Seen: now},
		"b": {Name: "b", State: StateAlive, Seen: now},                        // heard 5s ago, gossip just now
		"c": {Name: "c", State: StateAlive, Seen: now.Add(-time.Minute)},      // heard just now
		"d": {Name: "d", State: StateAlive, Seen: now.Add(-time.Second / 2)},  // never heard: a newcomer
		"e": {Name: "e", State: StateAlive, Seen: now.Add(-10 * time.Second)}, // never heard, long ago
	}, gone: map[string]Member{}}
	c := &Cluster{cfg: NodeConfig{Name: "a", FenceAfter: time.Second}, members: ms, sched: sched, q: newQuorum("a", time.Second)}
	c.q.hear(heartbeat("b"), now.Add(-5*time.Second))
	c.q.hear(heartbeat("c"), now)
	seen, need := c.seen(view, now)
	if want := []string{"a", "c", "d"}; !slices.Equal(seen, want) || need != 3 {
		t.Errorf("seen %v need %d, want %v need 3", seen, need, want)
	}
}
