package exchange

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// frontierStore is a frontier as a URLStore: AddDone stores COMPLETED
// records (ReasonMoved), as the cluster layer's records do.
type frontierStore struct{ *frontier.Frontier }

func (s frontierStore) AddDone(ctx context.Context, urls []frontier.NewURL) (int, error) {
	return s.Update(ctx, frontier.Write{Name: "add done", Items: len(urls), Apply: func(tx *frontier.Tx) (n int, err error) {
		for _, u := range urls {
			ok, err := tx.AddCompleted(u, frontier.ReasonMoved)
			if err != nil {
				return 0, err
			}
			if ok {
				n++
			}
		}
		return n, nil
	}})
}

// TestExchangeClientSend: batches sent by a Client are filed by the
// receiving exchange by kind (a frontier as its StoreReceiver), acked with the
// number of new records, and a batch sent again adds nothing (dedup by
// fingerprint).
func TestExchangeClientSend(t *testing.T) {
	ctx := context.Background()
	f, err := frontier.Open(frontier.Options{Path: filepath.Join(t.TempDir(), "frontier.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ob := openTestOutbox(t, filepath.Join(t.TempDir(), "outbox.db"))
	defer ob.Close()
	x, err := New(Config{Name: "live", Listen: "127.0.0.1:0", Key: testKey, Outbox: ob, Local: StoreReceiver(frontierStore{f}),
		Directory: testDir{owner: allTo("live"), addr: (&addrBook{}).get}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()

	c, err := Dial(ctx, x.Addr(), ClientConfig{Name: "salvage", Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Peer() != "live" {
		t.Errorf("peer %q, want live", c.Peer())
	}
	var es []Entry
	kinds := []Kind{KindDone, KindReplica, KindMoved, KindNew}
	for i, u := range testURLs("client", 40) {
		es = append(es, Entry{Kind: kinds[i%4], NewURL: u})
	}
	for round, want := range []uint64{40, 0} {
		added, err := c.Send(ctx, uint64(round+1), es)
		if err != nil || added != want {
			t.Fatalf("round %d: added %d (%v), want %d", round, added, err, want)
		}
	}
	cnt := f.Counts()
	if cnt.Completed != 20 || cnt.InList != 20 || cnt.Total() != 40 {
		t.Errorf("receiver's frontier: %+v, want 20 completed (done, replica) and 20 in list (moved, new)", cnt)
	}
	for _, e := range es {
		r, ok, err := f.Get(frontier.RefOf(e.URL))
		if err != nil || !ok || r.Depth != e.Depth {
			t.Errorf("%s (%s): record %+v %v %v", e.URL, e.Kind, r, ok, err)
		}
	}

	// An entry the decoder would refuse is caught before it is sent.
	bad := []Entry{{Kind: KindMoved, NewURL: frontier.NewURL{URL: "http://h/x", Host: "h", Depth: MaxEntryDepth + 1}}}
	if _, err := c.Send(ctx, 3, bad); err == nil || !strings.Contains(err.Error(), "depth") {
		t.Errorf("invalid entry: %v", err)
	}
	// The connection still works.
	if _, err := c.Send(ctx, 4, es[:1]); err != nil {
		t.Errorf("after an invalid entry: %v", err)
	}
}

// TestExchangeClientNack: a batch the receiver cannot store is answered
// with a nack (ErrNack, the receiver's reason); the connection stays usable.
func TestExchangeClientNack(t *testing.T) {
	book := &addrBook{}
	ins := newFakeInserter()
	ins.fail.Store(1)
	live := newTestNodeIns(t, "live", testKey, allTo("live"), book, ins)
	ctx := context.Background()
	c, err := Dial(ctx, live.x.Addr(), ClientConfig{Name: "salvage", Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	es := []Entry{{Kind: KindNew, NewURL: testURLs("nack", 1)[0]}}
	if _, err := c.Send(ctx, 1, es); !errors.Is(err, ErrNack) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("nack: %v", err)
	}
	if n, err := c.Send(ctx, 2, es); err != nil || n != 1 {
		t.Fatalf("resend after a nack: %d %v", n, err)
	}
}

// TestExchangeClientRefused: a wrong key, a listener that is not an
// exchange, nothing listening and bad settings are clear errors.
func TestExchangeClientRefused(t *testing.T) {
	book := &addrBook{}
	live := newTestNode(t, "live", testKey, allTo("live"), book)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // answers like an HTTP server
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"))
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	other := []byte("another key of 32 bytes, not it!")
	for _, tc := range []struct {
		name, addr string
		cfg        ClientConfig
		want       string
		handshake  bool
	}{
		{"wrong key", live.x.Addr(), ClientConfig{Name: "s", Key: other}, "did not prove the cluster key", true},
		{"not an exchange", silent.Addr().String(), ClientConfig{Name: "s", Key: testKey}, "not a phasecrawl exchange", true},
		{"nothing listening", closedAddr, ClientConfig{Name: "s", Key: testKey}, "connection refused", false},
		{"no name", live.x.Addr(), ClientConfig{Key: testKey}, "name", false},
		{"short key", live.x.Addr(), ClientConfig{Name: "s", Key: []byte("short")}, "--cluster-key-file", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := Dial(ctx, tc.addr, tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrHandshake) != tc.handshake {
				t.Errorf("error %q: want %q (handshake error: %v)", err, tc.want, tc.handshake)
			}
		})
	}
}

// TestOutboxReadOnly: every entry waiting in an outbox, of every kind and a
// batch in flight included, is listed from a read-only open; an outbox a
// node holds open is refused with frontier.ErrLocked.
func TestOutboxReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "outbox.db")
	ob := openTestOutbox(t, path)
	want := map[string]Entry{}
	for i, kind := range []Kind{KindNew, KindDone, KindMoved, KindReplica} {
		peer := []string{"a", "b"}[i%2]
		us := testURLs(kind.String(), 5)
		if err := ob.put(ctx, peer, kind, us); err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			want[peer+" "+u.URL] = Entry{Kind: kind, NewURL: u}
		}
	}
	// A batch taken (in flight) and not acked stays listed.
	if tk, err := ob.take(ctx, "a", 3, 1<<20, func(Entry) string { return "" }); err != nil || len(tk.entries) != 3 {
		t.Fatalf("take: %d entries, %v", len(tk.entries), err)
	}
	if _, err := OpenOutboxReadOnly(path, 100*time.Millisecond); !errors.Is(err, frontier.ErrLocked) {
		t.Errorf("outbox held by a node: %v, want ErrLocked", err)
	}
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenOutboxReadOnly(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := 0
	err = r.Entries(func(peer string, e Entry) error {
		got++
		if w, ok := want[peer+" "+e.URL]; !ok || w != e {
			t.Errorf("listed %s %+v, want %+v", peer, e, w)
		}
		return nil
	})
	if err != nil || got != len(want) {
		t.Errorf("listed %d entries (%v), want %d", got, err, len(want))
	}
	if _, err := OpenOutboxReadOnly(filepath.Join(t.TempDir(), "none.db"), 0); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing outbox: %v", err)
	}
}
