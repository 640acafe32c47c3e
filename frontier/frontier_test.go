package frontier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var ctx = context.Background()

// open opens a fresh frontier in t.TempDir() (NoSync, small delay) and closes
// it at the end of the test.
func open(t testing.TB, mod func(*Options)) *Frontier {
	t.Helper()
	o := DefaultOptions(filepath.Join(t.TempDir(), "frontier.db"))
	o.NoSync = true
	o.BatchDelay = time.Millisecond
	if mod != nil {
		mod(&o)
	}
	f, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func reopen(t testing.TB, f *Frontier, mod func(*Options)) *Frontier {
	t.Helper()
	o := f.opts
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(&o)
	}
	g, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// gen returns n URLs spread over hosts hosts, named by prefix.
func gen(prefix string, hosts, n int) []NewURL {
	out := make([]NewURL, n)
	for i := range out {
		h := fmt.Sprintf("%s%d.test", prefix, i%hosts)
		out[i] = NewURL{URL: fmt.Sprintf("http://%s/p/%d", h, i), Host: h, Depth: i % 5}
	}
	return out
}

func refsOf(us []NewURL) []Ref {
	out := make([]Ref, len(us))
	for i, u := range us {
		out[i] = RefOf(u.URL)
	}
	return out
}

// scanAll returns the URLs of phase in scan order, using chunks of limit.
func scanAll(t testing.TB, f *Frontier, phase, limit int) []Record {
	t.Helper()
	var out []Record
	var cur Cursor
	for i := 0; ; i++ {
		if i > 1e6 {
			t.Fatal("scan does not terminate")
		}
		next, err := f.Scan(phase, cur, limit, func(r Record) bool {
			out = append(out, r)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if next == nil {
			return out
		}
		cur = next
	}
}

func urlsOf(rs []Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.URL
	}
	return out
}

func wantCounts(t testing.TB, f *Frontier, want Counts) {
	t.Helper()
	if got := f.Counts(); got != want {
		t.Fatalf("Counts = %+v, want %+v", got, want)
	}
}

func mustGet(t testing.TB, f *Frontier, url string) Record {
	t.Helper()
	r, ok, err := f.Get(RefOf(url))
	if err != nil || !ok {
		t.Fatalf("Get(%s) = %v, %v", url, ok, err)
	}
	return r
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Options)
		want string // substring of the error, "" = valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"zero means default", func(o *Options) { o.Phases, o.MaxTries, o.BatchSize = 0, 0, 0 }, ""},
		{"no path", func(o *Options) { o.Path = "" }, "path"},
		{"phases", func(o *Options) { o.Phases = 70000 }, "phases=70000: must be in 1..65535"},
		{"max per host", func(o *Options) { o.MaxPerHost = -1 }, "max_per_host=-1"},
		{"max tries", func(o *Options) { o.MaxTries = -2 }, "max_tries=-2: must be in 1..1000"},
		{"batch size", func(o *Options) { o.BatchSize = 2000000 }, "batch_size=2000000"},
		{"batch delay", func(o *Options) { o.BatchDelay = 2 * time.Second }, "batch_delay=2s: must be in 0..1s"},
		{"negative delay", func(o *Options) { o.BatchDelay = -1 }, "batch_delay"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions(filepath.Join(t.TempDir(), "f.db"))
			tc.mod(&o)
			f, err := Open(o)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				_ = f.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				_ = f.Close()
				t.Fatalf("Open error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestAddDedup(t *testing.T) {
	tests := []struct {
		name    string
		calls   [][]NewURL
		added   []int
		inList  int64
		checkFP string // a URL that must be stored
		host    string // its stored host
	}{
		{"single", [][]NewURL{{{URL: "http://a.test/", Host: "a.test"}}}, []int{1}, 1, "http://a.test/", "a.test"},
		{"dup in one call", [][]NewURL{{{URL: "http://a.test/", Host: "a.test"}, {URL: "http://a.test/", Host: "a.test"}, {URL: "http://a.test/x", Host: "a.test"}}}, []int{2}, 2, "http://a.test/x", "a.test"},
		{"dup across calls", [][]NewURL{{{URL: "http://a.test/", Host: "a.test"}}, {{URL: "http://a.test/", Host: "a.test"}, {URL: "http://b.test/", Host: "b.test"}}}, []int{1, 1}, 2, "http://b.test/", "b.test"},
		{"empty URL ignored", [][]NewURL{{{URL: ""}, {URL: "http://a.test/", Host: "a.test"}}}, []int{1}, 1, "http://a.test/", "a.test"},
		{"host derived and lowered", [][]NewURL{{{URL: "http://c.test:81/"}, {URL: "http://d.test/", Host: "D.Test"}}}, []int{2}, 2, "http://d.test/", "d.test"},
		{"no host ignored", [][]NewURL{{{URL: "mailto:x@y"}, {URL: "::bad"}}}, []int{0}, 0, "", ""},
		{"empty call", [][]NewURL{nil}, []int{0}, 0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := open(t, nil)
			for i, c := range tc.calls {
				n, err := f.Add(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				if n != tc.added[i] {
					t.Fatalf("call %d: added %d, want %d", i, n, tc.added[i])
				}
			}
			wantCounts(t, f, Counts{InList: tc.inList})
			if tc.checkFP != "" {
				r := mustGet(t, f, tc.checkFP)
				if r.Host != tc.host || r.State != InList || r.URL != tc.checkFP || r.Discovered.IsZero() {
					t.Fatalf("record %+v", r)
				}
			}
			if got := len(scanAll(t, f, 0, 0)); int64(got) != tc.inList {
				t.Fatalf("scan found %d, want %d", got, tc.inList)
			}
		})
	}
}

func TestAddConcurrent(t *testing.T) {
	f := open(t, func(o *Options) { o.BatchSize = 500 })
	const workers, batches, per = 8, 25, 100
	all := gen("h", 37, 4000) // workers overlap: each adds a window of the same 4000 URLs
	var wg sync.WaitGroup
	total := make([]int, workers)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for b := range batches {
				start := (w*per*3 + b*per) % (len(all) - per)
				n, err := f.Add(ctx, all[start:start+per])
				if err != nil {
					errs <- err
					return
				}
				total[w] += n
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for w := range workers {
		for b := range batches {
			start := (w*per*3 + b*per) % (len(all) - per)
			for _, u := range all[start : start+per] {
				seen[u.URL] = true
			}
		}
	}
	sum := 0
	for _, n := range total {
		sum += n
	}
	if sum != len(seen) {
		t.Fatalf("sum of added = %d, distinct URLs = %d", sum, len(seen))
	}
	wantCounts(t, f, Counts{InList: int64(len(seen))})
	got := urlsOf(scanAll(t, f, 0, 333))
	if len(got) != len(seen) {
		t.Fatalf("scan found %d, want %d", len(got), len(seen))
	}
	for _, u := range got {
		if !seen[u] {
			t.Fatalf("scan found unexpected %s", u)
		}
	}
}

func TestScanPhases(t *testing.T) {
	const nphase = 3
	f := open(t, func(o *Options) { o.Phases = nphase })
	us := gen("s", 50, 3000)
	for i := 0; i < len(us); i += 700 {
		if _, err := f.Add(ctx, us[i:min(i+700, len(us))]); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for p := range nphase {
		var want []string
		for _, u := range us {
			if PhaseOf(HostHash(u.Host), nphase) == p {
				want = append(want, u.URL)
			}
		}
		for _, limit := range []int{1, 7, 1024, 1025, 5000, 0} {
			got := urlsOf(scanAll(t, f, p, limit))
			if !slices.Equal(got, want) {
				t.Fatalf("phase %d limit %d: scan order/content differs (got %d, want %d URLs)", p, limit, len(got), len(want))
			}
		}
		total += len(want)
	}
	if total != len(us) {
		t.Fatalf("phases cover %d URLs, want %d", total, len(us))
	}
	if _, err := f.Scan(nphase, nil, 1, func(Record) bool { return true }); err == nil || !strings.Contains(err.Error(), "phase=3") {
		t.Fatalf("scan of phase out of range: err = %v", err)
	}
	if _, err := f.Scan(-1, nil, 1, func(Record) bool { return true }); err == nil {
		t.Fatal("scan of phase -1 did not fail")
	}
}

func TestScanCursor(t *testing.T) {
	f := open(t, nil)
	us := gen("c", 10, 100)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		limit    int
		stopAt   int // fn returns false on this visit (1-based), 0 = never
		visits   int
		nilAfter bool
	}{
		{"limit", 10, 0, 10, false},
		{"stop counts as visited", 10, 4, 4, false},
		{"exact end gives nil", 100, 0, 100, true},
		{"past end", 1000, 0, 100, true},
		{"unlimited", 0, 0, 100, true},
		{"stop at last", 100, 100, 100, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			visits := 0
			cur, err := f.Scan(0, nil, tc.limit, func(r Record) bool {
				visits++
				return visits != tc.stopAt
			})
			if err != nil {
				t.Fatal(err)
			}
			if visits != tc.visits || (cur == nil) != tc.nilAfter {
				t.Fatalf("visits %d (want %d), cursor %x (nil wanted: %v)", visits, tc.visits, cur, tc.nilAfter)
			}
			if cur == nil {
				return
			}
			var next []string
			if _, err := f.Scan(0, cur, 1, func(r Record) bool { next = append(next, r.URL); return true }); err != nil {
				t.Fatal(err)
			}
			if tc.visits < len(us) && (len(next) != 1 || next[0] != us[tc.visits].URL) {
				t.Fatalf("continuation got %v, want %s", next, us[tc.visits].URL)
			}
		})
	}
	// A cursor stays valid when the entries before and at it are removed.
	cur, _ := f.Scan(0, nil, 10, func(Record) bool { return true })
	if err := f.MarkInProgress(ctx, refsOf(us[:10])); err != nil {
		t.Fatal(err)
	}
	var got []string
	if _, err := f.Scan(0, cur, 2, func(r Record) bool { got = append(got, r.URL); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{us[10].URL, us[11].URL}) {
		t.Fatalf("after removal got %v", got)
	}
	for _, bad := range []Cursor{{1, 2, 3}, queueKey(nil, 1, 5)} {
		if _, err := f.Scan(0, bad, 1, func(Record) bool { return true }); err == nil {
			t.Fatalf("bad cursor %x accepted", bad)
		}
	}
}

func TestTransitions(t *testing.T) {
	us := gen("t", 3, 6)
	fp := refsOf(us)
	type step struct {
		do   func(f *Frontier) error
		want Counts
	}
	tests := []struct {
		name  string
		steps []step
		check func(t *testing.T, f *Frontier)
	}{
		{"mark then complete", []step{
			{func(f *Frontier) error { return f.MarkInProgress(ctx, fp[:2]) }, Counts{InList: 4, InProgress: 2}},
			{func(f *Frontier) error {
				return f.Finish(ctx, []Result{{FP: fp[0].FP, Host: fp[0].Host, State: Completed, Status: 200, Reason: "ok"}, {FP: fp[1].FP, Host: fp[1].Host, State: Completed, Status: 404, Reason: "http_error"}})
			}, Counts{InList: 4, Completed: 2}},
		}, func(t *testing.T, f *Frontier) {
			r := mustGet(t, f, us[1].URL)
			if r.State != Completed || r.Status != 404 || r.Reason != "http_error" || r.Tries != 1 || r.Fetched.IsZero() {
				t.Fatalf("record %+v", r)
			}
		}},
		{"requeue keeps original position", []step{
			{func(f *Frontier) error { return f.MarkInProgress(ctx, fp[:3]) }, Counts{InList: 3, InProgress: 3}},
			{func(f *Frontier) error { return f.Requeue(ctx, []Ref{fp[1], fp[0], fp[2]}) }, Counts{InList: 6}},
		}, func(t *testing.T, f *Frontier) {
			if got := urlsOf(scanAll(t, f, 0, 0)); !slices.Equal(got, urlsOf(toRecords(us))) {
				t.Fatalf("order after requeue %v", got)
			}
		}},
		{"stale and unknown ignored", []step{
			{func(f *Frontier) error {
				return f.Finish(ctx, []Result{{FP: fp[0].FP, Host: fp[0].Host, State: Completed}})
			}, Counts{InList: 6}},
			{func(f *Frontier) error { return f.Requeue(ctx, []Ref{fp[0], {FP: 12345, Host: fp[0].Host}}) }, Counts{InList: 6}},
			{func(f *Frontier) error {
				return f.MarkInProgress(ctx, []Ref{fp[0], fp[0], {FP: 999, Host: fp[0].Host}})
			}, Counts{InList: 5, InProgress: 1}},
			{func(f *Frontier) error { return f.MarkInProgress(ctx, []Ref{fp[0]}) }, Counts{InList: 5, InProgress: 1}},
		}, nil},
		{"bad result state", []step{
			{func(f *Frontier) error { return f.MarkInProgress(ctx, fp[:1]) }, Counts{InList: 5, InProgress: 1}},
			{func(f *Frontier) error {
				if err := f.Finish(ctx, []Result{{FP: fp[0].FP, Host: fp[0].Host, State: InList}}); err == nil {
					return errors.New("Finish with state in_list accepted")
				}
				return nil
			}, Counts{InList: 5, InProgress: 1}},
		}, nil},
		{"stalled then released at original position", []step{
			{func(f *Frontier) error { return f.MarkInProgress(ctx, fp[:2]) }, Counts{InList: 4, InProgress: 2}},
			{func(f *Frontier) error {
				return f.Finish(ctx, []Result{{FP: fp[0].FP, Host: fp[0].Host, State: Stalled, Reason: "timeout", RetryAt: time.Unix(1000, 0)}})
			}, Counts{InList: 4, InProgress: 1, Stalled: 1}},
			{func(f *Frontier) error {
				n, err := f.ReleaseStalled(ctx, time.Unix(999, 0), 10)
				if n != 0 {
					return fmt.Errorf("released %d before due", n)
				}
				return err
			}, Counts{InList: 4, InProgress: 1, Stalled: 1}},
			{func(f *Frontier) error {
				n, err := f.ReleaseStalled(ctx, time.Unix(1000, 0), 10)
				if n != 1 {
					return fmt.Errorf("released %d, want 1", n)
				}
				return err
			}, Counts{InList: 5, InProgress: 1}},
		}, func(t *testing.T, f *Frontier) {
			recs := scanAll(t, f, 0, 0)
			if recs[0].URL != us[0].URL || recs[0].Tries != 1 {
				t.Fatalf("released URL not first in queue: %+v", recs[0])
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := open(t, nil)
			if _, err := f.Add(ctx, us); err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				if err := s.do(f); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				wantCounts(t, f, s.want)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
			// Counters are persisted with the states.
			want := f.Counts()
			f = reopen(t, f, nil)
			want.InList, want.InProgress = want.InList+want.InProgress, 0
			wantCounts(t, f, want)
		})
	}
}

func toRecords(us []NewURL) []Record {
	out := make([]Record, len(us))
	for i, u := range us {
		out[i] = Record{URL: u.URL}
	}
	return out
}

func TestStalledMaxTries(t *testing.T) {
	f := open(t, func(o *Options) { o.MaxTries = 3 })
	u := NewURL{URL: "http://slow.test/", Host: "slow.test"}
	if _, err := f.Add(ctx, []NewURL{u}); err != nil {
		t.Fatal(err)
	}
	fp := RefOf(u.URL)
	if _, ok := f.NextStalled(); ok {
		t.Fatal("NextStalled on an empty lane")
	}
	base := time.Unix(1_700_000_000, 0)
	for try := 1; try <= 3; try++ {
		if err := f.MarkInProgress(ctx, []Ref{fp}); err != nil {
			t.Fatal(err)
		}
		retry := base.Add(time.Duration(try) * time.Hour)
		if err := f.Finish(ctx, []Result{{FP: fp.FP, Host: fp.Host, State: Stalled, Reason: "timeout", RetryAt: retry}}); err != nil {
			t.Fatal(err)
		}
		r := mustGet(t, f, u.URL)
		if r.Tries != try {
			t.Fatalf("try %d: Tries = %d", try, r.Tries)
		}
		if try == 3 {
			if r.State != Completed || r.Reason != "timeout" {
				t.Fatalf("after MaxTries: %+v", r)
			}
			wantCounts(t, f, Counts{Completed: 1})
			if _, ok := f.NextStalled(); ok {
				t.Fatal("completed URL still in the retry lane")
			}
			break
		}
		wantCounts(t, f, Counts{Stalled: 1})
		if next, ok := f.NextStalled(); !ok || !next.Equal(retry) || !r.NextTry.Equal(retry) {
			t.Fatalf("NextStalled = %v %v, record NextTry %v, want %v", next, ok, r.NextTry, retry)
		}
		if n, err := f.ReleaseStalled(ctx, retry.Add(-time.Nanosecond), 0); err != nil || n != 0 {
			t.Fatalf("early release = %d, %v", n, err)
		}
		if n, err := f.ReleaseStalled(ctx, retry, 0); err != nil || n != 1 {
			t.Fatalf("release = %d, %v", n, err)
		}
		wantCounts(t, f, Counts{InList: 1})
	}
	hs, ok, err := f.Host("slow.test")
	if err != nil || !ok || hs.Fetched != 3 || hs.Errors != 3 || hs.Admitted != 1 {
		t.Fatalf("host stats %+v %v %v", hs, ok, err)
	}
}

func TestReleaseStalledLimit(t *testing.T) {
	f := open(t, func(o *Options) { o.MaxTries = 5 })
	us := gen("r", 4, 20)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	fps := refsOf(us)
	if err := f.MarkInProgress(ctx, fps); err != nil {
		t.Fatal(err)
	}
	var rs []Result
	for i, fp := range fps {
		rs = append(rs, Result{FP: fp.FP, Host: fp.Host, State: Stalled, Reason: "conn_error", RetryAt: time.Unix(int64(100+i), 0)})
	}
	rs[0].RetryAt = time.Unix(10, 0)
	if err := f.Finish(ctx, rs); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		now   int64
		limit int
		want  int
	}{{50, 100, 1}, {105, 3, 3}, {105, 100, 2}, {105, 100, 0}, {1000, 0, 14}}
	for _, s := range steps {
		n, err := f.ReleaseStalled(ctx, time.Unix(s.now, 0), s.limit)
		if err != nil || n != s.want {
			t.Fatalf("ReleaseStalled(%d, %d) = %d, %v; want %d", s.now, s.limit, n, err, s.want)
		}
	}
	wantCounts(t, f, Counts{InList: 20})
	if got := urlsOf(scanAll(t, f, 0, 0)); !slices.Equal(got, urlsOf(toRecords(us))) {
		t.Fatal("released URLs not back at their original positions")
	}
	// A zero RetryAt is due at once.
	if err := f.MarkInProgress(ctx, fps[:1]); err != nil {
		t.Fatal(err)
	}
	if err := f.Finish(ctx, []Result{{FP: fps[0].FP, Host: fps[0].Host, State: Stalled}}); err != nil {
		t.Fatal(err)
	}
	if n, err := f.ReleaseStalled(ctx, time.Now(), 0); err != nil || n != 1 {
		t.Fatalf("release of zero RetryAt = %d, %v", n, err)
	}
}

func TestMaxPerHost(t *testing.T) {
	f := open(t, func(o *Options) { o.MaxPerHost = 5 })
	var us []NewURL
	for i := range 10 {
		us = append(us, NewURL{URL: fmt.Sprintf("http://a.test/%d", i), Host: "a.test"})
	}
	for i := range 3 {
		us = append(us, NewURL{URL: fmt.Sprintf("http://b.test/%d", i), Host: "b.test"})
	}
	n, err := f.Add(ctx, us)
	if err != nil || n != 8 {
		t.Fatalf("Add = %d, %v; want 8", n, err)
	}
	if f.Skipped() != 5 {
		t.Fatalf("Skipped = %d, want 5", f.Skipped())
	}
	// Duplicates of admitted URLs are not "skipped"; the limit persists.
	f = reopen(t, f, nil)
	n, err = f.Add(ctx, append(us[:2:2], NewURL{URL: "http://a.test/new", Host: "a.test"}, NewURL{URL: "http://b.test/new", Host: "b.test"}))
	if err != nil || n != 1 {
		t.Fatalf("Add after reopen = %d, %v; want 1", n, err)
	}
	if f.Skipped() != 6 {
		t.Fatalf("Skipped = %d, want 6", f.Skipped())
	}
	for host, want := range map[string]int64{"a.test": 5, "b.test": 4} {
		hs, ok, err := f.Host(host)
		if err != nil || !ok || hs.Admitted != want {
			t.Fatalf("Host(%s) = %+v, %v, %v; want Admitted %d", host, hs, ok, err, want)
		}
	}
	if _, ok, err := f.Host("none.test"); ok || err != nil {
		t.Fatalf("unknown host: %v %v", ok, err)
	}
}

func TestHostStats(t *testing.T) {
	f := open(t, nil)
	us := gen("hs", 1, 5)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	fps := refsOf(us)
	if err := f.MarkInProgress(ctx, fps); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	err := f.Finish(ctx, []Result{
		{FP: fps[0].FP, Host: fps[0].Host, State: Completed, Status: 200, Reason: "ok", Bytes: 1000},
		{FP: fps[1].FP, Host: fps[1].Host, State: Completed, Status: 200, Bytes: 500},
		{FP: fps[2].FP, Host: fps[2].Host, State: Completed, Status: 404, Reason: "http_error", Bytes: 10},
		{FP: fps[3].FP, Host: fps[3].Host, State: Completed, Reason: "robots", Delay: 3 * time.Second},
		{FP: fps[4].FP, Host: fps[4].Host, State: Stalled, Reason: "timeout", Bytes: -7}, // Delay 0 keeps 3s
	})
	if err != nil {
		t.Fatal(err)
	}
	hs, ok, err := f.Host(strings.ToUpper(us[0].Host))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if hs.Host != us[0].Host || hs.Admitted != 5 || hs.Fetched != 5 || hs.Errors != 3 || hs.Bytes != 1510 || hs.LastFetch.Before(before.Add(-time.Second)) ||
		hs.Delay != 3*time.Second {
		t.Fatalf("host stats %+v", hs)
	}
}

func TestHostStatsCodec(t *testing.T) {
	h := HostStats{Host: "a.test", Admitted: 7, Fetched: 6, Errors: 1, Bytes: 1 << 40, LastFetch: time.Unix(1700000000, 5), Delay: 1500 * time.Millisecond}
	got, err := decodeHost("a.test", appendHost(nil, &h))
	if err != nil || got != h {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, h)
	}
	// A record written before Delay was kept decodes with Delay 0.
	old := appendHost(nil, &h)
	old = old[:len(old)-len(binary.AppendVarint(nil, int64(h.Delay)))]
	got, err = decodeHost("a.test", old)
	h.Delay = 0
	if err != nil || got != h {
		t.Fatalf("old record: %+v, %v; want %+v", got, err, h)
	}
	if _, err := decodeHost("a.test", old[:len(old)-1]); err == nil {
		t.Fatal("a truncated record decoded without error")
	}
	// Rounds without round times (written before they were kept) decode
	// with zero times; with them, everything comes back.
	r := HostStats{Host: "a.test", Admitted: 7, Fetched: 6, RoundFetched: 3, RoundBytes: 30, LastRoundFetched: 7, LastRoundBytes: 70}
	v := appendHost(nil, &r)
	if got, err := decodeHost("a.test", v); err != nil || got != r {
		t.Fatalf("rounds without times: %+v, %v; want %+v", got, err, r)
	}
	r.RoundTime, r.LastRoundTime = 1500*time.Millisecond, 9*time.Second
	v2 := appendHost(nil, &r)
	if got, err := decodeHost("a.test", v2); err != nil || got != r || len(v2) <= len(v) {
		t.Fatalf("rounds with times: %+v, %v; want %+v", got, err, r)
	}
	r = HostStats{Host: "a.test", Admitted: 1, LastRoundTime: time.Second} // times without counters
	if got, err := decodeHost("a.test", appendHost(nil, &r)); err != nil || got != r {
		t.Fatalf("times only: %+v, %v; want %+v", got, err, r)
	}
}

func TestSetPhases(t *testing.T) {
	f := open(t, nil)
	us := gen("p", 40, 2000)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	inProg := refsOf(us[:100])
	if err := f.MarkInProgress(ctx, inProg); err != nil {
		t.Fatal(err)
	}
	set := us[100:]
	check := func(f *Frontier, n int) {
		t.Helper()
		if f.Phases() != n {
			t.Fatalf("Phases = %d, want %d", f.Phases(), n)
		}
		total := 0
		for p := range n {
			var want []string
			for _, u := range set {
				if PhaseOf(HostHash(u.Host), n) == p {
					want = append(want, u.URL)
				}
			}
			if got := urlsOf(scanAll(t, f, p, 500)); !slices.Equal(got, want) {
				t.Fatalf("nphase %d phase %d: got %d URLs, want %d in insertion order", n, p, len(got), len(want))
			}
			total += len(want)
		}
		if total != len(set) {
			t.Fatalf("total %d", total)
		}
	}
	for _, n := range []int{4, 7, 1, 3} {
		if err := f.SetPhases(n); err != nil {
			t.Fatal(err)
		}
		check(f, n)
	}
	if err := f.SetPhases(0); err == nil {
		t.Fatal("SetPhases(0) accepted")
	}
	// Requeue after the re-key lands in the new phase at the original position.
	if err := f.Requeue(ctx, inProg); err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, u := range us {
		pos[u.URL] = i
	}
	for p := range 3 {
		recs := scanAll(t, f, p, 0)
		for i := 1; i < len(recs); i++ {
			if pos[recs[i-1].URL] > pos[recs[i].URL] {
				t.Fatalf("phase %d out of order at %d", p, i)
			}
		}
	}
	if err := f.MarkInProgress(ctx, inProg); err != nil {
		t.Fatal(err)
	}
	// Open with another Phases re-keys; an interrupted re-key resumes.
	f = reopen(t, f, func(o *Options) { o.Phases = 5 })
	set = us // the in-progress URLs were recovered
	check(f, 5)
	path := f.opts.Path
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		return errors.Join(m.Put(mRekey, []byte{1}), m.Put(mNPhase, []byte{0, 0, 0, 0, 0, 0, 0, 2}))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	g, err := Open(Options{Path: path, Phases: 2, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	check(g, 2)
}

func TestRecoveryAfterCrash(t *testing.T) {
	f := open(t, nil)
	us := gen("k", 7, 500)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkInProgress(ctx, refsOf(us[100:300])); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkInProgress(ctx, refsOf(us[:10])); err != nil {
		t.Fatal(err)
	}
	if err := f.Finish(ctx, []Result{{FP: Fingerprint(us[0].URL), Host: us[0].Host, State: Completed}}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, f, Counts{InList: 290, InProgress: 209, Completed: 1})
	// "kill -9": close without requeueing the in-progress URLs.
	f = reopen(t, f, nil)
	wantCounts(t, f, Counts{InList: 499, Completed: 1})
	if got := urlsOf(scanAll(t, f, 0, 64)); !slices.Equal(got, urlsOf(toRecords(us[1:]))) {
		t.Fatal("recovered URLs not at their original positions")
	}
	if r := mustGet(t, f, us[150].URL); r.State != InList {
		t.Fatalf("recovered record %+v", r)
	}
}

// TestKill9 adds URLs in a child process, kills it with SIGKILL while it is
// still adding, and checks that every acknowledged Add survived and that
// IN_PROGRESS URLs come back as IN_LIST.
func TestKill9(t *testing.T) {
	if os.Getenv("FRONTIER_CHILD") != "" {
		child()
		return
	}
	path := filepath.Join(t.TempDir(), "frontier.db")
	acked, err := runAndKill(t, path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(DefaultOptions(path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := f.Counts()
	if c.InProgress != 0 || c.InList < int64(acked) {
		t.Fatalf("after kill -9: counts %+v, %d acknowledged", c, acked)
	}
	for _, u := range childURLs(acked) {
		r, ok, err := f.Get(RefOf(u.URL))
		if err != nil || !ok || r.State != InList {
			t.Fatalf("acknowledged %s lost: %+v %v %v", u.URL, r, ok, err)
		}
	}
	if n := len(scanAll(t, f, 0, 0)); int64(n) != c.InList {
		t.Fatalf("queue holds %d, counts say %d", n, c.InList)
	}
}

func childURLs(n int) []NewURL { return gen("kill", 13, n) }

// TestScanFiltered: records whose host the filter refuses are skipped (not
// decoded, not passed to fn) but count towards the limit, and a walk in
// small steps with the returned cursors sees exactly the accepted records
// in queue order, the same as an unfiltered scan filtered afterwards.
func TestScanFiltered(t *testing.T) {
	f := open(t, nil)
	us := gen("f", 7, 3000)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	for _, u := range us {
		hosts[u.Host] = true
	}
	var keep []string // every other host
	i := 0
	for h := range hosts {
		if i%2 == 0 {
			keep = append(keep, h)
		}
		i++
	}
	accept := func(h string) bool { return slices.Contains(keep, h) }
	var want []string
	for _, u := range us {
		if accept(u.Host) {
			want = append(want, u.URL)
		}
	}
	for _, limit := range []int{1, 5, 1024, 1500, 0} {
		var got []string
		var cur Cursor
		steps := 0
		for {
			next, err := f.ScanFiltered(0, cur, limit, accept, func(r Record) bool {
				if !accept(r.Host) {
					t.Fatalf("fn got a refused host %s", r.Host)
				}
				got = append(got, r.URL)
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if steps++; steps > len(us)+1 {
				t.Fatalf("limit %d: no progress after %d steps", limit, steps)
			}
			if next == nil {
				break
			}
			cur = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: got %d URLs, want %d in queue order", limit, len(got), len(want))
		}
		if limit > 0 && steps < len(us)/limit {
			t.Fatalf("limit %d: %d steps, skipped records must count towards the limit (want >= %d)", limit, steps, len(us)/limit)
		}
	}
}

// TestBatchDelayLull: under light load a write does not wait the whole
// BatchDelay: the batch is committed once no write has come for a quarter
// of it.
func TestBatchDelayLull(t *testing.T) {
	f := open(t, func(o *Options) { o.BatchDelay = time.Second })
	start := time.Now()
	if _, err := f.Add(ctx, gen("lull", 1, 1)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 800*time.Millisecond {
		t.Fatalf("a lone write took %s, want about 250ms (a quarter of the 1s delay)", d)
	}
}

// TestBeforeCommit: the hook runs on every commit of callers' changes,
// before the changes are committed, and not after it is removed.
func TestBeforeCommit(t *testing.T) {
	f := open(t, nil)
	var calls, inListSeen atomic.Int64
	f.SetBeforeCommit(func() {
		calls.Add(1)
		inListSeen.Store(f.Counts().InList)
	})
	for i, want := range []int64{0, 1} {
		u := fmt.Sprintf("http://a.test/%d", i)
		if n, err := f.Add(ctx, []NewURL{{URL: u, Host: "a.test"}}); err != nil || n != 1 {
			t.Fatalf("Add %s: %d, %v", u, n, err)
		}
		if c := calls.Load(); c != int64(i+1) {
			t.Fatalf("after %d adds the hook ran %d times", i+1, c)
		}
		if got := inListSeen.Load(); got != want {
			t.Fatalf("the hook saw %d URLs IN_LIST, want %d: it ran after the commit", got, want)
		}
	}
	f.SetBeforeCommit(nil)
	if _, err := f.Add(ctx, []NewURL{{URL: "http://a.test/x", Host: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	if c := calls.Load(); c != 2 {
		t.Fatalf("the removed hook ran: %d calls", c)
	}
}

// A Free stall (a server asking to be called back later) does not use up a
// try: the URL stays in the retry lane however many times it comes back,
// and its counted tries still end it at MaxTries.
func TestStalledFreeKeepsTries(t *testing.T) {
	f := open(t, func(o *Options) { o.MaxTries = 2 })
	u := NewURL{URL: "http://busy.test/", Host: "busy.test"}
	if _, err := f.Add(ctx, []NewURL{u}); err != nil {
		t.Fatal(err)
	}
	ref := RefOf(u.URL)
	retry := time.Unix(1_700_000_000, 0)
	steps := []struct {
		free      bool
		wantTries int
		wantState State
	}{
		{true, 0, Stalled},
		{true, 0, Stalled},
		{true, 0, Stalled},
		{false, 1, Stalled},
		{true, 1, Stalled},
		{false, 2, Completed},
	}
	for i, s := range steps {
		if err := f.MarkInProgress(ctx, []Ref{ref}); err != nil {
			t.Fatal(err)
		}
		if err := f.Finish(ctx, []Result{{FP: ref.FP, Host: ref.Host, State: Stalled, Status: 429, Reason: "backoff", RetryAt: retry, Free: s.free}}); err != nil {
			t.Fatal(err)
		}
		r := mustGet(t, f, u.URL)
		if r.Tries != s.wantTries || r.State != s.wantState {
			t.Fatalf("step %d (free %v): tries %d state %s, want %d %s", i, s.free, r.Tries, r.State, s.wantTries, s.wantState)
		}
		if r.State == Stalled {
			if n, err := f.ReleaseStalled(ctx, retry, 0); err != nil || n != 1 {
				t.Fatalf("step %d: release = %d, %v", i, n, err)
			}
		}
	}
}

// TestAddNew: AddNew inserts as Add does and returns exactly the URLs it
// inserted, as given (Redirects kept), in order: not the known ones, not a
// duplicate within the call, not one without a host, not one over
// MaxPerHost.
func TestAddNew(t *testing.T) {
	f := open(t, func(o *Options) { o.MaxPerHost = 3 })
	if _, err := f.Add(ctx, []NewURL{{URL: "http://a.test/known", Host: "a.test"}}); err != nil {
		t.Fatal(err)
	}
	got, err := f.AddNew(ctx, []NewURL{
		{URL: "http://a.test/known", Host: "a.test"},
		{URL: "mailto:x@y"},
		{URL: "http://a.test/1", Host: "a.test", Redirects: 2},
		{URL: "http://a.test/1", Host: "a.test"},
		{URL: "http://b.test/", Depth: 4},
		{URL: "http://a.test/2", Host: "a.test"},
		{URL: "http://a.test/3", Host: "a.test"}, // a.test's fourth: over MaxPerHost
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []NewURL{{URL: "http://a.test/1", Host: "a.test", Redirects: 2}, {URL: "http://b.test/", Depth: 4}, {URL: "http://a.test/2", Host: "a.test"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("AddNew = %+v, want %+v", got, want)
	}
	wantCounts(t, f, Counts{InList: 4})
	if got, err := f.AddNew(ctx, want); err != nil || len(got) != 0 {
		t.Fatalf("AddNew of known URLs = %+v, %v; want none", got, err)
	}
	refs := []Ref{RefOf("http://a.test/1"), RefOf("http://a.test/3"), {FP: Fingerprint("http://b.test/"), Host: "B.test"}, RefOf("http://c.test/")}
	if known, err := f.Known(refs); err != nil || !reflect.DeepEqual(known, []bool{true, false, true, false}) {
		t.Fatalf("Known = %v, %v; want [true false true false]", known, err)
	}
}
