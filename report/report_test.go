package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func entry(u string, sec int, status int, bytes int64, mime, reason string) archive.LogEntry {
	return archive.LogEntry{Time: t0.Add(time.Duration(sec) * time.Second), URL: u, Status: status, Bytes: bytes, MIME: mime, Reason: reason}
}

func TestTallyHosts(t *testing.T) {
	tests := []struct {
		name    string
		entries []archive.LogEntry
		refused [][3]string // host, reason, count
		want    []Host
	}{
		{name: "empty"},
		{
			name: "pages, errors and times",
			entries: []archive.LogEntry{
				entry("http://a.test/", 5, 200, 100, "text/html", "ok"),
				entry("http://a.test/x", 2, 404, 10, "text/html", "http_4xx"),
				entry("http://a.test/y", 9, 0, 0, "", "timeout"),
				entry("http://a.test/r", 7, 301, 0, "", "redirect"),
				entry("http://a.test/robots-denied", 8, 0, 0, "", "robots"),
				entry("http://B.test:8080/p?q", 1, 503, 5, "text/plain", "http_5xx"),
			},
			want: []Host{
				{Host: "a.test", Requests: 5, Pages: 3, Bytes: 110, Errors: 2, ErrorsByKind: map[string]int64{"http_4xx": 1, "timeout": 1},
					FirstFetch: ptr(t0.Add(2 * time.Second)), LastFetch: ptr(t0.Add(9 * time.Second))},
				{Host: "b.test:8080", Requests: 1, Pages: 1, Bytes: 5, Errors: 1, ErrorsByKind: map[string]int64{"http_5xx": 1},
					FirstFetch: ptr(t0.Add(time.Second)), LastFetch: ptr(t0.Add(time.Second))},
			},
		},
		{
			name:    "refusals of seen hosts only",
			entries: []archive.LogEntry{entry("https://a.test/", 0, 200, 1, "text/html", "ok")},
			refused: [][3]string{{"a.test", "cap", "3"}, {"a.test", "depth", "1"}, {"a.test", "cap", "2"}, {"unseen.test", "cap", "7"}},
			want: []Host{{Host: "a.test", Requests: 1, Pages: 1, Bytes: 1, Refused: 6, RefusedByReason: map[string]int64{"cap": 5, "depth": 1},
				FirstFetch: ptr(t0), LastFetch: ptr(t0)}},
		},
		{
			name:    "a URL without a host is not counted",
			entries: []archive.LogEntry{entry("not a url", 0, 200, 1, "", "ok")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta := NewTally()
			for _, e := range tt.entries {
				ta.AddEntry(e)
			}
			for _, r := range tt.refused {
				var n int64
				fmt.Sscan(r[2], &n)
				ta.AddRefused(r[0], r[1], n)
			}
			got := SortHosts(ta.Hosts(), SortRequests, 0)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("hosts:\n got %s\nwant %s", js(got), js(tt.want))
			}
		})
	}
}

func ptr(t time.Time) *time.Time { return &t }

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestMIMEAndStatus(t *testing.T) {
	ta := NewTally()
	for _, e := range []archive.LogEntry{
		entry("http://a.test/1", 0, 200, 100, "text/html", "ok"),
		entry("http://b.test/2", 0, 200, 50, "text/html", "ok"),
		entry("http://b.test/3", 0, 200, 7, "image/png", "ok"),
		entry("http://c.test/4", 0, 404, 3, "", "http_4xx"),
		entry("http://c.test/5", 0, 0, 0, "", "dns"), // no response: in neither report
	} {
		ta.AddEntry(e)
	}
	if got, want := ta.MIMETypes(), []Count{{"text/html", 2, 150}, {"image/png", 1, 7}, {"unknown", 1, 3}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("MIME types %v, want %v", got, want)
	}
	if got, want := ta.StatusCodes(), []Count{{"200", 3, 157}, {"404", 1, 3}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("status codes %v, want %v", got, want)
	}
}

// TestTallyBounds: what servers send (MIME types, error kinds) cannot grow
// a Tally without bound.
func TestTallyBounds(t *testing.T) {
	ta := NewTally()
	for i := range 20000 {
		ta.AddEntry(entry("http://a.test/", 0, 200, 1, fmt.Sprintf("x/y%d", i)+strings.Repeat("z", 200), "ok"))
	}
	if got := cleanMIME("text/\x1b[31mred\u00e9"); got != "text/?[31mred??" {
		t.Fatalf("cleanMIME kept %q", got)
	}
	if got := len(ta.MIMETypes()); got > maxMIMEs+1 {
		t.Fatalf("%d MIME types kept, at most %d", got, maxMIMEs+1)
	}
	for _, c := range ta.MIMETypes() {
		if len(c.Key) > maxMIMELen {
			t.Fatalf("MIME type of %d bytes kept", len(c.Key))
		}
	}
	for i := range 1000 {
		ta.AddRefused("a.test", fmt.Sprintf("rule%d", i), 1)
	}
	h := ta.Hosts()[0]
	if len(h.RefusedByReason) > maxKinds+1 || h.Refused != 1000 || h.RefusedByReason["other"] == 0 {
		t.Fatalf("refusals: %d kinds, %d in all, other %d", len(h.RefusedByReason), h.Refused, h.RefusedByReason["other"])
	}
}

