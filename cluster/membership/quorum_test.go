package membership

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
			seen, need := SeenOf(tc.view, "a", func(n string) time.Time { return tc.heard[n] }, now, after, tc.larger)
			if !slices.Equal(seen, tc.seen) || need != tc.need || (len(seen) >= need) != tc.quorate {
				t.Errorf("seen %v need %d; want %v need %d quorate %v", seen, need, tc.seen, tc.need, tc.quorate)
			}
			if tc.fenceMsg != "" {
				if got := FenceReason(len(seen), len(tc.view), need); got != tc.fenceMsg {
					t.Errorf("reason %q, want %q", got, tc.fenceMsg)
				}
			}
		})
	}
}

// TestQuorumHear: only heartbeats count, never from this node itself.
func TestQuorumHear(t *testing.T) {
	q := NewHeard("a")
	now := time.Now()
	q.Hear(Heartbeat("b"), now)
	q.Hear(Heartbeat("a"), now)
	q.Hear([]byte("something else"), now)
	q.Hear(heartbeatMagic, now)
	got := q.LastHeard()
	if len(got) != 1 || !got["b"].Equal(now) {
		t.Fatalf("heard %v, want only b at %v", got, now)
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
			got := ReconnectTargets(tc.all, self.Name, self.Gossip, join, now, tc.timeout)
			if !slices.Equal(got, tc.want) {
				t.Errorf("targets %v, want %v", got, tc.want)
			}
		})
	}
}
