package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/phasecrawl/phasecrawl/urlscope"
)

// TestSeedBatches: a body is routed in batches of seedBatch, bad lines are
// listed (the first maxBadSeeds, each echoed up to maxBadSeedMs bytes) in
// line order and all counted.
func TestSeedBatches(t *testing.T) {
	long := "ftp://" + strings.Repeat("é", 300) // over maxBadSeedMs, cut inside a rune
	tooLong := strings.Repeat("x", maxSeedLine+1)
	tests := []struct {
		name    string
		body    string
		batches []int
		code    int
		given   int
		added   int
		bad     int // BadTotal
		listed  int // len(Bad)
		check   func(t *testing.T, res SeedResult)
	}{
		{name: "2,500 URLs", body: urls(2500, "http://a.example/"), batches: []int{1000, 1000, 500}, code: 200, given: 2500, added: 2500},
		{name: "exactly one batch", body: urls(1000, "http://a.example/"), batches: []int{1000}, code: 200, given: 1000, added: 1000},
		{name: "150 bad", body: urls(150, "ftp://a.example/") + urls(10, "http://b.example/"), batches: []int{160}, code: 400,
			given: 160, added: 10, bad: 150, listed: maxBadSeeds},
		{name: "long bad line echoed in part", body: long + "\n", batches: []int{1}, code: 400, given: 1, bad: 1, listed: 1,
			check: func(t *testing.T, res SeedResult) {
				if u := res.Bad[0].URL; len(u) > maxBadSeedMs+3 || !strings.HasSuffix(u, "...") || !strings.HasPrefix(u, "ftp://é") || !json.Valid([]byte(`"`+u+`"`)) {
					t.Errorf("echo %q", u)
				}
			}},
		{name: "line over 64 KiB refused while reading", body: tooLong + "\nhttp://a.example/\n", batches: []int{1}, code: 400, given: 2, added: 1, bad: 1, listed: 1,
			check: func(t *testing.T, res SeedResult) {
				if b := res.Bad[0]; b.Line != 1 || len(b.URL) > maxBadSeedMs || !strings.Contains(b.Error, "longer than") {
					t.Errorf("bad %+v", b)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeNode{refuse: refuseFTP}
			code, _, b := do(newServer(t, Config{Node: f}).Handler(), "POST", "/v1/seeds", tc.body, nil)
			var res SeedResult
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			var sizes []int
			for _, b := range f.batches {
				sizes = append(sizes, len(b))
			}
			if code != tc.code || fmt.Sprint(sizes) != fmt.Sprint(tc.batches) || res.Given != tc.given || res.Added != tc.added ||
				res.BadTotal != tc.bad || len(res.Bad) != tc.listed {
				t.Fatalf("%d, batches %v: given %d added %d bad %d listed %d", code, sizes, res.Given, res.Added, res.BadTotal, len(res.Bad))
			}
			for i := 1; i < len(res.Bad); i++ {
				if res.Bad[i].Line <= res.Bad[i-1].Line {
					t.Fatalf("bad lines not in line order: %+v", res.Bad)
				}
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

// urls is k lines of prefix and a number.
func urls(k int, prefix string) string {
	var b strings.Builder
	for i := range k {
		fmt.Fprintf(&b, "%s%d\n", prefix, i)
	}
	return b.String()
}

// stopRouter fails before judging any seed (as a node that cannot record
// the seed hosts does) from its second batch on.
type stopRouter struct{ calls int }

func (r *stopRouter) RouteSeeds(_ context.Context, seeds []string) ([]string, int, error) {
	r.calls++
	if r.calls > 1 {
		return nil, 0, errors.New("disk full")
	}
	return make([]string, len(seeds)), len(seeds), nil
}

// TestAddSeeds: AddSeeds gives a list in batches and answers as POST
// /v1/seeds would; a batch the router could not judge is not counted.
func TestAddSeeds(t *testing.T) {
	f := &fakeNode{refuse: refuseFTP}
	res, err := AddSeeds(context.Background(), f, []string{"http://a.example/", "ftp://b.example/", "http://c.example/"})
	if err != nil || res.Given != 3 || res.Added != 2 || res.BadTotal != 1 || res.Bad[0].Line != 2 || len(f.batches) != 1 {
		t.Fatalf("%+v %v (batches %d)", res, err, len(f.batches))
	}
	r := &stopRouter{}
	raw := strings.Fields(urls(1500, "http://a.example/"))
	res, err = AddSeeds(context.Background(), r, raw)
	if err == nil || res.Given != 1000 || res.Added != 1000 {
		t.Fatalf("second batch failing: %+v %v", res, err)
	}
}

type seedEvent struct {
	line int
	raw  string
	bad  bool
}

// refSeeds is a simple, whole-body reading of a seeds body, to compare readSeeds with.
func refSeeds(body []byte) ([]seedEvent, bool) {
	var ev []seedEvent
	if t := bytes.TrimLeft(body, " \t\r\n\f\v"); len(t) > 0 && t[0] == '[' {
		var elems []json.RawMessage
		if json.Unmarshal(body, &elems) != nil {
			return nil, false
		}
		for i, e := range elems {
			var s string
			if json.Unmarshal(e, &s) != nil || string(bytes.TrimSpace(e)) == "null" {
				ev = append(ev, seedEvent{i + 1, "", true})
			} else {
				ev = append(ev, seedEvent{i + 1, s, false})
			}
		}
		return ev, true
	}
	lines := strings.Split(string(body), "\n")
	for i, l := range lines {
		if len(l) >= maxSeedLine {
			ev = append(ev, seedEvent{i + 1, "", true})
			continue
		}
		if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "#") {
			ev = append(ev, seedEvent{i + 1, s, false})
		}
	}
	return ev, true
}

func FuzzReadSeeds(f *testing.F) {
	f.Add([]byte("http://a.example/\n# c\n\n  http://b.example/x  \r\nftp://c/\n"))
	f.Add([]byte(`["http://a.example/", 5, "x", {"a":1}, null]`))
	f.Add([]byte("\n\n\n[\"a\"]"))
	f.Add([]byte("\n\n  http://late.example/"))
	f.Add([]byte(`["a"`))
	f.Add([]byte(`["a"] trailing`))
	f.Add([]byte("[\"\\u00e9\\ud800\", \"\xff\"]"))
	f.Add([]byte(strings.Repeat("x", maxSeedLine+10) + "\nhttp://after.example/\n"))
	f.Add([]byte(strings.Repeat("y", maxSeedLine-1) + "\n" + strings.Repeat("z", maxSeedLine)))
	f.Fuzz(func(t *testing.T, body []byte) {
		var got []seedEvent
		err := readSeeds(bytes.NewReader(body), func(line int, raw string) error {
			got = append(got, seedEvent{line, raw, false})
			return nil
		}, func(line int, raw, msg string) {
			if msg == "" || len(raw) > maxBadSeedMs {
				t.Fatalf("bad line %d: empty reason or an unbounded echo (%d bytes)", line, len(raw))
			}
			got = append(got, seedEvent{line, "", true})
		})
		if err != nil && !errors.Is(err, errSeedBody) {
			t.Fatalf("readSeeds: %v (not a body error)", err)
		}
		for i := 1; i < len(got); i++ {
			if got[i].line <= got[i-1].line {
				t.Fatalf("line numbers not increasing: %v", got)
			}
		}
		want, ok := refSeeds(body)
		if !ok {
			if err == nil {
				t.Fatalf("invalid JSON body accepted: %q", body)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid body refused: %v", err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("readSeeds = %v\nwant        %v", got, want)
		}
	})
}

// FuzzSeedsHandler posts arbitrary bodies to POST /v1/seeds of a node that
// refuses what urlscope.Normalize refuses: never a panic or a 500, always a JSON
// answer whose counts add up.
func FuzzSeedsHandler(f *testing.F) {
	f.Add([]byte("http://a.example/\nhttp://b.example/x\nftp://c/\n"))
	f.Add([]byte(`["http://a.example/", "mailto:x@y", 3]`))
	f.Add([]byte(`[`))
	f.Add([]byte("http://[::1]:99999/\nhttp://a.example:0/\nhttp://\x01x/\n"))
	f.Add([]byte(strings.Repeat("http://a.example/", 5000)))
	f.Fuzz(func(t *testing.T, body []byte) {
		n := &fakeNode{refuse: func(raw string) string {
			if _, err := urlscope.Normalize(strings.TrimSpace(raw)); err != nil {
				return err.Error()
			}
			return ""
		}}
		s, err := New(Config{Node: n})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/seeds", bytes.NewReader(body)))
		if rec.Code != 200 && rec.Code != 400 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var res SeedResult
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatalf("answer is not a SeedResult: %v: %s", err, rec.Body)
		}
		if len(res.Bad) > maxBadSeeds || len(res.Bad) > res.BadTotal || res.Added != n.accepted || res.Added+res.BadTotal > res.Given {
			t.Fatalf("counts do not add up: %+v (accepted %d)", res, n.accepted)
		}
		for i := 1; i < len(res.Bad); i++ {
			if res.Bad[i].Line <= res.Bad[i-1].Line {
				t.Fatalf("bad lines not in line order: %+v", res.Bad)
			}
		}
		if (rec.Code == 400) != (res.BadTotal > 0 || res.Error != "") {
			t.Fatalf("status %d with %d bad lines and error %q", rec.Code, res.BadTotal, res.Error)
		}
	})
}