func TestSortHosts(t *testing.T) {
	hs := []Host{
		{Host: "a", Queued: 5, Requests: 1, Bytes: 30, Errors: 0},
		{Host: "b", Queued: 1, Requests: 9, Bytes: 10, Errors: 2},
		{Host: "c", Queued: 5, Requests: 3, Bytes: 20, Errors: 7},
		{Host: "d", Queued: 0, Requests: 0, Bytes: 40, Errors: 2},
	}
	tests := []struct {
		by   string
		n    int
		want string
	}{
		{SortQueued, 0, "a c b d"}, // ties by name
		{SortRequests, 0, "b c a d"},
		{SortBytes, 2, "d a"},
		{SortErrors, 3, "c b d"},
		{SortQueued, 10, "a c b d"},
	}
	for _, tt := range tests {
		got := SortHosts(append([]Host(nil), hs...), tt.by, tt.n)
		var names []string
		for _, h := range got {
			names = append(names, h.Host)
		}
		if s := strings.Join(names, " "); s != tt.want {
			t.Errorf("sort %s n %d: %s, want %s", tt.by, tt.n, s, tt.want)
		}
	}
	for _, s := range []string{"queued", "requests", "bytes", "errors"} {
		if !ValidSort(s) {
			t.Errorf("ValidSort(%q) false", s)
		}
	}
	if ValidSort("pages") || ValidSort("") {
		t.Error("ValidSort accepts pages or empty")
	}
}

func TestHostOf(t *testing.T) {
	for u, want := range map[string]string{
		"http://a.test/x":          "a.test",
		"https://A.Test:8443?q":    "a.test:8443",
		"http://u:p@h.test/#f":     "h.test",
		"http://[::1]:80/":         "[::1]:80",
		"a.test/x":                 "",
		"http://h.test":            "h.test",
		"http://h.test/a://b.test": "h.test",
	} {
		if got := HostOf(u); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", u, got, want)
		}
	}
}

func TestMerge(t *testing.T) {
	a := Report{
		Hosts:       []Host{{Host: "a", Requests: 1, Pages: 1, Bytes: 10, Errors: 1, ErrorsByKind: map[string]int64{"dns": 1}, FirstFetch: ptr(t0.Add(time.Second)), LastFetch: ptr(t0.Add(time.Second))}},
		MIMETypes:   []Count{{"text/html", 1, 10}},
		StatusCodes: []Count{{"200", 1, 10}},
	}
	b := Report{
		Hosts: []Host{
			{Host: "a", Requests: 2, Pages: 2, Bytes: 5, Queued: 3, Errors: 1, ErrorsByKind: map[string]int64{"dns": 1}, Refused: 1, RefusedByReason: map[string]int64{"cap": 1}, FirstFetch: ptr(t0), LastFetch: ptr(t0.Add(time.Hour))},
			{Host: "b", Queued: 4},
		},
		MIMETypes:   []Count{{"text/html", 2, 5}, {"image/gif", 1, 1}},
		StatusCodes: []Count{{"404", 2, 5}},
	}
	got := Merge(a, b)
	want := Report{
		Hosts: []Host{
			{Host: "a", Requests: 3, Pages: 3, Bytes: 15, Queued: 3, Errors: 2, ErrorsByKind: map[string]int64{"dns": 2}, Refused: 1, RefusedByReason: map[string]int64{"cap": 1}, FirstFetch: ptr(t0), LastFetch: ptr(t0.Add(time.Hour))},
			{Host: "b", Queued: 4},
		},
		MIMETypes:   []Count{{"text/html", 3, 15}, {"image/gif", 1, 1}},
		StatusCodes: []Count{{"200", 1, 10}, {"404", 2, 5}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merge:\n got %s\nwant %s", js(got), js(want))
	}
}

// TestReadCrawlLog: the figures read from a crawl log are those its lines
// gave a Tally as they were written; a torn line is skipped, a limit reads
// only the lines before it.
func TestReadCrawlLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.log")
	live := NewTally()
	var buf bytes.Buffer
	var half int64
	for i := range 40 {
		e := entry(fmt.Sprintf("http://h%d.test/%d", i%4, i), i, 200+100*(i%3), int64(i), "text/html", []string{"ok", "redirect", "http_4xx"}[i%3])
		live.AddEntry(e)
		line, _ := json.Marshal(e)
		buf.Write(append(line, '\n'))
		if i == 19 {
			half = int64(buf.Len())
		}
	}
	buf.WriteString(`{"time":"2026-11-28T12:00:00Z","url":"http://torn.test/`)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	read := NewTally()
	lines, skipped, err := read.ReadCrawlLog(path, 0)
	if err != nil || lines != 40 || skipped != 1 {
		t.Fatalf("read %d lines, skipped %d, err %v; want 40, 1, nil", lines, skipped, err)
	}
	if got, want := SortHosts(read.Hosts(), SortBytes, 0), SortHosts(live.Hosts(), SortBytes, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("hosts read %s\nlive %s", js(got), js(want))
	}
	if !reflect.DeepEqual(read.StatusCodes(), live.StatusCodes()) || !reflect.DeepEqual(read.MIMETypes(), live.MIMETypes()) {
		t.Fatal("MIME or status report read differs from the live one")
	}
	part := NewTally()
	if lines, _, err := part.ReadCrawlLog(path, half); err != nil || lines != 20 {
		t.Fatalf("limit: %d lines, %v; want 20", lines, err)
	}
	if lines, _, err := NewTally().ReadCrawlLog(filepath.Join(t.TempDir(), "none"), 0); err != nil || lines != 0 {
		t.Fatalf("missing file: %d lines, %v", lines, err)
	}
}

func TestRefusedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), RefusedName)
	a := NewTally()
	a.AddEntry(entry("http://a.test/", 0, 200, 1, "", "ok"))
	a.AddRefused("a.test", "cap", 4)
	a.AddRefused("a.test", "trap_calendar", 2)
	if err := a.SaveRefused(path); err != nil {
		t.Fatal(err)
	}
	m, err := LoadRefused(path)
	if err != nil {
		t.Fatal(err)
	}
	b := NewTally()
	b.AddEntry(entry("http://a.test/", 0, 200, 1, "", "ok"))
	b.AddRefusedAll(m)
	if got := b.Hosts()[0].RefusedByReason; !reflect.DeepEqual(got, map[string]int64{"cap": 4, "trap_calendar": 2}) {
		t.Fatalf("refused after a reload: %v", got)
	}
	if m, err := LoadRefused(filepath.Join(t.TempDir(), "none")); err != nil || m != nil {
		t.Fatalf("missing file: %v, %v", m, err)
	}
}

func TestTallyConcurrent(t *testing.T) {
	ta := NewTally()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				ta.AddEntry(entry(fmt.Sprintf("http://h%d.test/%d", (g+i)%16, i), i, 200, 1, "text/html", "ok"))
				ta.AddRefused(fmt.Sprintf("h%d.test", i%16), "depth", 1)
			}
		}()
	}
	wg.Wait()
	var req, pages int64
	for _, h := range ta.Hosts() {
		req += h.Requests
		pages += h.Pages
	}
	if req != 8000 || pages != 8000 || ta.Len() != 16 {
		t.Fatalf("%d requests, %d pages, %d hosts; want 8000, 8000, 16", req, pages, ta.Len())
	}
}

func TestRate(t *testing.T) {
	var r Rate
	start := time.Unix(1_800_000_000, 0) // on an interval boundary
	// 3 pages/s for 60 s, then nothing for 20 min, then 2 pages in the current interval.
	for s := range 60 {
		for range 3 {
			r.Add(start.Add(time.Duration(s) * time.Second))
		}
	}
	now := start.Add(59 * time.Second)
	got := r.Samples(now, start)
	if len(got.Pages) != RateSlots || got.Pages[RateSlots-1] != 30 || got.Pages[RateSlots-6] != 30 || got.Pages[RateSlots-7] != 0 {
		t.Fatalf("samples %v", got.Pages[RateSlots-8:])
	}
	if got.PagesPerS < 2.9 || got.PagesPerS > 3.1 {
		t.Fatalf("rate %.2f pages/s over the first minute, want 3", got.PagesPerS)
	}
	// Right after the start: the rate is over the time since the start, not a full minute.
	if s := r.Samples(start.Add(5*time.Second), start.Add(-time.Second)); s.PagesPerS < 2.5 {
		t.Fatalf("rate %.2f pages/s 5 s after the start, want about 3", s.PagesPerS)
	}
	later := start.Add(20 * time.Minute)
	r.Add(later)
	r.Add(later)
	got = r.Samples(later, start)
	var sum int64
	for _, p := range got.Pages {
		sum += p
	}
	if sum != 2 || got.Pages[RateSlots-1] != 2 {
		t.Fatalf("20 minutes later: %d pages in the window (old slots not reset?)", sum)
	}
	if !got.Start.Equal(later.Add(-(RateSlots - 1) * RateInterval).Truncate(RateInterval)) {
		t.Fatalf("window starts %s", got.Start)
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	rep := Report{
		Hosts:       []Host{{Host: "a.test", Queued: 7, Requests: 3, Pages: 2, Bytes: 99, Errors: 1, ErrorsByKind: map[string]int64{"dns": 1}, RefusedByReason: map[string]int64{"cap": 2}, Refused: 2, FirstFetch: ptr(t0)}},
		MIMETypes:   []Count{{"text/html", 2, 99}},
		StatusCodes: []Count{{"200", 2, 99}},
	}
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"== hosts (1)", "a.test", "dns=1", "cap=2", "2026-11-28T12:00:00Z", "== MIME types (1)", "text/html", "== status codes (1)", " 200"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}
