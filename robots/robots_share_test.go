package robots

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestRobotsShared: a robots.txt one cache fetched, handed to another cache
// (Config.Shared -> Import), gives the same decisions there without a
// fetch, and expires at the same time as the original.
func TestRobotsShared(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	for _, tc := range []struct {
		name   string
		status int
		body   string
		paths  []string
	}{
		{"rules", 200, "User-agent: *\nDisallow: /private\nAllow: /private/ok\nCrawl-delay: 2\n\nUser-agent: other\nDisallow: /\n", []string{"/", "/private", "/private/x", "/private/ok", "/a?b=c"}},
		{"ours", 200, "User-agent: phasecrawl\nDisallow: /x*.php\n\nUser-agent: *\nDisallow: /\n", []string{"/", "/x1.php", "/y/x.php", "/robots.txt"}},
		{"not found", 404, "", []string{"/", "/private"}},
		{"unavailable", 503, "", []string{"/", "/private"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Record
			a := NewCache(Config{UserAgent: "phasecrawl/1.0", Now: clock, Shared: func(r Record) { got = append(got, r) }})
			b := NewCache(Config{UserAgent: "phasecrawl/1.0", Now: clock})
			fetches := 0
			get := func(context.Context, string) (int, http.Header, []byte, error) {
				fetches++
				return tc.status, http.Header{}, []byte(tc.body), nil
			}
			noGet := func(context.Context, string) (int, http.Header, []byte, error) {
				t.Fatal("the importing cache fetched robots.txt itself")
				return 0, nil, nil, nil
			}
			for _, p := range tc.paths {
				u, _ := url.Parse("http://h.test" + p)
				wantOK, wantDelay, wantErr := a.Check(context.Background(), u, get)
				if len(got) != 1 {
					t.Fatalf("shared %d records, want 1", len(got))
				}
				if p == tc.paths[0] {
					if got[0].Key != "http://h.test" || got[0].Status != tc.status || !got[0].Fetched.Equal(now) {
						t.Fatalf("record = %+v", got[0])
					}
					b.Import(got[0])
				}
				ok, delay, err := b.Check(context.Background(), u, noGet)
				if ok != wantOK || delay != wantDelay || (err == nil) != (wantErr == nil) {
					t.Errorf("%s: imported = %v %v %v, fetched = %v %v %v", p, ok, delay, err, wantOK, wantDelay, wantErr)
				}
			}
			if fetches != 1 {
				t.Errorf("fetched %d times, want 1", fetches)
			}
			// Both copies expire together: then b fetches for itself.
			ttl := 24 * time.Hour
			if tc.status == 503 {
				ttl = 10 * time.Minute
			}
			now = now.Add(ttl)
			u, _ := url.Parse("http://h.test/")
			refetched := 0
			_, _, _ = b.Check(context.Background(), u, func(context.Context, string) (int, http.Header, []byte, error) {
				refetched++
				return 404, http.Header{}, nil, nil
			})
			if refetched != 1 {
				t.Errorf("after the TTL the importer fetched %d times, want 1", refetched)
			}
			now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		})
	}
}

// TestRobotsImportKeepsNewer: an older record does not replace a newer copy,
// and an expired one is ignored.
func TestRobotsImportKeepsNewer(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := NewCache(Config{Now: func() time.Time { return now }})
	u, _ := url.Parse("http://h.test/private")
	r.Import(Record{Key: "http://h.test", Status: 200, Body: []byte("User-agent: *\nDisallow: /private\n"), Fetched: now.Add(-time.Hour)})
	r.Import(Record{Key: "http://h.test", Status: 404, Fetched: now.Add(-2 * time.Hour)})
	r.Import(Record{Key: "http://other.test", Status: 404, Fetched: now.Add(-25 * time.Hour)})
	ok, _, err := r.Check(context.Background(), u, func(context.Context, string) (int, http.Header, []byte, error) {
		t.Fatal("fetched")
		return 0, nil, nil, nil
	})
	if ok || err != nil {
		t.Fatalf("/private allowed=%v err=%v: the older allow-all replaced the newer rules", ok, err)
	}
	fetched := false
	o, _ := url.Parse("http://other.test/")
	_, _, _ = r.Check(context.Background(), o, func(context.Context, string) (int, http.Header, []byte, error) {
		fetched = true
		return 404, nil, nil, nil
	})
	if !fetched {
		t.Fatal("an expired record was imported")
	}
}
