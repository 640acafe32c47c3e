package bucket

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// testConfig: 199 columns × 4 rows, lists of 3, 100ms queue wait.
func testConfig() Config {
	return Config{Columns: 199, Rows: 4, ListCap: 3, MaxQueueWait: 100 * time.Millisecond, Phases: 1}
}

type op int

const (
	opAdd op = iota
	opDispatch
	opFinish
	opRelease
	opDrain
	opNone // only check expectations
)

// Which ID a finish step uses.
const (
	idLast = "last" // the host's latest dispatched ID
	idPrev = "prev" // the host's dispatched ID before that
	idView = "view" // the ID of the host's current element (Lookup), whatever its state
	idRaw  = "raw"  // step.raw
)

type step struct {
	ms   int    // time of the operation, ms after t0
	op   op     //
	host string // add, finish
	n    int    // add: how many URLs (default 1), all expected to give want

	want Outcome // add

	batches []string // dispatch: "host:len" in the expected order

	id   string        // finish: idLast (default), idPrev, idView, idRaw
	raw  ElementID     // finish with idRaw
	wait time.Duration // finish
	err  error         // finish: expected errors.Is target (nil = success)

	freed   int // release
	drained int // drain: number of items returned

	states map[string]State // after the step; Free means "no element"
	lens   map[string]int   // after the step
	counts *Counts          // after the step
	next   string           // after the step: "" no check, "none", or a duration after t0 ("150ms")
}

type scenario struct {
	name   string
	cfg    func(*Config)
	hashes map[string]uint64 // default: fnv64a(host)
	steps  []step
}

func fnvHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func cnt(free, queuing, fetching, timewait int) *Counts {
	return &Counts{Free: free, Queuing: queuing, Fetching: fetching, TimeWait: timewait}
}

const total = 199 * 4 // elements in testConfig

