package frontier

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestRecordCodec(t *testing.T) {
	now := time.Unix(1700000000, 123456789)
	tests := []stored{
		{Record: Record{FP: 1, URL: "http://a.test/", Host: "a.test", State: InList}, seq: 1},
		{Record: Record{FP: ^uint64(0), URL: "http://b.test:8080/" + strings.Repeat("x", 2000), Host: "b.test:8080", Depth: 7, Tries: 2,
			State: Stalled, Status: 503, Reason: "timeout", Discovered: now, Fetched: now.Add(time.Second), NextTry: now.Add(time.Hour)}, seq: 1 << 60},
		{Record: Record{FP: 42, URL: "http://c.test/", Host: "c.test", State: Completed, Status: 200, Reason: "ok", Fetched: now}, seq: 9},
		{Record: Record{FP: 43, URL: "http://c.test/cal/2026-12/", Host: "c.test", Depth: 3, Run: 7, State: InList}, seq: 10},
		{Record: Record{FP: 44, URL: "http://c.test/cal/2027-01/", Host: "c.test", Depth: 4, Run: maxRun, State: Completed, Due: now.Add(time.Hour),
			Page: PageState{ETag: `"e"`, Interval: time.Hour, History: 3, Checks: 2}}, seq: 11},
	}
	for _, want := range tests {
		got, err := decodeRecord(want.FP, appendRecord(nil, &want))
		if err != nil {
			t.Fatalf("decode %016x: %v", want.FP, err)
		}
		if !got.Discovered.Equal(want.Discovered) || !got.Fetched.Equal(want.Fetched) || !got.NextTry.Equal(want.NextTry) {
			t.Errorf("times: got %+v, want %+v", got, want)
		}
		got.Discovered, got.Fetched, got.NextTry = want.Discovered, want.Fetched, want.NextTry
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		q, err := decodeQueueValue(appendQueueValue(nil, &want))
		if err != nil {
			t.Fatal(err)
		}
		if q.FP != want.FP || q.URL != want.URL || q.Host != want.Host || q.Depth != want.Depth || q.Run != want.Run || q.Tries != want.Tries ||
			!q.Due.Equal(want.Due) || q.State != InList {
			t.Errorf("queue value: got %+v, want %+v", q, want)
		}
		if h, err := queueValueHost(appendQueueValue(nil, &want)); err != nil || h != want.Host {
			t.Errorf("queueValueHost = %q, %v", h, err)
		}
	}
}

// TestRecordCodecRun: a record's run follows what a record without one
// holds, so a value written before runs were kept reads with run 0, and
// one with a run reads, to a version that knows no run, as the same
// record without it; a run out of range is corrupt.
func TestRecordCodecRun(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, s := range []stored{
		{Record: Record{FP: 5, URL: "http://a.test/p/2", Host: "a.test", Depth: 2, Run: 1, State: InList}, seq: 3},
		{Record: Record{FP: 6, URL: "http://a.test/p/3", Host: "a.test", Depth: 3, Run: 300, State: Completed, Due: now,
			Page: PageState{LastModified: "x", Checks: 1}}, seq: 4},
	} {
		runLen := len(binary.AppendUvarint(nil, uint64(s.Run)))
		v := appendRecord(nil, &s)
		got, err := decodeRecord(s.FP, v[:len(v)-runLen]) // as a version that reads no run does
		if err != nil || got.Run != 0 || got.URL != s.URL || got.Depth != s.Depth || !got.Due.Equal(s.Due) || got.Page != s.Page {
			t.Errorf("record without its run: %+v, %v", got, err)
		}
		without := s
		without.Run = 0
		q, qold := appendQueueValue(nil, &s), appendQueueValue(nil, &without)
		if got, err := decodeQueueValue(q[:len(q)-runLen]); err != nil || got.Run != 0 || got.URL != s.URL || !got.Due.Equal(s.Due) {
			t.Errorf("queue value without its run: %+v, %v", got, err)
		}
		if !s.Due.IsZero() && string(q[:len(q)-runLen]) != string(qold) {
			t.Errorf("queue value with run %d: %x, want the value without it %x and the run", s.Run, q, qold)
		}
		big := s
		big.Run = maxRun + 1
		if _, err := decodeRecord(s.FP, appendRecord(nil, &big)); err == nil || !strings.Contains(err.Error(), "run") {
			t.Errorf("run %d decoded: %v", big.Run, err)
		}
		if _, err := decodeQueueValue(appendQueueValue(nil, &big)); err == nil || !strings.Contains(err.Error(), "run") {
			t.Errorf("queue value with run %d decoded: %v", big.Run, err)
		}
	}
}

