package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/bucket"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// slowLender is a GuestSettler whose ReportLent takes a while, as a durable
// outbox write does (until release is closed, when it is not nil); it
// counts the reports and how many ran at once.
type slowLender struct {
	mu       sync.Mutex
	reported map[string]int
	running  int
	most     int
	returned int
	release  chan struct{}
}

func (l *slowLender) SplitLinks(found []frontier.NewURL) (local, foreign []frontier.NewURL) {
	return nil, found // every link is another member's
}

func (l *slowLender) ReportLent(ctx context.Context, out frontier.LentOutcome, foreign []frontier.NewURL) error {
	l.mu.Lock()
	l.running++
	l.most = max(l.most, l.running)
	l.mu.Unlock()
	if l.release != nil {
		<-l.release
	} else {
		time.Sleep(5 * time.Millisecond) // a report takes a moment: overlaps would show
	}
	l.mu.Lock()
	l.running--
	l.reported[out.URL]++
	l.mu.Unlock()
	return nil
}

func (l *slowLender) ReturnLent(ctx context.Context, gs []frontier.Guest) error {
	l.mu.Lock()
	l.returned += len(gs)
	l.mu.Unlock()
	return nil
}

// TestGuestsRecordedAlongTheTrip: the outcomes of a host's lent pages are
// recorded while its trip goes on, as many at once as the node has
// workers and never more (Node.recording), each exactly once, and every
// one before the node stops.
func TestGuestsRecordedAlongTheTrip(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/elsewhere">x</a>`)
	}))
	defer srv.Close()
	c := testConfig(t, srv)
	c.Seeds, c.Delay, c.Workers = nil, 0, 24
	l := &slowLender{reported: map[string]int{}, release: make(chan struct{})}
	n, stop := startWith(t, c, Options{Cluster: Delegates(ClusterDelegates{Lending: l})})
	wait.For(t, 30*time.Second, "node ready", func() bool { return n.ready.Load() })
	host := strings.TrimPrefix(srv.URL, "http://")
	const pages = 60
	var gs []frontier.Guest
	for i := range pages {
		gs = append(gs, frontier.Guest{NewURL: frontier.NewURL{URL: fmt.Sprintf("%s/p%d", srv.URL, i), Host: host, Depth: 1},
			Lender: "owner", Slot: 1, Until: time.Now().Add(time.Hour)})
	}
	if refused := n.AddGuests(gs); len(refused) != 0 {
		t.Fatalf("%d guests refused", len(refused))
	}
	// The trip goes on while its guests are recorded: every recording
	// slot of the node fills (one trip, one host) before any report ends.
	wait.For(t, 30*time.Second, "a report per worker running at once", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.running == c.Workers
	})
	wait.For(t, 30*time.Second, "every recording slot taken", func() bool { return len(n.recording) == cap(n.recording) })
	close(l.release)
	wait.For(t, 30*time.Second, "guests reported", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.reported) == pages
	})
	stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for u, k := range l.reported {
		if k != 1 {
			t.Errorf("%s reported %d times", u, k)
		}
	}
	if l.most != c.Workers {
		t.Errorf("at most %d reports ran at once, want %d (one per worker, recorded along the trip)", l.most, c.Workers)
	}
	if l.returned != 0 {
		t.Errorf("%d guests given back, want 0", l.returned)
	}
}

