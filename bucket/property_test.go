package bucket

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// model is a naive reference Bucket: a plain array scanned in full by every
// operation, no indexes. The property test runs it beside the real Bucket.
type model struct {
	cfg Config
	el  []mElem
}

type mElem struct {
	host  string
	hash  uint64
	state State
	items []Item
	due   time.Time // QUEUING: deadline, or when it filled up; TIMEWAIT: expiry
	gen   uint64
}

func (m *model) add(now time.Time, host string, hash uint64, it Item) Outcome {
	base := int(hash%uint64(m.cfg.Columns)) * m.cfg.Rows
	for r := range m.cfg.Rows {
		e := &m.el[base+r]
		if e.state != Free && e.host == host && e.hash == hash {
			if e.state != Queuing || len(e.items) >= m.cfg.ListCap {
				return Rejected
			}
			e.items = append(e.items, it)
			if len(e.items) == m.cfg.ListCap {
				e.due = now
			}
			return Joined
		}
	}
	for r := range m.cfg.Rows {
		e := &m.el[base+r]
		if e.state == Free {
			*e = mElem{host: host, hash: hash, state: Queuing, items: []Item{it}, due: now.Add(m.cfg.MaxQueueWait), gen: e.gen}
			if m.cfg.ListCap == 1 {
				e.due = now
			}
			return Placed
		}
	}
	return Rejected
}

// dueForDispatch returns the indices Dispatch(now) must move.
func (m *model) dueForDispatch(now time.Time) []int {
	var out []int
	for i, e := range m.el {
		if e.state == Queuing && (len(e.items) == m.cfg.ListCap || !now.Before(e.due)) {
			out = append(out, i)
		}
	}
	return out
}

func (m *model) finishLegal(id ElementID) bool {
	if id.Col < 0 || id.Col >= m.cfg.Columns || id.Row < 0 || id.Row >= m.cfg.Rows {
		return false
	}
	e := m.el[id.Col*m.cfg.Rows+id.Row]
	return e.state == Fetching && e.gen == id.Gen
}

func (m *model) next() (time.Time, bool) {
	var t time.Time
	ok := false
	for _, e := range m.el {
		if (e.state == Queuing || e.state == TimeWait) && (!ok || e.due.Before(t)) {
			t, ok = e.due, true
		}
	}
	return t, ok
}

// TestRandomAgainstModel drives the Bucket and the model with the same random
// operations and compares every result and the whole state after each step.
func TestRandomAgainstModel(t *testing.T) {
	seeds, steps := 24, 3000
	if testing.Short() {
		seeds, steps = 6, 1000
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runRandom(t, int64(seed), steps) })
	}
}

