package frontier

import (
	"crypto/sha1"
	"fmt"
	"testing"
	"time"
)

// finishCaptured marks us IN_PROGRESS and finishes them COMPLETED, each
// with the capture of its body in bodies and Durable durable.
func finishCaptured(t *testing.T, f *Frontier, us []NewURL, bodies []string, at time.Time, durable bool) {
	t.Helper()
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	if err := f.MarkInProgress(ctx, refsOf(us)); err != nil {
		t.Fatal(err)
	}
	rs := make([]Result, len(us))
	for i, u := range us {
		rs[i] = Result{FP: Fingerprint(u.URL), Host: u.Host, State: Completed, Status: 200, Reason: "ok",
			Captured: &Capture{Digest: sha1.Sum([]byte(bodies[i])), URL: u.URL, Date: at.Add(time.Duration(i) * time.Second)},
			Durable:  func() bool { return durable }}
	}
	if err := f.Finish(ctx, rs); err != nil {
		t.Fatal(err)
	}
}

// TestDigestIndex: a payload's first durable capture is the one the digest
// index returns (later captures of the same payload, in the same write or
// a later one, leave it); a capture whose records were lost (Durable false)
// is never returned; the index survives a restart.
func TestDigestIndex(t *testing.T) {
	f := open(t, nil)
	at := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)
	finishCaptured(t, f, []NewURL{{URL: "http://a.test/lost", Host: "a.test"}}, []string{"lost"}, at, false)
	finishCaptured(t, f, []NewURL{{URL: "http://a.test/1", Host: "a.test"}, {URL: "http://b.test/same", Host: "b.test"}},
		[]string{"same", "same"}, at, true)
	finishCaptured(t, f, []NewURL{{URL: "http://c.test/later", Host: "c.test"}}, []string{"same"}, at.Add(time.Hour), true)

	check := func(f *Frontier) {
		t.Helper()
		c, ok, err := f.LookupDigest(sha1.Sum([]byte("same")))
		if err != nil || !ok {
			t.Fatalf("LookupDigest(same) = %v, %v", ok, err)
		}
		if c.URL != "http://a.test/1" || !c.Date.Equal(at) || c.Digest != sha1.Sum([]byte("same")) {
			t.Fatalf("LookupDigest(same) = %+v, want http://a.test/1 at %v", c, at)
		}
		if c, ok, err := f.LookupDigest(sha1.Sum([]byte("lost"))); ok || err != nil {
			t.Fatalf("a capture whose records were lost is in the index: %+v, %v", c, err)
		}
		if _, ok, _ := f.LookupDigest(sha1.Sum([]byte("never"))); ok {
			t.Fatal("a payload never archived is in the index")
		}
	}
	check(f)
	g := reopen(t, f, nil)
	if n := g.DigestCacheLen(); n != 0 {
		t.Fatalf("%d entries in memory right after the restart", n)
	}
	check(g)
}

// TestDigestCacheBound: the index keeps at most Options.DigestCache
// entries in memory, and finds the others in the file.
func TestDigestCacheBound(t *testing.T) {
	const size, n = 8, 100
	f := open(t, func(o *Options) { o.DigestCache = size })
	us := make([]NewURL, n)
	bodies := make([]string, n)
	for i := range us {
		us[i] = NewURL{URL: fmt.Sprintf("http://a.test/%d", i), Host: "a.test"}
		bodies[i] = fmt.Sprint("body ", i)
	}
	at := time.Unix(1700000000, 0)
	finishCaptured(t, f, us[:n/2], bodies[:n/2], at, true)
	finishCaptured(t, f, us[n/2:], bodies[n/2:], at, true)
	if l := f.DigestCacheLen(); l != size {
		t.Fatalf("%d entries in memory after %d captures, want the bound %d", l, n, size)
	}
	for i := range us {
		c, ok, err := f.LookupDigest(sha1.Sum([]byte(bodies[i])))
		if err != nil || !ok || c.URL != us[i].URL {
			t.Fatalf("capture %d: %+v, %v, %v", i, c, ok, err)
		}
		if l := f.DigestCacheLen(); l > size {
			t.Fatalf("%d entries in memory, bound %d", l, size)
		}
	}
	if _, err := Open(Options{Path: f.opts.Path + ".x", DigestCache: -1}); err == nil {
		t.Fatal("DigestCache -1 accepted")
	}
}
