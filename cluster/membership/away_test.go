package membership

import (
	"slices"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/ring"
)

// TestAwayHeld: the URLs a member declared dead a short while ago owns
// (counting it back in the ring) wait; not those of the members alive, not
// after takeover_after, not those of a member that left, and not when
// takeover_after is 0.
func TestAwayHeld(t *testing.T) {
	now := time.Now()
	owners := []string{"a", "b"}
	dead := func(name string, ago time.Duration) Member {
		return Member{Name: name, State: StateDead, Seen: now.Add(-ago)}
	}
	cases := []struct {
		name     string
		all      []Member
		takeover time.Duration
		away     []string // members whose URLs must wait
	}{
		{"none away", []Member{{Name: "a", State: StateAlive}, {Name: "b", State: StateAlive}}, time.Minute, nil},
		{"dead a moment ago", []Member{dead("c", time.Second)}, time.Minute, []string{"c"}},
		{"dead too long ago", []Member{dead("c", 2*time.Minute)}, time.Minute, nil},
		{"left", []Member{{Name: "c", State: StateLeft, Seen: now}}, time.Minute, nil},
		{"takeover at once", []Member{dead("c", time.Second)}, 0, nil},
		{"dead and back already", []Member{dead("b", time.Second)}, time.Minute, nil},
		{"two away", []Member{dead("c", time.Second), dead("d", 30*time.Second)}, time.Minute, []string{"c", "d"}},
		{"itself", []Member{dead("a", time.Second)}, time.Minute, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := AwayView(tc.all, owners, "a", tc.takeover, now)
			if (a == nil) != (len(tc.away) == 0) {
				t.Fatalf("away view %+v, want members %v away", a, tc.away)
			}
			all := append(append([]string(nil), owners...), tc.away...)
			withAway := ring.New(all)
			held, kept := 0, 0
			for fp := uint64(1); fp <= 3000; fp++ {
				fp := fp * 0x9e3779b97f4a7c15
				owner := withAway.Owner(fp)
				want := false
				for _, n := range tc.away {
					want = want || owner == n
				}
				if got := a.Held(fp, now); got != want {
					t.Fatalf("fp %x (owner with the away ones: %s): held=%v, want %v", fp, owner, got, want)
				}
				if want {
					held++
				} else {
					kept++
				}
			}
			if len(tc.away) > 0 && (held == 0 || kept == 0) {
				t.Errorf("held %d, kept %d of 3000", held, kept)
			}
			if a != nil && a.Held(1, now.Add(time.Hour)) {
				t.Error("still held after takeover_after")
			}
		})
	}
}

// TestAwayOver: a member's wait is over when its takeover time passed and
// the next view no longer holds it, whatever event computed that view; not
// while its wait runs, and not when it came back.
func TestAwayOver(t *testing.T) {
	now := time.Now()
	view := func(until map[string]time.Duration) *Away {
		if until == nil {
			return nil
		}
		a := &Away{Until: map[string]time.Time{}}
		for n, d := range until {
			a.Until[n] = now.Add(d)
		}
		return a
	}
	cases := []struct {
		name       string
		prev, next map[string]time.Duration
		owners     []string
		want       []string
	}{
		{"none away", nil, nil, []string{"a", "b"}, nil},
		{"wait ended", map[string]time.Duration{"c": -time.Millisecond}, nil, []string{"a", "b"}, []string{"c"}},
		{"wait ended exactly now", map[string]time.Duration{"c": 0}, nil, []string{"a", "b"}, []string{"c"}},
		{"still waiting", map[string]time.Duration{"c": time.Second}, map[string]time.Duration{"c": time.Second}, []string{"a", "b"}, nil},
		{"came back", map[string]time.Duration{"c": -time.Second}, nil, []string{"a", "b", "c"}, nil},
		{"gone before its wait ended", map[string]time.Duration{"c": time.Second}, nil, []string{"a", "b"}, nil},
		{"one of two", map[string]time.Duration{"c": -time.Second, "d": time.Minute}, map[string]time.Duration{"d": time.Minute}, []string{"a"}, []string{"c"}},
		{"two at once", map[string]time.Duration{"d": -time.Second, "c": -time.Second}, nil, []string{"a"}, []string{"c", "d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := view(tc.prev).Over(view(tc.next), tc.owners, now)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("over = %v, want %v", got, tc.want)
			}
		})
	}
}
