package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/cluster/ring"
	"github.com/phasecrawl/phasecrawl/frontier"
)

func TestSentFilter(t *testing.T) {
	r1, r2 := ring.New([]string{"a", "b"}), ring.New([]string{"a", "b", "c"})
	f := newSentFilter(r1)
	const a, b = uint64(12345), uint64(12345 + sentSlots) // same slot
	steps := []struct {
		name         string
		do           func()
		ring         *ring.Ring
		wantA, wantB bool
	}{
		{"empty", func() {}, r1, false, false},
		{"mark a", func() { f.mark(r1, a) }, r1, true, false},
		{"another ring's view", func() {}, r2, false, false},
		{"b takes a's slot: a is only sent again", func() { f.mark(r1, b) }, r1, false, true},
		{"mark a again", func() { f.mark(r1, a) }, r1, true, false},
		{"reset for r2", func() { f.reset(r2) }, r2, false, false},
		{"a mark for the old ring is ignored", func() { f.mark(r1, a) }, r2, false, false},
		{"the old ring sees nothing", func() {}, r1, false, false},
		{"mark a under r2", func() { f.mark(r2, a) }, r2, true, false},
		{"0 marks nothing", func() { f.mark(r2, 0) }, r2, true, false},
	}
	for _, s := range steps {
		s.do()
		if f.seen(s.ring, a) != s.wantA || f.seen(s.ring, b) != s.wantB {
			t.Errorf("%s: seen(a)=%v seen(b)=%v, want %v %v", s.name, f.seen(s.ring, a), f.seen(s.ring, b), s.wantA, s.wantB)
		}
	}
	if f.seen(r2, 0) {
		t.Error("fingerprint 0 is never seen")
	}
}

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		u    frontier.NewURL
		want bool
	}{
		{frontier.NewURL{URL: "http://a.test/", Depth: 3}, true},
		{frontier.NewURL{URL: "http://a.test/", Redirects: 1}, false},
		{frontier.NewURL{URL: "http://a.test/", LastMod: time.Unix(1, 0)}, false},
		{frontier.NewURL{URL: "http://a.test/", Due: time.Unix(1, 0)}, false},
	} {
		if got := plain(tc.u); got != tc.want {
			t.Errorf("plain(%+v) = %v, want %v", tc.u, got, tc.want)
		}
	}
}

// TestRouteForeignFilesAURLOnce: a URL found again on another page is not
// filed for its owner a second time, unless it says more than its address
// or the members changed since.
func TestRouteForeignFilesAURLOnce(t *testing.T) {
	ob := openTestOutbox(t, filepath.Join(t.TempDir(), "o.db"))
	defer ob.Close()
	c := &Cluster{cfg: NodeConfig{Name: "a"}, outbox: ob}
	c.ring.Store(ring.New([]string{"a", "b"}))
	c.sent = newSentFilter(c.ring.Load())
	var urls []frontier.NewURL
	foreign := 0
	for i := range 200 {
		u := frontier.NewURL{URL: fmt.Sprintf("http://h%d.test/p", i), Host: fmt.Sprintf("h%d.test", i)}
		urls = append(urls, u)
		if c.ring.Load().Owner(frontier.Fingerprint(u.URL)) == "b" {
			foreign++
		}
	}
	if foreign == 0 || foreign == len(urls) {
		t.Fatalf("%d of %d URLs owned by b: want some", foreign, len(urls))
	}
	ctx := context.Background()
	route := func(us []frontier.NewURL) int {
		t.Helper()
		in := append([]frontier.NewURL(nil), us...)
		local, err := c.RouteForeign(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(local) != len(urls)-foreign {
			t.Fatalf("%d URLs kept local, want %d", len(local), len(urls)-foreign)
		}
		for i := range us {
			if in[i] != us[i] {
				t.Fatalf("RouteForeign changed its argument at %d", i)
			}
		}
		return ob.Pending()["b"]
	}
	if got := route(urls); got != foreign {
		t.Fatalf("first pass: %d filed for b, want %d", got, foreign)
	}
	if got := route(urls); got != foreign {
		t.Fatalf("second pass: %d filed for b, want still %d", got, foreign)
	}
	// A redirect's count is news: filed again.
	var redirect frontier.NewURL
	for _, u := range urls {
		if c.ring.Load().Owner(frontier.Fingerprint(u.URL)) == "b" {
			redirect = u
			break
		}
	}
	redirect.Redirects = 1
	if _, err := c.RouteForeign(ctx, []frontier.NewURL{redirect}); err != nil {
		t.Fatal(err)
	}
	if got := ob.Pending()["b"]; got != foreign+1 {
		t.Fatalf("after a redirect: %d filed for b, want %d", got, foreign+1)
	}
	// The members changed: owners may have too, so everything is filed again.
	c.ring.Store(ring.New([]string{"a", "b"}))
	c.sent.reset(c.ring.Load())
	if got := route(urls); got != 2*foreign+1 {
		t.Fatalf("after a member change: %d filed for b, want %d", got, 2*foreign+1)
	}
}

func openTestOutbox(t *testing.T, path string) *exchange.Outbox {
	t.Helper()
	ob, err := exchange.OpenOutbox(exchange.OutboxConfig{Path: path, NoSync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return ob
}
