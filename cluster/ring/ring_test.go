package ring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// testFPs returns n fingerprints of plausible URLs.
func testFPs(n int) []uint64 {
	fps := make([]uint64, n)
	for i := range fps {
		fps[i] = xxhash.Sum64String(fmt.Sprintf("https://host%d.example/page/%d.html", i%997, i))
	}
	return fps
}

func TestOwnerBasics(t *testing.T) {
	tests := []struct {
		name    string
		members []string
		want    string // "" = any non-empty member is fine, checked separately
	}{
		{"nil", nil, ""},
		{"empty", []string{}, ""},
		{"only empty names", []string{"", ""}, ""},
		{"single", []string{"a"}, "a"},
		{"single with dups", []string{"a", "a", ""}, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, fp := range testFPs(100) {
				if got := Owner(fp, tc.members); got != tc.want {
					t.Fatalf("Owner(%x, %q) = %q, want %q", fp, tc.members, got, tc.want)
				}
				if got := New(tc.members).Owner(fp); got != tc.want {
					t.Fatalf("Ring.Owner(%x) = %q, want %q", fp, got, tc.want)
				}
			}
		})
	}
}

func TestOwnerDeterministicOrderFreeAndRingAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 2; n <= 10; n++ {
		members := memberNames(n)
		ring := New(members)
		for _, fp := range testFPs(2000) {
			want := Owner(fp, members)
			if !slices.Contains(members, want) {
				t.Fatalf("owner %q not a member", want)
			}
			shuffled := slices.Clone(members)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			shuffled = append(shuffled, shuffled[0]) // a duplicate changes nothing
			if got := Owner(fp, shuffled); got != want {
				t.Fatalf("n=%d: order changed owner: %q vs %q", n, got, want)
			}
			if got := ring.Owner(fp); got != want {
				t.Fatalf("n=%d: Ring.Owner=%q, Owner=%q", n, got, want)
			}
			if got := Owner(fp, members); got != want {
				t.Fatalf("not deterministic")
			}
			// Exactly one owner: the unique member with the highest weight.
			winners := 0
			for _, m := range members {
				if Weight(fp, m) >= Weight(fp, want) {
					winners++
				}
			}
			if winners != 1 {
				t.Fatalf("fp %x: %d members reach the winning weight", fp, winners)
			}
		}
	}
}

func TestOwnerTieBreakByName(t *testing.T) {
	if !beats(5, "a", 5, "b") || beats(5, "b", 5, "a") || !beats(6, "z", 5, "a") || beats(4, "a", 5, "z") {
		t.Fatal("beats: ties must go to the smaller name, otherwise to the larger weight")
	}
}

func TestOwnerBalance(t *testing.T) {
	fps := testFPs(100000)
	for n := 2; n <= 10; n++ {
		counts := map[string]int{}
		ring := New(memberNames(n))
		for _, fp := range fps {
			counts[ring.Owner(fp)]++
		}
		mean := float64(len(fps)) / float64(n)
		for m, c := range counts {
			if dev := (float64(c) - mean) / mean; dev > 0.05 || dev < -0.05 {
				t.Errorf("n=%d: %s owns %d URLs, %.1f%% off the mean %.0f", n, m, c, 100*dev, mean)
			}
		}
	}
}

func TestOwnerJoinMovesOnlyToNewcomer(t *testing.T) {
	fps := testFPs(100000)
	for n := 1; n <= 9; n++ {
		before := memberNames(n)
		newcomer := fmt.Sprintf("joiner-%d", n)
		after := append(slices.Clone(before), newcomer)
		rb, ra := New(before), New(after)
		moved := 0
		for _, fp := range fps {
			o1, o2 := rb.Owner(fp), ra.Owner(fp)
			if o1 == o2 {
				continue
			}
			moved++
			if o2 != newcomer {
				t.Fatalf("n=%d: fp %x moved %s -> %s, not to the newcomer", n, fp, o1, o2)
			}
		}
		frac, want := float64(moved)/float64(len(fps)), 1/float64(n+1)
		if frac < want*0.9 || frac > want*1.1 {
			t.Errorf("n=%d -> %d: moved %.3f of URLs, want ~%.3f", n, n+1, frac, want)
		}
	}
}

func TestOwnerLeaveMovesOnlyLeaversURLs(t *testing.T) {
	fps := testFPs(50000)
	for n := 2; n <= 10; n++ {
		before := memberNames(n)
		for k, leaver := range before {
			after := slices.Delete(slices.Clone(before), k, k+1)
			rb, ra := New(before), New(after)
			for _, fp := range fps {
				o1, o2 := rb.Owner(fp), ra.Owner(fp)
				if (o1 != o2) != (o1 == leaver) {
					t.Fatalf("n=%d leaver=%s: fp %x %s -> %s", n, leaver, fp, o1, o2)
				}
			}
		}
	}
}

