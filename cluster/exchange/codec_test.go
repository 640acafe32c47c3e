package exchange

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

func TestBatchCodec(t *testing.T) {
	b := Batch{ID: 1 << 40, Entries: []Entry{
		{Kind: KindNew, NewURL: frontier.NewURL{URL: "http://a.test/", Host: "a.test", Depth: 0}},
		{Kind: KindDone, NewURL: frontier.NewURL{URL: "https://b.test:8443/x?y", Host: "b.test:8443", Depth: 12345}},
		{Kind: KindMoved, NewURL: frontier.NewURL{URL: "http://c.test/moved", Host: "c.test", Depth: 3}},
		{Kind: KindNew, NewURL: frontier.NewURL{URL: "http://c.test/r2", Host: "c.test", Depth: 4, Redirects: 2}},
		{Kind: KindScope, NewURL: frontier.NewURL{Host: "d.test"}},
		{Kind: KindRobots, NewURL: frontier.NewURL{Host: "http://d.test", URL: "1700000000000\nUser-agent: *\n", Depth: 200}},
	}}
	p := EncodeBatch(b)
	got, err := DecodeBatch(p)
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// An entry without redirects is encoded as before they were carried
	// (outboxes written then still read).
	if old := appendEntry(nil, Entry{Kind: KindMoved, NewURL: frontier.NewURL{URL: "u", Host: "h", Depth: 1}}); old[0] != byte(KindMoved) || len(old) != 6 {
		t.Fatalf("entry without redirects encoded as % x", old)
	}
	if e, err := DecodeBatch(EncodeBatch(Batch{ID: 7})); err != nil || e.ID != 7 || len(e.Entries) != 0 {
		t.Fatalf("empty batch: %+v %v", e, err)
	}
	for _, tc := range []struct {
		name string
		p    []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"type", []byte{msgAck, 1, 0}, "message type"},
		{"truncated", p[:len(p)-1], "truncated"},
		{"trailing", append(append([]byte{}, p...), 0), "trailing"},
		{"huge count", []byte{msgBatch, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0}, "does not fit"},
		{"bad varint", []byte{msgBatch, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "bad varint"},
		{"kind", []byte{msgBatch, 1, 1, byte(maxKind) + 1, 0, 0, 1, 'x'}, fmt.Sprintf("kind %d", maxKind+1)},
		{"kind after robots", []byte{msgBatch, 1, 1, 0x7f, 0, 0, 1, 'x'}, "kind 127"},
		{"redirects truncated", []byte{msgBatch, 1, 1, kindRedirects, 0, 0, 0}, "bad varint"},
		{"scope with url", []byte{msgBatch, 1, 1, byte(KindScope), 0, 1, 'h', 1, 'x'}, "scope entry"},
		{"empty url", []byte{msgBatch, 1, 1, 0, 0, 0, 0, 0}, "url of 0 bytes"},
		{"long host", append([]byte{msgBatch, 1, 1, 0, 0, 0x81, 0x10}, make([]byte, 2100)...), "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeBatch(tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	for _, a := range []ack{
		{ID: 3, Added: 900, Status: 1, Msg: "disk full"},
		{ID: 4, Added: 2, Lent: []Entry{
			{Kind: KindLend, NewURL: frontier.NewURL{URL: "http://a.test/x", Host: "a.test\n12 0 b", Depth: 3, Redirects: 1}},
			{Kind: KindLend, NewURL: frontier.NewURL{URL: "http://a.test/y", Host: "a.test\n12 0 b"}},
		}},
	} {
		if got, err := decodeAck(encodeAck(a)); err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("ack: %+v %v, want %+v", got, err, a)
		}
	}
	for _, tc := range []struct {
		name string
		p    []byte
		want string
	}{
		{"short", []byte{msgAck, 1}, "decode ack"},
		{"lent count past the end", []byte{msgAck, 1, 0, 0, 0, 0xff, 0x01}, "does not fit"},
		{"lent entry not a lend", encodeAck(ack{ID: 1, Lent: []Entry{{Kind: KindNew, NewURL: frontier.NewURL{URL: "http://a/", Host: "a"}}}}), "want 6 (lend)"},
		{"trailing", append(encodeAck(ack{ID: 1}), 0), "trailing"},
	} {
		if _, err := decodeAck(tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(Batch{ID: 1, Entries: []Entry{{NewURL: frontier.NewURL{URL: "http://a/", Host: "a", Depth: 2}}}}))
	f.Add(EncodeBatch(Batch{ID: 99}))
	f.Add(EncodeBatch(Batch{ID: 7, Entries: []Entry{{Kind: KindMoved, NewURL: frontier.NewURL{URL: "http://m/", Host: "m", Depth: 1}},
		{Kind: KindDone, NewURL: frontier.NewURL{URL: "http://d/x", Host: "d"}}}}))
	f.Add([]byte{msgBatch, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(encodeAck(ack{ID: 1}))
	f.Add(EncodeBatch(Batch{ID: 8, Entries: []Entry{{Kind: KindNew, NewURL: frontier.NewURL{URL: "http://r/2", Host: "r", Depth: 3, Run: 2, Redirects: 1,
		LastMod: time.UnixMilli(1_800_000_000_000)}}}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := DecodeBatch(p)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to an equivalent batch.
		b2, err := DecodeBatch(EncodeBatch(b))
		if err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("re-encode: %v", err)
		}
		for _, e := range b.Entries {
			if checkEntry(e) != nil {
				t.Fatalf("decoded an invalid entry %+v", e)
			}
		}
	})
}

func TestBatchCodecDue(t *testing.T) {
	due := time.UnixMilli(1_800_000_000_123)
	b := Batch{ID: 9, Entries: []Entry{
		{Kind: KindDone, NewURL: frontier.NewURL{URL: "http://a.test/x", Host: "a.test", Depth: 2, Due: due}},
		{Kind: KindMoved, NewURL: frontier.NewURL{URL: "http://a.test/y", Host: "a.test", Redirects: 3, Due: due}},
		{Kind: KindReplica, NewURL: frontier.NewURL{URL: "http://a.test/z", Host: "a.test"}},
		// A sitemap's <lastmod> travels with a discovered URL (in Due's place).
		{Kind: KindNew, NewURL: frontier.NewURL{URL: "http://a.test/s", Host: "a.test", Depth: 1, LastMod: due}},
	}}
	got, err := DecodeBatch(EncodeBatch(b))
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("round trip with Due: %+v %v", got, err)
	}
	e, err := decodeEntry(appendEntry(nil, b.Entries[1]))
	if err != nil || !e.Due.Equal(due) || e.Redirects != 3 || e.Kind != KindMoved {
		t.Fatalf("stored entry with Due and redirects: %+v %v", e, err)
	}
	// Truncated or absurd Due values are errors, never panics.
	p := appendEntry(nil, b.Entries[0])
	for i := 1; i < len(p); i++ {
		if _, err := decodeEntry(p[:i]); err == nil {
			t.Errorf("entry cut at %d of %d bytes decoded", i, len(p))
		}
	}
	if _, err := decodeEntry([]byte{byte(KindDone) | kindDue, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 1, 'h', 1, 'u'}); err == nil || !strings.Contains(err.Error(), "due") {
		t.Errorf("huge due: %v", err)
	}
}

// TestBatchCodecRun: a URL's run travels with it (after the Due), in any
// kind; an entry with run 0 is encoded as before runs were carried, and a
// run out of range, or an encoded 0, is an error.
func TestBatchCodecRun(t *testing.T) {
	due := time.UnixMilli(1_800_000_000_123)
	b := Batch{ID: 11, Entries: []Entry{
		{Kind: KindNew, NewURL: frontier.NewURL{URL: "http://a.test/cal/2026-12/", Host: "a.test", Depth: 2, Run: 1}},
		{Kind: KindNew, NewURL: frontier.NewURL{URL: "http://a.test/cal/2027-01/", Host: "a.test", Depth: 3, Run: 10, Redirects: 2, LastMod: due}},
		{Kind: KindMoved, NewURL: frontier.NewURL{URL: "http://a.test/cal/2027-02/", Host: "a.test", Depth: 4, Run: MaxEntryRun, Due: due}},
		{Kind: KindLend, NewURL: frontier.NewURL{URL: "http://a.test/cal/2027-03/", Host: "a.test\n3 1 m", Depth: 5, Run: 4}},
	}}
	got, err := DecodeBatch(EncodeBatch(b))
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("round trip with runs: %+v %v", got, err)
	}
	a := ack{ID: 2, Lent: b.Entries[3:]}
	if got, err := decodeAck(encodeAck(a)); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("ack with a lent run: %+v %v", got, err)
	}
	plain := Entry{Kind: KindNew, NewURL: frontier.NewURL{URL: "u", Host: "h", Depth: 1}}
	withRun := plain
	withRun.Run = 3
	p, q := appendEntry(nil, plain), appendEntry(nil, withRun)
	if p[0] != byte(KindNew) || q[0] != byte(KindNew)|kindRun || string(q[2:]) != string(p[1:]) || q[1] != 3 {
		t.Fatalf("entry with run 3 encoded as % x, without as % x", q, p)
	}
	for i := 1; i < len(q); i++ {
		if _, err := decodeEntry(q[:i]); err == nil {
			t.Errorf("entry cut at %d of %d bytes decoded", i, len(q))
		}
	}
	if e, err := decodeEntry(appendEntry(nil, Entry{Kind: KindNew, NewURL: frontier.NewURL{URL: "u", Host: "h", Run: MaxEntryRun + 5}})); err != nil || e.Run != MaxEntryRun {
		t.Errorf("run over the limit: encoded as %d, %v; want it capped at %d", e.Run, err, MaxEntryRun)
	}
	for _, c := range []struct {
		name string
		p    []byte
	}{
		{"run 0", []byte{byte(KindNew) | kindRun, 0, 0, 1, 'h', 1, 'u'}},
		{"run too large", []byte{byte(KindNew) | kindRun, 0x81, 0x80, 0x80, 0x01, 0, 1, 'h', 1, 'u'}},
	} {
		if _, err := decodeEntry(c.p); err == nil || !strings.Contains(err.Error(), "run") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// An unknown kind with the run bit is reported as the kind it is.
	if _, err := decodeEntry([]byte{byte(maxKind+1) | kindRun, 1, 0, 1, 'h', 1, 'u'}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("kind %d", (maxKind+1)|kindRun)) {
		t.Errorf("unknown kind with a run: %v", err)
	}
}

// TestBatchCodecFacets: the decoder refuses a KindFacets entry that is not
// whole 16-byte sets, or has a host or a depth, and a kind after the last.
func TestBatchCodecFacets(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    []byte
		want string
	}{
		{"a set cut short", []byte{msgBatch, 1, 1, byte(KindFacets), 0, 0, 15}, "truncated"},
		{"not whole sets", append([]byte{msgBatch, 1, 1, byte(KindFacets), 0, 0, 17}, make([]byte, 17)...), "facets entry"},
		{"a host", append([]byte{msgBatch, 1, 1, byte(KindFacets), 0, 1, 'h', 16}, make([]byte, 16)...), "facets entry"},
		{"a depth", append([]byte{msgBatch, 1, 1, byte(KindFacets), 3, 0, 16}, make([]byte, 16)...), "facets entry"},
		{"no set", []byte{msgBatch, 1, 1, byte(KindFacets), 0, 0, 0}, "url of 0 bytes"},
		{"the kind after the last", append([]byte{msgBatch, 1, 1, byte(maxKind) + 1, 0, 0, 16}, make([]byte, 16)...), fmt.Sprintf("kind %d", maxKind+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeBatch(tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	if k := KindFacets.String(); k != "facets" {
		t.Errorf("KindFacets.String() = %q", k)
	}
}
