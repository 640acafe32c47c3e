package frontier

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// lastTwo is a politeness unit for the tests: the host's last two labels.
func lastTwo(host string) string {
	l := strings.Split(host, ".")
	return strings.Join(l[max(len(l)-2, 0):], ".")
}

// TestUnitChangeRekeys: the queue is keyed by the phase of each host's
// politeness unit (Options.Unit). Opened with another UnitName, the
// frontier re-keys the queue for the new unit, so a data directory crawled
// with politeness.key host can go on with domain and back, no URL lost.
func TestUnitChangeRekeys(t *testing.T) {
	var us []NewURL
	for i := range 400 {
		h := fmt.Sprintf("h%d.d%d.test", i%23, i%7)
		us = append(us, NewURL{URL: fmt.Sprintf("http://%s/p/%d", h, i), Host: h})
	}
	const n = 5
	check := func(f *Frontier, unit Unit) {
		t.Helper()
		total := 0
		for p := range n {
			var want []string
			for _, u := range us {
				if PhaseOf(unit.Hash(u.Host), n) == p {
					want = append(want, u.URL)
				}
			}
			if got := urlsOf(scanAll(t, f, p, 0)); !slices.Equal(got, want) {
				t.Fatalf("phase %d: got %d URLs, want %d in insertion order", p, len(got), len(want))
			}
			total += len(want)
		}
		if total != len(us) {
			t.Fatalf("total %d, want %d", total, len(us))
		}
	}
	f := open(t, func(o *Options) { o.Phases = n })
	if _, err := f.Add(ctx, us[:200]); err != nil {
		t.Fatal(err)
	}
	f = reopen(t, f, func(o *Options) { o.Unit, o.UnitName = lastTwo, "domain" })
	if got := f.UnitHash("a.d1.test"); got != HostHash("d1.test") {
		t.Fatalf("UnitHash = %x, want HostHash(d1.test) %x", got, HostHash("d1.test"))
	}
	if _, err := f.Add(ctx, us[200:]); err != nil { // keyed by unit from the start
		t.Fatal(err)
	}
	check(f, lastTwo)
	f = reopen(t, f, nil) // same unit: nothing moves
	check(f, lastTwo)
	f = reopen(t, f, func(o *Options) { o.Unit, o.UnitName = nil, "" })
	defer f.Close()
	check(f, nil)
}