func TestRingMembers(t *testing.T) {
	r := New([]string{"c", "a", "", "b", "a"})
	if got := r.Members(); !slices.Equal(got, []string{"a", "b", "c"}) || r.Len() != 3 {
		t.Fatalf("Members = %q, Len = %d", got, r.Len())
	}
	if !r.Has("b") || r.Has("d") || r.Has("") {
		t.Fatal("Has")
	}
	if New(nil).OwnerIndex(1) != -1 {
		t.Fatal("empty ring OwnerIndex must be -1")
	}
}

func BenchmarkRingOwner(b *testing.B) {
	fps := testFPs(4096)
	for _, n := range []int{3, 10} {
		ring := New(memberNames(n))
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				_ = ring.Owner(fps[i&4095])
				i++
			}
		})
	}
}

func BenchmarkOwner(b *testing.B) {
	fps := testFPs(4096)
	for _, n := range []int{3, 10} {
		members := memberNames(n)
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				_ = Owner(fps[i&4095], members)
				i++
			}
		})
	}
}

// TestOwnerMembershipTable walks a sequence of membership changes (joins,
// a failure, a restart under the same name, a graceful leave) and checks
// where every URL's owner may go at each step: only to a newcomer on a
// join, only away from the member that goes on a leave, and exactly back
// to the previous owners when a member returns under its name.
func TestOwnerMembershipTable(t *testing.T) {
	fps := testFPs(20000)
	steps := []struct {
		name    string
		members []string
		joined  string // the only member URLs may move to ("" = none)
		gone    string // the only member URLs may move from ("" = none)
		sameAs  int    // index of an earlier step whose owners must come back (-1: none)
	}{
		{"start", []string{"n1", "n2", "n3"}, "", "", -1},
		{"join n4", []string{"n1", "n2", "n3", "n4"}, "n4", "", -1},
		{"n2 killed", []string{"n1", "n3", "n4"}, "", "n2", -1},
		{"n2 restarts with the same name", []string{"n1", "n2", "n3", "n4"}, "n2", "", 1},
		{"n1 leaves", []string{"n2", "n3", "n4"}, "", "n1", -1},
		{"n1 back, n4 leaves", []string{"n1", "n2", "n3"}, "", "", 0},
	}
	prev := make([][]string, len(steps))
	for i, st := range steps {
		ring := New(st.members)
		prev[i] = make([]string, len(fps))
		moved := 0
		for k, fp := range fps {
			o := ring.Owner(fp)
			prev[i][k] = o
			if i == 0 {
				continue
			}
			was := prev[i-1][k]
			if o != was {
				moved++
				if st.joined != "" && o != st.joined {
					t.Fatalf("%s: %x moved %s -> %s, not to %s", st.name, fp, was, o, st.joined)
				}
				if st.gone != "" && was != st.gone {
					t.Fatalf("%s: %x moved %s -> %s, not away from %s", st.name, fp, was, o, st.gone)
				}
			}
			if st.sameAs >= 0 && o != prev[st.sameAs][k] {
				t.Fatalf("%s: %x owned by %s, was %s at %q", st.name, fp, o, prev[st.sameAs][k], steps[st.sameAs].name)
			}
		}
		if i > 0 {
			if frac := float64(moved) / float64(len(fps)); (st.joined != "" || st.gone != "") && (frac < 0.15 || frac > 0.35) {
				t.Errorf("%s: %.2f of the URLs moved, want about 1/%d", st.name, frac, len(st.members))
			}
		}
	}
	if Hash([]string{"b", "a", "a"}) != Hash([]string{"a", "b"}) || Hash([]string{"a"}) == Hash([]string{"a", "b"}) {
		t.Fatal("Hash must depend on the member set only")
	}
}

// The second-ranked member of a URL is the one that owns it once the owner
// is gone: the replica of a COMPLETED record is there already when the
// owner fails.
func TestRingTop2IsOwnerWithoutFirst(t *testing.T) {
	members := []string{"a", "b", "c", "d", "e"}
	r := New(members)
	for fp := uint64(1); fp < 20000; fp += 7 {
		first, second := r.Top2(fp * 0x9e3779b97f4a7c15)
		f := fp * 0x9e3779b97f4a7c15
		if first != r.Owner(f) {
			t.Fatalf("fp %x: Top2 first %q, Owner %q", f, first, r.Owner(f))
		}
		rest := slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == first })
		if want := New(rest).Owner(f); second != want {
			t.Fatalf("fp %x: second %q, owner without %q is %q", f, second, first, want)
		}
	}
	if f, s := New([]string{"a"}).Top2(5); f != "a" || s != "" {
		t.Fatalf("one member: Top2 = %q, %q", f, s)
	}
	if f, s := New(nil).Top2(5); f != "" || s != "" {
		t.Fatalf("empty ring: Top2 = %q, %q", f, s)
	}
}

// memberNames returns n member names: node1..nodeN.
func memberNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node%d", i+1)
	}
	return names
}