func TestCodecCorrupt(t *testing.T) {
	good := appendRecord(nil, &stored{Record: Record{FP: 1, URL: "http://a.test/", Host: "a.test", State: InList}, seq: 1})
	bad := [][]byte{nil, {}, {99}, {recordVersion}, good[:len(good)-1], append([]byte{recordVersion, 7}, good[2:]...)}
	for i, v := range bad {
		if _, err := decodeRecord(1, v); err == nil {
			t.Errorf("case %d: corrupt record %x decoded without error", i, v)
		}
		if _, err := decodeQueueValue(v); err == nil {
			t.Errorf("case %d: corrupt queue value %x decoded without error", i, v)
		}
		if _, err := decodeHost("h", v); err == nil && len(v) < 6 {
			t.Errorf("case %d: corrupt host stats %x decoded without error", i, v)
		}
	}
}

func TestTimeEncoding(t *testing.T) {
	for _, tm := range []time.Time{{}, time.Unix(0, 1), time.Unix(-5, 0), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		n := unixNano(tm)
		if n < 0 {
			t.Errorf("unixNano(%v) = %d < 0", tm, n)
		}
	}
	if !fromUnixNano(0).IsZero() {
		t.Error("0 must decode to the zero time")
	}
}

func TestSlab(t *testing.T) {
	var s slab
	a := s.copy([]byte("hello"))
	b := s.copy([]byte("world"))
	a = append(a, '!') // must not clobber b
	if string(b) != "world" || string(a) != "hello!" {
		t.Fatalf("slab slices overlap: %q %q", a, b)
	}
	big := s.take(slabChunk)
	if cap(big) != slabChunk {
		t.Fatalf("big take cap %d", cap(big))
	}
}

// TestQueueValueHostBytes: skipping the varints finds the host (or the
// error) that decoding them does, on valid, cut and random values.
func TestQueueValueHostBytes(t *testing.T) {
	ref := func(v []byte) ([]byte, error) {
		r := reader{b: v}
		r.version(queueVersion)
		r.u64()
		r.varint()
		r.varint()
		r.varint()
		n := r.uvarint()
		if r.err == nil && n > uint64(len(r.b)) {
			r.err = errShort
		}
		if r.err != nil {
			return nil, r.err
		}
		return r.b[:n], nil
	}
	var inputs [][]byte
	for _, s := range []stored{
		{Record: Record{FP: 7, URL: "http://a.test/x", Host: "a.test", Depth: 300, Tries: -2, Discovered: time.Unix(1700000000, 5)}},
		{Record: Record{FP: ^uint64(0), URL: "u", Host: strings.Repeat("h", 200), Depth: 1 << 40}},
	} {
		v := appendQueueValue(nil, &s)
		for i := 0; i <= len(v); i++ {
			inputs = append(inputs, v[:i])
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		v := make([]byte, r.IntN(40))
		for i := range v {
			v[i] = byte(r.IntN(256))
			if r.IntN(3) == 0 {
				v[i] |= 0x80
			}
		}
		if len(v) > 0 {
			v[0] = queueVersion
		}
		inputs = append(inputs, v)
	}
	for _, v := range inputs {
		got, err := queueValueHostBytes(v)
		want, werr := ref(v)
		if (err == nil) != (werr == nil) || string(got) != string(want) {
			t.Fatalf("%x: got %q, %v; want %q, %v", v, got, err, want, werr)
		}
	}
}