func TestScenarios(t *testing.T) {
	// Four hosts in column 7, one in column 8 and two hosts with the very same hash.
	col7 := map[string]uint64{"c0": 7, "c1": 7 + 199, "c2": 7 + 2*199, "c3": 7 + 3*199, "c4": 7 + 4*199, "o": 8, "x": 42, "y": 42}
	scenarios := []scenario{
		{name: "full cycle FREE->QUEUING->FETCHING->TIMEWAIT->FREE", steps: []step{
			{ms: 0, op: opNone, counts: cnt(total, 0, 0, 0), next: "none"},
			{ms: 0, op: opAdd, host: "a", want: Placed, states: map[string]State{"a": Queuing}, lens: map[string]int{"a": 1}, counts: cnt(total-1, 1, 0, 0), next: "100ms"},
			{ms: 10, op: opAdd, host: "a", want: Joined, lens: map[string]int{"a": 2}, next: "100ms"},
			{ms: 99, op: opDispatch, batches: nil, states: map[string]State{"a": Queuing}},
			{ms: 100, op: opDispatch, batches: []string{"a:2"}, states: map[string]State{"a": Fetching}, lens: map[string]int{"a": 0}, counts: cnt(total-1, 0, 1, 0), next: "none"},
			{ms: 100, op: opDispatch, batches: nil},
			{ms: 120, op: opFinish, host: "a", wait: 200 * time.Millisecond, states: map[string]State{"a": TimeWait}, counts: cnt(total-1, 0, 0, 1), next: "320ms"},
			{ms: 319, op: opRelease, freed: 0, states: map[string]State{"a": TimeWait}},
			{ms: 320, op: opRelease, freed: 1, states: map[string]State{"a": Free}, counts: cnt(total, 0, 0, 0), next: "none"},
			{ms: 330, op: opAdd, host: "a", want: Placed, states: map[string]State{"a": Queuing}, lens: map[string]int{"a": 1}},
		}},
		{name: "list full is dispatched at once, then rejects", steps: []step{
			{ms: 0, op: opAdd, host: "a", want: Placed},
			{ms: 5, op: opAdd, host: "a", n: 2, want: Joined, lens: map[string]int{"a": 3}, next: "5ms"},
			{ms: 6, op: opAdd, host: "a", n: 3, want: Rejected, lens: map[string]int{"a": 3}},
			{ms: 7, op: opDispatch, batches: []string{"a:3"}, next: "none"},
		}},
		{name: "list cap 1 places a due element", cfg: func(c *Config) { c.ListCap = 1 }, steps: []step{
			{ms: 3, op: opAdd, host: "a", want: Placed, next: "3ms"},
			{ms: 3, op: opAdd, host: "a", want: Rejected},
			{ms: 3, op: opDispatch, batches: []string{"a:1"}},
		}},
		{name: "max queue wait dispatches full first then by deadline", steps: []step{
			{ms: 0, op: opAdd, host: "a", want: Placed},
			{ms: 10, op: opAdd, host: "b", want: Placed},
			{ms: 20, op: opAdd, host: "c", want: Placed},
			{ms: 30, op: opAdd, host: "c", n: 2, want: Joined, next: "30ms"},
			{ms: 100, op: opDispatch, batches: []string{"c:3", "a:1"}, states: map[string]State{"a": Fetching, "b": Queuing, "c": Fetching}, next: "110ms"},
			{ms: 500, op: opDispatch, batches: []string{"b:1"}, next: "none"},
		}},
		{name: "host busy", steps: []step{
			{ms: 0, op: opAdd, host: "a", want: Placed},
			{ms: 100, op: opDispatch, batches: []string{"a:1"}},
			{ms: 110, op: opAdd, host: "a", want: Rejected, states: map[string]State{"a": Fetching}},
			{ms: 120, op: opFinish, host: "a", wait: 50 * time.Millisecond},
			{ms: 130, op: opAdd, host: "a", want: Rejected, states: map[string]State{"a": TimeWait}},
			{ms: 170, op: opRelease, freed: 1},
			{ms: 170, op: opAdd, host: "a", want: Placed, states: map[string]State{"a": Queuing}},
		}},
		{name: "column full rejects, other columns unaffected", hashes: col7, steps: []step{
			{ms: 0, op: opAdd, host: "c0", want: Placed},
			{ms: 0, op: opAdd, host: "c1", want: Placed},
			{ms: 0, op: opAdd, host: "c2", want: Placed},
			{ms: 0, op: opAdd, host: "c3", want: Placed, counts: cnt(total-4, 4, 0, 0)},
			{ms: 1, op: opAdd, host: "c4", want: Rejected, states: map[string]State{"c4": Free}},
			{ms: 1, op: opAdd, host: "c1", want: Joined, lens: map[string]int{"c1": 2}},
			{ms: 1, op: opAdd, host: "o", want: Placed},
			{ms: 100, op: opDispatch, batches: []string{"c0:1", "c1:2", "c2:1", "c3:1"}, next: "101ms"},
			{ms: 100, op: opAdd, host: "c4", want: Rejected}, // column FETCHING
			{ms: 100, op: opFinish, host: "c2", wait: 0},
			{ms: 100, op: opAdd, host: "c4", want: Rejected}, // column: 3 FETCHING + TIMEWAIT
			{ms: 100, op: opRelease, freed: 1, states: map[string]State{"c2": Free}},
			{ms: 100, op: opAdd, host: "c4", want: Placed, states: map[string]State{"c4": Queuing}},
		}},
		{name: "same 64-bit hash, different hosts", hashes: col7, steps: []step{
			{ms: 0, op: opAdd, host: "x", want: Placed},
			{ms: 0, op: opAdd, host: "y", want: Placed, states: map[string]State{"x": Queuing, "y": Queuing}},
			{ms: 0, op: opAdd, host: "x", want: Joined, lens: map[string]int{"x": 2, "y": 1}},
			{ms: 0, op: opAdd, host: "y", n: 2, want: Joined, lens: map[string]int{"x": 2, "y": 3}},
			{ms: 1, op: opDispatch, batches: []string{"y:3"}, states: map[string]State{"x": Queuing, "y": Fetching}},
			{ms: 2, op: opAdd, host: "x", want: Joined, lens: map[string]int{"x": 3}},
			{ms: 2, op: opAdd, host: "y", want: Rejected},
		}},
		{name: "illegal finish is rejected and changes nothing", steps: []step{
			{ms: 0, op: opFinish, id: idRaw, raw: ElementID{Col: 0, Row: 0}, err: ErrNotFetching, counts: cnt(total, 0, 0, 0)}, // FREE
			{ms: 0, op: opFinish, id: idRaw, raw: ElementID{Col: 199, Row: 0, Gen: 1}, err: ErrBadID},                          // column out of range
			{ms: 0, op: opFinish, id: idRaw, raw: ElementID{Col: 0, Row: 4, Gen: 1}, err: ErrBadID},                            // row out of range
			{ms: 0, op: opFinish, id: idRaw, raw: ElementID{Col: -1, Row: 0, Gen: 1}, err: ErrBadID},                           // negative
			{ms: 0, op: opAdd, host: "a", want: Placed},                                                                        //
			{ms: 0, op: opFinish, host: "a", id: idView, err: ErrNotFetching, states: map[string]State{"a": Queuing}},          // QUEUING
			{ms: 100, op: opDispatch, batches: []string{"a:1"}},                                                                // gen 1
			{ms: 100, op: opFinish, host: "a", id: idRaw, raw: ElementID{Gen: 99}, err: ErrStale},                              // a's slot, wrong gen
			{ms: 110, op: opFinish, host: "a", wait: time.Second, states: map[string]State{"a": TimeWait}},                     // legal
			{ms: 120, op: opFinish, host: "a", err: ErrNotFetching, states: map[string]State{"a": TimeWait}, next: "1110ms"},   // double finish on TIMEWAIT
			{ms: 1110, op: opRelease, freed: 1},                                                                                //
			{ms: 1110, op: opFinish, host: "a", err: ErrNotFetching, counts: cnt(total, 0, 0, 0)},                              // finish on FREE again
			{ms: 1110, op: opAdd, host: "a", want: Placed},                                                                     //
			{ms: 1210, op: opDispatch, batches: []string{"a:1"}},                                                               // gen 2, same slot
			{ms: 1210, op: opFinish, host: "a", id: idPrev, err: ErrStale, states: map[string]State{"a": Fetching}},            // stale gen 1
			{ms: 1210, op: opFinish, host: "a", states: map[string]State{"a": TimeWait}},                                       // gen 2 ok
			{ms: 1210, op: opFinish, host: "a", id: idPrev, err: ErrNotFetching},                                               // stale and not fetching
		}},
		{name: "zero wait still passes through TIMEWAIT", steps: []step{
			{ms: 0, op: opAdd, host: "a", want: Placed},
			{ms: 100, op: opDispatch, batches: []string{"a:1"}},
			{ms: 150, op: opFinish, host: "a", wait: 0, states: map[string]State{"a": TimeWait}, counts: cnt(total-1, 0, 0, 1), next: "150ms"},
			{ms: 150, op: opAdd, host: "a", want: Rejected},
			{ms: 150, op: opRelease, freed: 1, states: map[string]State{"a": Free}, next: "none"},
		}},
		{name: "negative wait counts as zero", steps: []step{
			{ms: 0, op: opAdd, host: "a", want: Placed},
			{ms: 100, op: opDispatch, batches: []string{"a:1"}},
			{ms: 150, op: opFinish, host: "a", wait: -time.Hour, next: "150ms"},
			{ms: 149, op: opRelease, freed: 0},
			{ms: 150, op: opRelease, freed: 1},
		}},
		{name: "drain frees QUEUING only", hashes: map[string]uint64{"a": 1, "b": 2, "c": 3, "d": 4}, steps: []step{
			{ms: 0, op: opAdd, host: "c", want: Placed},
			{ms: 0, op: opAdd, host: "d", want: Placed},
			{ms: 100, op: opDispatch, batches: []string{"c:1", "d:1"}},
			{ms: 100, op: opFinish, host: "d", wait: time.Second},
			{ms: 110, op: opAdd, host: "a", want: Placed},
			{ms: 111, op: opAdd, host: "a", want: Joined},
			{ms: 112, op: opAdd, host: "b", n: 3, want: Placed}, // Placed, Joined, Joined: full
			{ms: 113, op: opDrain, drained: 5,
				states: map[string]State{"a": Free, "b": Free, "c": Fetching, "d": TimeWait},
				counts: cnt(total-2, 0, 1, 1), next: "1100ms"},
			{ms: 114, op: opDrain, drained: 0},
			{ms: 200, op: opDispatch, batches: nil},
			{ms: 200, op: opAdd, host: "a", want: Placed},
		}},
		{name: "next event is the earliest deadline or expiry", steps: []step{
			{ms: 0, op: opAdd, host: "a", want: Placed, next: "100ms"},
			{ms: 50, op: opAdd, host: "b", want: Placed, next: "100ms"},
			{ms: 100, op: opDispatch, batches: []string{"a:1"}, next: "150ms"},
			{ms: 110, op: opFinish, host: "a", wait: 10 * time.Millisecond, next: "120ms"},
			{ms: 120, op: opRelease, freed: 1, next: "150ms"},
			{ms: 130, op: opAdd, host: "c", n: 3, want: Placed, next: "130ms"}, // full at 130
			{ms: 140, op: opAdd, host: "d", want: Placed, next: "130ms"},
			{ms: 145, op: opDispatch, batches: []string{"c:3"}, next: "150ms"},
			{ms: 150, op: opDispatch, batches: []string{"b:1"}, next: "240ms"},
			{ms: 150, op: opDrain, drained: 1, next: "none"},
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, sc) })
	}
}