// TestGuestPoolTake: the scheduler takes a host's guests oldest first, no
// more than it asks for (what the bucket takes now), dropping the expired
// ones it meets; the ones the bucket refuses go back ahead of the others.
func TestGuestPoolTake(t *testing.T) {
	now := time.Now()
	p := newGuestPool()
	var gs []frontier.Guest
	for i := range 6 {
		until := now.Add(time.Hour)
		if i == 1 {
			until = now.Add(-time.Second) // expired
		}
		g := frontier.Guest{NewURL: frontier.NewURL{URL: fmt.Sprintf("http://h/%d", i), Host: "h"}, Until: until}
		gs = append(gs, g)
		p.queued[frontier.Fingerprint(g.URL)] = g
	}
	p.hosts["h"], p.n = gs, len(gs)
	p.hosts["other"] = []frontier.Guest{{NewURL: frontier.NewURL{URL: "http://other/", Host: "other"}, Until: now.Add(time.Hour)}}
	p.n++
	urls := func(gs []frontier.Guest) string {
		var us []string
		for _, g := range gs {
			us = append(us, strings.TrimPrefix(g.URL, "http://h/"))
		}
		return strings.Join(us, " ")
	}
	took := p.take(now, "h", 2)
	if got := urls(took); got != "0 2" {
		t.Fatalf("take 2 = %q, want \"0 2\" (1 expired)", got)
	}
	if p.n != 6 || len(p.hosts["h"]) != 3 {
		t.Fatalf("after take: n %d, h holds %d, want 6 and 3", p.n, len(p.hosts["h"]))
	}
	p.putBack("h", took[1:]) // the bucket took 0, refused 2
	if got := urls(p.take(now, "h", 10)); got != "2 3 4 5" {
		t.Fatalf("take after putBack = %q, want \"2 3 4 5\"", got)
	}
	if _, ok := p.hosts["h"]; ok || len(p.hosts["other"]) != 1 {
		t.Fatalf("hosts left %v, want other only", p.hosts)
	}
}

// TestGuestAndOwnURLShareAFingerprint: a URL lent to this node that it
// also owns (it changed owner while lent) is in the trip twice, as a guest
// and as this node's record. When the trip hands both back untried, the
// guest goes back to its owner and the record back to the queue: it is
// fetched later, not left IN_PROGRESS with nothing fetching it.
func TestGuestAndOwnURLShareAFingerprint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<p>page</p>`)
	}))
	defer srv.Close()
	c := testConfig(t, srv)
	c.Seeds, c.Delay = nil, 0
	l := &slowLender{reported: map[string]int{}}
	n, stop := startWith(t, c, Options{Cluster: Delegates(ClusterDelegates{Lending: l})})
	defer stop()
	wait.For(t, 30*time.Second, "node ready", func() bool { return n.ready.Load() })
	ctx := context.Background()
	host := strings.TrimPrefix(srv.URL, "http://")
	u := frontier.NewURL{URL: srv.URL + "/shared", Host: host, Depth: 1}
	fp := frontier.Fingerprint(u.URL)
	ref := frontier.Ref{FP: fp, Host: host}
	// The record, placed by the scheduler (IN_PROGRESS) before the scan
	// could meet it, and the guest, taken from the pool.
	if k, err := n.front.Settle(ctx, frontier.SettleRequest{Found: []frontier.NewURL{u}, Take: &frontier.Take{Host: host, Room: 1}}).Wait(); err != nil || k != 1 {
		t.Fatalf("add and take the record: %d %v", k, err)
	}
	if rec, ok, err := n.front.Get(ref); err != nil || !ok || rec.State != frontier.InProgress {
		t.Fatalf("record %+v %v %v, want IN_PROGRESS", rec, ok, err)
	}
	n.guests.mu.Lock()
	n.guests.queued[fp] = frontier.Guest{NewURL: u, Lender: "owner", Slot: 1, Until: time.Now().Add(time.Hour)}
	n.guests.mu.Unlock()
	tr := &hostTrip{n: n, host: host, hostHash: n.unit.Hash(host), tripPace: tripPace{delay: 0},
		pageRecording: pageRecording{sent: make(map[uint64]struct{})},
		list: tripList{items: []bucket.Item{
			{FP: fp, URL: u.URL, Depth: 1},
			{FP: fp, URL: u.URL, Depth: 1, Guest: true},
		}}}
	tr.commit() // nothing fetched: both go back
	l.mu.Lock()
	returned := l.returned
	l.mu.Unlock()
	if returned != 1 {
		t.Errorf("%d guests given back, want 1", returned)
	}
	wait.For(t, 30*time.Second, "the record requeued and fetched", func() bool {
		rec, ok, err := n.front.Get(ref)
		return err == nil && ok && rec.State == frontier.Completed
	})
}