func runRandom(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	cfg := Config{Columns: 199, Rows: 4, ListCap: []int{1, 2, 3, 5, 20}[seed%5], MaxQueueWait: 100 * time.Millisecond, Phases: 1}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &model{cfg: cfg, el: make([]mElem, cfg.Columns*cfg.Rows)}

	// 40 hosts crowded into 5 columns (8 per column for 4 rows), plus two
	// hosts whose 64-bit hashes are equal.
	type host struct {
		name string
		hash uint64
	}
	var hosts []host
	for i := range 40 {
		hosts = append(hosts, host{fmt.Sprintf("h%d.test", i), uint64(i%5) + 199*uint64(i)})
	}
	hosts = append(hosts, host{"twin-a.test", 1<<40 + 3}, host{"twin-b.test", 1<<40 + 3})

	accepted := map[uint64]bool{} // FP -> taken by Add
	emitted := map[uint64]int{}   // FP -> times returned by Dispatch or Drain
	var fetching []ElementID      // dispatched, not finished
	var history []ElementID       // every ID ever dispatched
	var lastGen uint64
	tally := map[string]int{} // which paths this run exercised
	now := t0
	fp := uint64(0)

	emit := func(where string, items []Item) {
		for _, it := range items {
			if !accepted[it.FP] {
				t.Fatalf("%s: item %d was never accepted", where, it.FP)
			}
			emitted[it.FP]++
			if emitted[it.FP] > 1 {
				t.Fatalf("%s: item %d came out twice", where, it.FP)
			}
		}
	}
	finish := func(where string, id ElementID, wait time.Duration) {
		legal := m.finishLegal(id)
		err := b.Finish(id, now, wait)
		tally[fmt.Sprint("finish legal=", legal)]++
		if legal != (err == nil) {
			t.Fatalf("%s: Finish(%v) = %v, model says legal=%v", where, id, err, legal)
		}
		if err != nil {
			if !errors.Is(err, ErrBadID) && !errors.Is(err, ErrNotFetching) && !errors.Is(err, ErrStale) {
				t.Fatalf("%s: Finish error %v wraps no sentinel", where, err)
			}
			return
		}
		e := &m.el[id.Col*cfg.Rows+id.Row]
		e.state, e.due = TimeWait, now.Add(max(wait, 0))
		fetching = slices.DeleteFunc(fetching, func(x ElementID) bool { return x == id })
	}

	for step := range steps {
		now = now.Add(time.Duration(rng.Intn(30)) * time.Millisecond)
		where := fmt.Sprintf("seed %d step %d", seed, step)
		switch r := rng.Intn(100); {
		case r < 55: // Add
			h := hosts[rng.Intn(len(hosts))]
			fp++
			it := Item{FP: fp, URL: fmt.Sprintf("http://%s/%d", h.name, fp), Depth: rng.Intn(5)}
			acc := b.Accepts(h.name, h.hash)
			if room := b.Room(h.name, h.hash); (room > 0) != acc || room > cfg.ListCap {
				t.Fatalf("%s: Room(%s) = %d, Accepts %v", where, h.name, room, acc)
			}
			want := m.add(now, h.name, h.hash, it)
			got := b.Add(now, h.name, h.hash, it)
			if got != want {
				t.Fatalf("%s: Add(%s) = %v, model %v", where, h.name, got, want)
			}
			if acc != (got != Rejected) {
				t.Fatalf("%s: Accepts(%s) = %v before Add = %v", where, h.name, acc, got)
			}
			tally[got.String()]++
			if got != Rejected {
				accepted[fp] = true
			}
		case r < 70: // Dispatch
			want := m.dueForDispatch(now)
			got := b.Dispatch(now)
			if len(got) != len(want) {
				t.Fatalf("%s: Dispatch moved %d elements, model %d", where, len(got), len(want))
			}
			seen := map[int]bool{}
			for _, bt := range got {
				i := bt.ID.Col*cfg.Rows + bt.ID.Row
				e := &m.el[i]
				if seen[i] || e.state != Queuing || !slices.Contains(want, i) {
					t.Fatalf("%s: Dispatch returned %v, not due in the model", where, bt.ID)
				}
				seen[i] = true
				if bt.Host != e.host || !slices.Equal(bt.Items, e.items) {
					t.Fatalf("%s: batch %v = %s %v, model %s %v", where, bt.ID, bt.Host, bt.Items, e.host, e.items)
				}
				if bt.ID.Gen <= lastGen {
					t.Fatalf("%s: gen %d not fresh (last %d)", where, bt.ID.Gen, lastGen)
				}
				lastGen = bt.ID.Gen
				emit(where, bt.Items)
				e.state, e.items, e.gen = Fetching, nil, bt.ID.Gen
				fetching = append(fetching, bt.ID)
				history = append(history, bt.ID)
			}
		case r < 82: // legal Finish
			if len(fetching) > 0 {
				finish(where, fetching[rng.Intn(len(fetching))], time.Duration(rng.Intn(150)-10)*time.Millisecond)
			}
		case r < 88: // probably illegal Finish: an old ID, a random slot, or a bad gen
			var id ElementID
			switch {
			case len(history) > 0 && rng.Intn(2) == 0:
				id = history[rng.Intn(len(history))]
			default:
				id = ElementID{Col: rng.Intn(cfg.Columns+2) - 1, Row: rng.Intn(cfg.Rows+2) - 1, Gen: uint64(rng.Intn(int(lastGen) + 2))}
			}
			finish(where, id, time.Duration(rng.Intn(100))*time.Millisecond)
		case r < 98: // Release
			want := 0
			for i := range m.el {
				if e := &m.el[i]; e.state == TimeWait && !now.Before(e.due) {
					*e = mElem{gen: e.gen}
					want++
				}
			}
			if got := b.Release(now); got != want {
				t.Fatalf("%s: Release = %d, model %d", where, got, want)
			}
			tally["released"] += want
		default: // Drain
			var want []Item
			for i := range m.el {
				if e := &m.el[i]; e.state == Queuing {
					want = append(want, e.items...)
					*e = mElem{gen: e.gen}
				}
			}
			got := drainedItems(b.Drain())
			if !sameItems(got, want) {
				t.Fatalf("%s: Drain = %v, model %v", where, got, want)
			}
			emit(where, got)
			tally["drained"] += len(got)
		}
		compare(t, b, m, where)
		checkInvariants(t, b, where)
	}

	for _, k := range []string{"placed", "joined", "rejected", "finish legal=true", "finish legal=false", "released", "drained"} {
		if tally[k] == 0 && (k != "joined" || cfg.ListCap > 1) {
			t.Errorf("seed %d never exercised %q: %v", seed, k, tally)
		}
	}

	// Wind down: everything accepted must come out exactly once.
	now = now.Add(time.Hour)
	for _, bt := range b.Dispatch(now) {
		emit("final dispatch", bt.Items)
		fetching = append(fetching, bt.ID)
	}
	emit("final drain", drainedItems(b.Drain()))
	for _, id := range fetching {
		if err := b.Finish(id, now, 0); err != nil {
			t.Fatalf("final finish: %v", err)
		}
	}
	b.Release(now)
	if c := b.Counts(); c.Free != cfg.Columns*cfg.Rows {
		t.Fatalf("after wind-down Counts = %+v", c)
	}
	if _, ok := b.NextEvent(); ok {
		t.Fatal("after wind-down NextEvent reports an event")
	}
	for f := range accepted {
		if emitted[f] != 1 {
			t.Fatalf("item %d accepted but emitted %d times", f, emitted[f])
		}
	}
	if len(emitted) != len(accepted) {
		t.Fatalf("emitted %d distinct items, accepted %d", len(emitted), len(accepted))
	}
}