func runScenario(t *testing.T, sc scenario) {
	cfg := testConfig()
	if sc.cfg != nil {
		sc.cfg(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hash := func(h string) uint64 {
		if v, ok := sc.hashes[h]; ok {
			return v
		}
		return fnvHash(h)
	}
	ids := map[string][]ElementID{}
	fp := uint64(0)
	for si, st := range sc.steps {
		now := at(st.ms)
		where := fmt.Sprintf("step %d (t=%dms)", si, st.ms)
		switch st.op {
		case opAdd:
			n := max(st.n, 1)
			for k := range n {
				fp++
				got := b.Add(now, st.host, hash(st.host), Item{FP: fp, URL: fmt.Sprintf("http://%s/%d", st.host, fp)})
				want := st.want
				// A run of n adds that starts by placing continues by joining,
				// until the list is full.
				if st.want == Placed && k > 0 {
					want = Joined
					if k >= cfg.ListCap {
						want = Rejected
					}
				}
				if got != want {
					t.Fatalf("%s: Add(%s) #%d = %v, want %v", where, st.host, k, got, want)
				}
			}
		case opDispatch:
			var got []string
			for _, bt := range b.Dispatch(now) {
				got = append(got, fmt.Sprintf("%s:%d", bt.Host, len(bt.Items)))
				ids[bt.Host] = append(ids[bt.Host], bt.ID)
				for _, it := range bt.Items {
					if !strings.HasPrefix(it.URL, "http://"+bt.Host+"/") {
						t.Fatalf("%s: batch for %s holds %s", where, bt.Host, it.URL)
					}
				}
			}
			if strings.Join(got, " ") != strings.Join(st.batches, " ") {
				t.Fatalf("%s: Dispatch = %v, want %v", where, got, st.batches)
			}
		case opFinish:
			var id ElementID
			switch st.id {
			case "", idLast, idPrev:
				l := ids[st.host]
				k := len(l) - 1
				if st.id == idPrev {
					k--
				}
				if k < 0 {
					t.Fatalf("%s: no dispatched id for %s", where, st.host)
				}
				id = l[k]
			case idView:
				v, ok := b.Lookup(st.host, hash(st.host))
				if !ok {
					t.Fatalf("%s: %s has no element", where, st.host)
				}
				id = v.ID
			case idRaw:
				id = st.raw
				if st.host != "" { // the host's current slot with the raw Gen
					v, _ := b.Lookup(st.host, hash(st.host))
					id.Col, id.Row = v.ID.Col, v.ID.Row
				}
			}
			before := b.Counts()
			err := b.Finish(id, now, st.wait)
			if !errors.Is(err, st.err) || (st.err == nil) != (err == nil) {
				t.Fatalf("%s: Finish(%v) = %v, want %v", where, id, err, st.err)
			}
			if err != nil && b.Counts() != before {
				t.Fatalf("%s: failed Finish changed counts %+v -> %+v", where, before, b.Counts())
			}
		case opRelease:
			if got := b.Release(now); got != st.freed {
				t.Fatalf("%s: Release = %d, want %d", where, got, st.freed)
			}
		case opDrain:
			items := drainedItems(b.Drain())
			if len(items) != st.drained {
				t.Fatalf("%s: Drain returned %d items, want %d", where, len(items), st.drained)
			}
		}
		for h, want := range st.states {
			v, ok := b.Lookup(h, hash(h))
			got := Free
			if ok {
				got = v.State
			}
			if got != want {
				t.Fatalf("%s: state(%s) = %v, want %v", where, h, got, want)
			}
		}
		for h, want := range st.lens {
			v, _ := b.Lookup(h, hash(h))
			if v.Len != want {
				t.Fatalf("%s: len(%s) = %d, want %d", where, h, v.Len, want)
			}
		}
		if st.counts != nil && b.Counts() != *st.counts {
			t.Fatalf("%s: Counts = %+v, want %+v", where, b.Counts(), *st.counts)
		}
		switch st.next {
		case "":
		case "none":
			if tt, ok := b.NextEvent(); ok {
				t.Fatalf("%s: NextEvent = %v, want none", where, tt.Sub(t0))
			}
		default:
			d, err := time.ParseDuration(st.next)
			if err != nil {
				t.Fatal(err)
			}
			tt, ok := b.NextEvent()
			if !ok || !tt.Equal(t0.Add(d)) {
				t.Fatalf("%s: NextEvent = %v %v, want %v", where, tt.Sub(t0), ok, d)
			}
		}
		checkInvariants(t, b, where)
	}
}

// checkInvariants brute-forces what the Bucket keeps incrementally.
func checkInvariants(t *testing.T, b *Bucket, where string) {
	t.Helper()
	var c Counts
	hosts := map[string]bool{}
	els := b.Elements()
	for _, v := range els {
		c.count(v.State, 1)
		key := fmt.Sprintf("%s\x00%d", v.Host, v.HostHash)
		if hosts[key] {
			t.Fatalf("%s: host %q has two non-FREE elements", where, v.Host)
		}
		hosts[key] = true
		if v.Len > b.cfg.ListCap {
			t.Fatalf("%s: element %v holds %d > %d URLs", where, v.ID, v.Len, b.cfg.ListCap)
		}
		if v.ID.Col != b.Column(v.HostHash) {
			t.Fatalf("%s: host %q in column %d, want %d", where, v.Host, v.ID.Col, b.Column(v.HostHash))
		}
		if (v.State == Queuing) != (v.Len > 0) {
			t.Fatalf("%s: element %v is %v with %d URLs", where, v.ID, v.State, v.Len)
		}
	}
	c.Free = b.cfg.Columns*b.cfg.Rows - len(els)
	if c != b.Counts() {
		t.Fatalf("%s: Counts = %+v, recount %+v", where, b.Counts(), c)
	}
}

func (c *Counts) count(s State, d int) {
	switch s {
	case Free:
		c.Free += d
	case Queuing:
		c.Queuing += d
	case Fetching:
		c.Fetching += d
	case TimeWait:
		c.TimeWait += d
	}
}

func TestStaleGenOnFetchingElement(t *testing.T) {
	b, _ := New(testConfig())
	b.Add(at(0), "a", 1, Item{FP: 1})
	bt := b.Dispatch(at(100))
	if len(bt) != 1 {
		t.Fatalf("dispatched %d", len(bt))
	}
	id := bt[0].ID
	bad := id
	bad.Gen++
	if err := b.Finish(bad, at(100), 0); !errors.Is(err, ErrStale) {
		t.Fatalf("Finish(gen+1) = %v, want ErrStale", err)
	}
	if err := b.Finish(ElementID{Col: id.Col, Row: id.Row}, at(100), 0); !errors.Is(err, ErrStale) {
		t.Fatalf("Finish(gen 0) = %v, want ErrStale", err)
	}
	if err := b.Finish(id, at(100), 0); err != nil {
		t.Fatal(err)
	}
}

func TestGensAreFreshAndBatchesAreNotReused(t *testing.T) {
	b, _ := New(testConfig())
	var last uint64
	var kept []Batch
	for round := range 20 {
		now := at(round * 1000)
		for k := range 3 {
			b.Add(now, "a", 1, Item{FP: uint64(round*10 + k)})
		}
		bs := b.Dispatch(now)
		if len(bs) != 1 || bs[0].ID.Gen <= last {
			t.Fatalf("round %d: batches %+v after gen %d", round, bs, last)
		}
		last = bs[0].ID.Gen
		kept = append(kept, bs[0])
		if err := b.Finish(bs[0].ID, now, 0); err != nil {
			t.Fatal(err)
		}
		b.Release(now)
	}
	for round, bt := range kept {
		for k, it := range bt.Items {
			if it.FP != uint64(round*10+k) {
				t.Fatalf("batch %d item %d was overwritten: %+v", round, k, it)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	for s, want := range map[State]string{Free: "free", Queuing: "queuing", Fetching: "fetching", TimeWait: "timewait", 9: "state(9)"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q", s, s.String())
		}
	}
	for o, want := range map[Outcome]string{Rejected: "rejected", Joined: "joined", Placed: "placed", 7: "outcome(7)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q", o, o.String())
		}
	}
	if s := (ElementID{Col: 3, Row: 1, Gen: 9}).String(); s != "3/1#9" {
		t.Errorf("ElementID.String() = %q", s)
	}
}

func TestValidate(t *testing.T) {
	mod := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	cases := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" = valid
	}{
		{"default", DefaultConfig(), ""},
		{"smallest", Config{Columns: 199, Rows: 4, ListCap: 1, MaxQueueWait: time.Nanosecond, Phases: 1}, ""},
		{"largest", Config{Columns: 4999, Rows: 16, ListCap: 1000, MaxQueueWait: time.Minute, Phases: 1}, ""},
		{"phases zero means one", mod(func(c *Config) { c.Phases = 0 }), ""},
		{"phases other prime", mod(func(c *Config) { c.Phases = 7 }), ""},
		{"columns not prime", mod(func(c *Config) { c.Columns = 2000 }), "bucket.columns=2000: must be a prime in 199..4999"},
		{"columns prime below range", mod(func(c *Config) { c.Columns = 197 }), "bucket.columns=197: must be a prime in 199..4999"},
		{"columns prime above range", mod(func(c *Config) { c.Columns = 5003 }), "bucket.columns=5003: must be a prime in 199..4999"},
		{"columns zero", mod(func(c *Config) { c.Columns = 0 }), "bucket.columns=0: must be a prime in 199..4999"},
		{"columns equal phases", mod(func(c *Config) { c.Phases = 1999 }), "bucket.columns=1999: must differ from the number of phases (1999)"},
		{"rows low", mod(func(c *Config) { c.Rows = 3 }), "bucket.rows=3: must be in 4..16"},
		{"rows high", mod(func(c *Config) { c.Rows = 17 }), "bucket.rows=17: must be in 4..16"},
		{"list cap zero", mod(func(c *Config) { c.ListCap = 0 }), "bucket.list_cap=0: must be in 1..1000"},
		{"list cap high", mod(func(c *Config) { c.ListCap = 1001 }), "bucket.list_cap=1001: must be in 1..1000"},
		{"wait zero", mod(func(c *Config) { c.MaxQueueWait = 0 }), "bucket.max_queue_wait=0s: must be > 0 and <= 1m0s"},
		{"wait negative", mod(func(c *Config) { c.MaxQueueWait = -time.Second }), "bucket.max_queue_wait=-1s: must be > 0 and <= 1m0s"},
		{"wait high", mod(func(c *Config) { c.MaxQueueWait = time.Minute + 1 }), "bucket.max_queue_wait=1m0.000000001s: must be > 0 and <= 1m0s"},
		{"phases negative", mod(func(c *Config) { c.Phases = -1 }), "phases=-1: must be >= 1"},
		{"several at once", Config{Columns: 2000, Rows: 2, ListCap: 20, MaxQueueWait: time.Second}, "bucket.columns=2000: must be a prime in 199..4999; bucket.rows=2: must be in 4..16"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			_, nerr := New(tc.cfg)
			if tc.want == "" {
				if err != nil || nerr != nil {
					t.Fatalf("Validate = %v, New = %v; want valid", err, nerr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
			if nerr == nil || nerr.Error() != err.Error() {
				t.Fatalf("New error = %v, want %v", nerr, err)
			}
		})
	}
}

func TestIsPrime(t *testing.T) {
	var got []int
	for n := -3; n < 30; n++ {
		if IsPrime(n) {
			got = append(got, n)
		}
	}
	if fmt.Sprint(got) != "[2 3 5 7 11 13 17 19 23 29]" {
		t.Fatal(got)
	}
	for _, n := range []int{199, 1999, 4999} {
		if !IsPrime(n) {
			t.Errorf("IsPrime(%d) = false", n)
		}
	}
}

// addURLs adds n URLs of host at ms, failing t if one is rejected.
func addURLs(t *testing.T, b *Bucket, ms int, host string, n int) {
	t.Helper()
	for i := range n {
		if o := b.Add(at(ms), host, fnvHash(host), Item{FP: fnvHash(host) + uint64(i)}); o == Rejected {
			t.Fatalf("add %s: rejected", host)
		}
	}
}

// TestFlush: Flush dispatches every QUEUING element before its deadline,
// full ones first, then by deadline; FREE, FETCHING and TIMEWAIT elements
// are left alone.
func TestFlush(t *testing.T) {
	b, _ := New(testConfig())
	add := func(ms int, host string, n int) { addURLs(t, b, ms, host, n) }
	add(0, "x", 1)
	x := b.Dispatch(at(100)) // x: FETCHING, must not be flushed again
	add(0, "a", 1)
	add(10, "c", 1)
	add(20, "b", 3) // full
	add(5, "d", 2)
	got := b.Flush(at(30)) // every deadline (100ms after its add) still ahead
	var names []string
	for _, bt := range got {
		names = append(names, fmt.Sprintf("%s:%d", bt.Host, len(bt.Items)))
	}
	if want := "b:3 a:1 d:2 c:1"; strings.Join(names, " ") != want {
		t.Fatalf("Flush = %q, want %q", strings.Join(names, " "), want)
	}
	if c := b.Counts(); c.Queuing != 0 || c.Fetching != 5 {
		t.Fatalf("after Flush: %+v, want 0 queuing, 5 fetching", c)
	}
	if again := b.Flush(at(31)); len(again) != 0 {
		t.Fatalf("second Flush dispatched %d elements", len(again))
	}
	if _, ok := b.NextEvent(); ok {
		t.Fatal("NextEvent after Flush: want none (nothing QUEUING or TIMEWAIT)")
	}
	// The flushed elements finish like dispatched ones.
	for _, bt := range append(got, x...) {
		if err := b.Finish(bt.ID, at(40), 0); err != nil {
			t.Fatalf("finish %s: %v", bt.Host, err)
		}
	}
	if freed := b.Release(at(40)); freed != 5 {
		t.Fatalf("released %d, want 5", freed)
	}
}

// TestDispatchHost: DispatchHost moves only the host's QUEUING element to
// FETCHING, before its deadline or fill, full or not; other elements and
// states are left alone, and the element finishes like a dispatched one.
func TestDispatchHost(t *testing.T) {
	b, _ := New(testConfig())
	add := func(ms int, host string, n int) { addURLs(t, b, ms, host, n) }
	add(0, "fetching", 1)
	fetching := b.Dispatch(at(100))
	add(0, "a", 2)    // QUEUING, in the deadline queue
	add(0, "full", 3) // QUEUING and full: in the ready list
	add(0, "b", 1)
	add(0, "c", 3) // full, after "full" in the ready list
	for _, tc := range []struct {
		host  string
		ok    bool
		items int
	}{
		{"a", true, 2},
		{"a", false, 0},        // FETCHING now
		{"full", true, 3},      // from the ready list
		{"fetching", false, 0}, // FETCHING
		{"unknown", false, 0},  // no element
	} {
		got, ok := b.DispatchHost(tc.host, fnvHash(tc.host))
		if ok != tc.ok || len(got.Items) != tc.items || ok && got.Host != tc.host {
			t.Fatalf("DispatchHost(%s) = %s:%d, %v; want %d items, %v", tc.host, got.Host, len(got.Items), ok, tc.items, tc.ok)
		}
		if ok {
			if v, _ := b.Lookup(tc.host, fnvHash(tc.host)); v.State != Fetching || v.ID != got.ID {
				t.Fatalf("%s after DispatchHost: %+v, want FETCHING with the batch's ID %v", tc.host, v, got.ID)
			}
			fetching = append(fetching, got)
		}
	}
	// The others dispatch as before: the full one first, then b at its deadline.
	var names []string
	for _, bt := range b.Dispatch(at(100)) {
		names = append(names, fmt.Sprintf("%s:%d", bt.Host, len(bt.Items)))
		fetching = append(fetching, bt)
	}
	if want := "c:3 b:1"; strings.Join(names, " ") != want {
		t.Fatalf("Dispatch = %q, want %q", strings.Join(names, " "), want)
	}
	if c := b.Counts(); c.Queuing != 0 || c.Fetching != 5 {
		t.Fatalf("counts %+v, want 0 queuing, 5 fetching", c)
	}
	for _, bt := range fetching {
		if err := b.Finish(bt.ID, at(110), 0); err != nil {
			t.Fatalf("finish %s: %v", bt.Host, err)
		}
	}
	if freed := b.Release(at(110)); freed != 5 {
		t.Fatalf("released %d, want 5", freed)
	}
}

// TestWantRefill: a FETCHING element takes URLs of its host only while its
// trip wants them (Want), up to the room asked for, whatever list_cap;
// Refill hands them over and ends the want; Finish refuses an element
// holding a refill; Drain hands refills back and keeps the element
// FETCHING; a stale or non-FETCHING ID is refused.
func TestWantRefill(t *testing.T) {
	for _, tc := range []struct {
		name    string
		room    int
		adds    int
		joined  int // of adds
		drain   bool
		refill  int // URLs Refill returns (after Drain: none)
		drained int
	}{
		{"no want: rejected", 0, 2, 0, false, 0, 0},
		{"room over list_cap", 5, 7, 5, false, 5, 0},
		{"partly filled", 4, 2, 2, false, 2, 0},
		{"drained at a swap", 4, 3, 3, true, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := New(testConfig()) // list_cap 3
			addURLs(t, b, 0, "h", 1)
			bt := b.Dispatch(at(100))
			if len(bt) != 1 {
				t.Fatalf("dispatched %d elements, want 1", len(bt))
			}
			id := bt[0].ID
			if tc.room > 0 {
				if err := b.Want(id, tc.room); err != nil {
					t.Fatal(err)
				}
			}
			joined := 0
			for i := range tc.adds {
				if b.Accepts("h", fnvHash("h")) != (joined < tc.room) {
					t.Fatalf("add %d: Accepts = %v with %d joined of %d", i, !(joined < tc.room), joined, tc.room)
				}
				if r := b.Room("h", fnvHash("h")); r != max(tc.room-joined, 0) {
					t.Fatalf("add %d: Room = %d with %d joined of %d", i, r, joined, tc.room)
				}
				switch o := b.Add(at(110), "h", fnvHash("h"), Item{FP: uint64(10 + i)}); o {
				case Joined:
					joined++
				case Rejected:
				default:
					t.Fatalf("add %d: %v", i, o)
				}
			}
			if joined != tc.joined {
				t.Fatalf("joined %d, want %d", joined, tc.joined)
			}
			if v, _ := b.Lookup("h", fnvHash("h")); v.State != Fetching || v.Len != joined {
				t.Fatalf("element %+v, want FETCHING holding %d", v, joined)
			}
			if joined > 0 {
				if err := b.Finish(id, at(120), 0); !errors.Is(err, ErrRefillHeld) {
					t.Fatalf("Finish while holding a refill: %v, want ErrRefillHeld", err)
				}
			}
			drained := 0
			if tc.drain {
				for _, d := range b.Drain() {
					if d.ID != id || d.Host != "h" {
						t.Fatalf("drained %+v, want the fetching element's refill", d)
					}
					drained += len(d.Items)
				}
			}
			if drained != tc.drained {
				t.Fatalf("drained %d, want %d", drained, tc.drained)
			}
			got, err := b.Refill(id)
			if err != nil || len(got) != tc.refill {
				t.Fatalf("Refill = %d URLs, %v; want %d", len(got), err, tc.refill)
			}
			if o := b.Add(at(130), "h", fnvHash("h"), Item{FP: 99}); o != Rejected {
				t.Fatalf("add after Refill: %v, want rejected (the want ended)", o)
			}
			if err := b.Finish(id, at(130), 0); err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, b, "after finish")
			for _, err := range []error{b.Want(id, 1), func() error { _, err := b.Refill(id); return err }()} {
				if !errors.Is(err, ErrNotFetching) {
					t.Fatalf("Want/Refill on a TIMEWAIT element: %v, want ErrNotFetching", err)
				}
			}
			stale := id
			stale.Gen++
			if err := b.Want(stale, 1); !errors.Is(err, ErrNotFetching) && !errors.Is(err, ErrStale) {
				t.Fatalf("Want with a stale id: %v", err)
			}
		})
	}
}