// compare checks the Bucket's whole visible state against the model.
func compare(t *testing.T, b *Bucket, m *model, where string) {
	t.Helper()
	views := b.Elements()
	k := 0
	for i, e := range m.el {
		if e.state == Free {
			continue
		}
		if k >= len(views) {
			t.Fatalf("%s: model element %d (%s %v) missing from the Bucket", where, i, e.host, e.state)
		}
		v := views[k]
		k++
		want := ElementView{ID: ElementID{Col: i / m.cfg.Rows, Row: i % m.cfg.Rows, Gen: e.gen}, Host: e.host, HostHash: e.hash, State: e.state, Len: len(e.items)}
		if e.state != Fetching {
			want.At = e.due
		}
		if v != want {
			t.Fatalf("%s: element %+v, model %+v", where, v, want)
		}
	}
	if k != len(views) {
		t.Fatalf("%s: Bucket has %d non-FREE elements, model %d", where, len(views), k)
	}
	gt, gok := b.NextEvent()
	wt, wok := m.next()
	if gok != wok || !gt.Equal(wt) {
		t.Fatalf("%s: NextEvent = %v %v, model %v %v", where, gt.Sub(t0), gok, wt.Sub(t0), wok)
	}
}

func sameItems(a, b []Item) bool {
	key := func(x, y Item) int {
		if x.FP < y.FP {
			return -1
		}
		if x.FP > y.FP {
			return 1
		}
		return 0
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, key)
	slices.SortFunc(b, key)
	return slices.Equal(a, b)
}

// drainedItems is the URLs of the elements Drain returned, in order.
func drainedItems(bs []Batch) []Item {
	var out []Item
	for _, bt := range bs {
		out = append(out, bt.Items...)
	}
	return out
}
