package exchange

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/tcptap"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// wireURLs are URLs whose hosts, paths and names are long and distinctive.
func wireURLs(n int) []frontier.NewURL {
	us := make([]frontier.NewURL, n)
	for i := range us {
		h := fmt.Sprintf("secret-host-%03d.example-wire.test", i%211)
		us[i] = frontier.NewURL{URL: fmt.Sprintf("http://%s/private/path-%06d.html?q=%d", h, i, i), Host: h, Depth: i % 7}
	}
	return us
}

// TestExchangeWireConfidential records every byte of an exchange connection
// that carries batches of URLs (handshake, batches, acks) and finds no URL,
// host, path or member name in it.
func TestExchangeWireConfidential(t *testing.T) {
	book := &addrBook{}
	const sender, receiver = "member-sender-alpha", "member-receiver-bravo"
	a := newTestNode(t, sender, testKey, allTo(receiver), book)
	b := newTestNode(t, receiver, testKey, allTo(receiver), book)
	tp := tcptap.Start(t, b.x.Addr(), nil)
	book.set(receiver, tp.Addr())

	const n = 6000
	urls := wireURLs(n)
	route(t, a.x, urls, 500)
	wait.For(t, 30*time.Second, "URLs at the receiver", func() bool { return b.ins.distinct() == n })
	wait.For(t, 10*time.Second, "empty outbox", func() bool { return a.ob.Len() == 0 })
	c2s, s2c := tp.Recorded()

	var plain int
	needles := map[string]bool{sender: true, receiver: true}
	for _, u := range urls {
		plain += len(u.URL) + len(u.Host)
		needles[u.URL] = true
		needles[u.Host] = true
		needles[u.URL[strings.Index(u.URL, "/private/"):]] = true
	}
	// The search would find them in clear text, and the connection did carry them.
	var es []Entry
	for _, u := range urls[:3] {
		es = append(es, Entry{NewURL: u})
	}
	if p := EncodeBatch(Batch{ID: 1, Entries: es}); !bytes.Contains(p, []byte(urls[1].URL)) || !bytes.Contains(p, []byte(urls[2].Host)) {
		t.Fatal("the clear-text encoding does not contain its URLs: the search below proves nothing")
	}
	if len(c2s) < plain {
		t.Fatalf("%d bytes went to the receiver, fewer than the %d bytes of URLs and hosts it stored", len(c2s), plain)
	}
	if st := a.x.Stats(); st.URLsForwarded != n || st.Dials != 1 {
		t.Fatalf("forwarded %d URLs over %d connections, want %d over 1 through the tap", st.URLsForwarded, st.Dials, n)
	}
	if !bytes.HasPrefix(c2s, []byte(hsMagic)) || !bytes.HasPrefix(s2c, []byte(hsMagic)) {
		t.Fatalf("the recording does not start with the hellos: %q / %q", c2s[:min(8, len(c2s))], s2c[:min(8, len(s2c))])
	}
	found := 0
	for s := range needles {
		for dir, wire := range map[string][]byte{"sender to receiver": c2s, "receiver to sender": s2c} {
			if bytes.Contains(wire, []byte(s)) {
				if found++; found <= 10 {
					t.Errorf("%q is readable on the wire (%s)", s, dir)
				}
			}
		}
	}
	t.Logf("%d bytes to the receiver, %d back; %d distinct URLs, hosts, paths and names (%d bytes in clear) searched in them",
		len(c2s), len(s2c), len(needles), plain)
}

// sealFrames seals payloads as x would send them and returns each frame's
// bytes (x's sequence number advances).
func sealFrames(x *xconn, payloads ...[]byte) [][]byte {
	w := x.w
	defer func() { x.w = w }()
	var out [][]byte
	for _, p := range payloads {
		var buf bytes.Buffer
		x.w = bufio.NewWriter(&buf)
		if err := x.writeFrame(p); err != nil {
			panic(err) // test-built payloads are below max_frame
		}
		out = append(out, buf.Bytes())
	}
	return out
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x01
	return b
}

// TestExchangeFramesTampered: a receiver rejects a frame that was altered
// (a bit flipped in the ciphertext, the tag or the length), replayed (on
// the same connection or on another one), reordered or preceded by a
// dropped one: it stores nothing of it and closes the connection.
func TestExchangeFramesTampered(t *testing.T) {
	batch := func(id uint64) []byte {
		return EncodeBatch(Batch{ID: id, Entries: []Entry{{NewURL: frontier.NewURL{URL: fmt.Sprintf("http://h.test/%d", id), Host: "h.test"}}}})
	}
	for _, tc := range []struct {
		name string
		// send returns the bytes to write after the handshake, given the
		// frames of batches 1 and 2 sealed on this connection and on another.
		send   func(f, other [][]byte) []byte
		acks   int      // batches acknowledged before the connection closes
		stored []uint64 // batch IDs the receiver stored
		bad    bool     // a bad frame ends the connection
	}{
		{"intact", func(f, _ [][]byte) []byte { return cat(f[0], f[1]) }, 2, []uint64{1, 2}, false},
		{"bit flipped in the ciphertext", func(f, _ [][]byte) []byte { return cat(flip(f[0], 9)) }, 0, nil, true},
		{"bit flipped in the tag", func(f, _ [][]byte) []byte { return cat(flip(f[0], len(f[0])-1)) }, 0, nil, true},
		{"bit flipped in the length", func(f, _ [][]byte) []byte { return cat(flip(f[0], 3), f[1]) }, 0, nil, true},
		{"second frame altered", func(f, _ [][]byte) []byte { return cat(f[0], flip(f[1], 20)) }, 1, []uint64{1}, true},
		{"frame replayed", func(f, _ [][]byte) []byte { return cat(f[0], f[0]) }, 1, []uint64{1}, true},
		{"frames reordered", func(f, _ [][]byte) []byte { return cat(f[1], f[0]) }, 0, nil, true},
		{"frame dropped", func(f, _ [][]byte) []byte { return cat(f[1]) }, 0, nil, true},
		{"frame of another connection", func(_, o [][]byte) []byte { return cat(o[0]) }, 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			book := &addrBook{}
			var mu sync.Mutex
			var got []uint64
			b := newTestNode(t, "b", testKey, allTo("b"), book, func(_ string, bt Batch) {
				mu.Lock()
				got = append(got, bt.ID)
				mu.Unlock()
			})
			dial := func() *xconn {
				c, err := net.Dial("tcp", b.x.Addr())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				x, err := clientHandshake(c, testKey, "a", DefaultMaxFrame, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				return x
			}
			other := sealFrames(dial(), batch(1), batch(2))
			x := dial()
			frames := sealFrames(x, batch(1), batch(2))
			if _, err := x.c.Write(tc.send(frames, other)); err != nil {
				t.Fatal(err)
			}
			acks := 0
			x.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var err error
			for {
				var p []byte
				if p, err = x.readFrame(); err != nil {
					break
				}
				if a, derr := decodeAck(p); derr != nil || a.Status != 0 {
					t.Fatalf("ack %+v, %v", a, derr)
				}
				if acks++; acks == 2 && !tc.bad {
					break
				}
			}
			if tc.bad {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the receiver kept the connection open after a bad frame")
				}
				wait.For(t, 5*time.Second, "the bad frame counted", func() bool { return b.x.Stats().BadFrames == 1 })
			}
			if acks != tc.acks {
				t.Errorf("%d acks, want %d", acks, tc.acks)
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(got) != fmt.Sprint(tc.stored) {
				t.Errorf("receiver took batches %v, want %v", got, tc.stored)
			}
			if b.ins.distinct() != len(tc.stored) {
				t.Errorf("receiver stored %d URLs, want %d", b.ins.distinct(), len(tc.stored))
			}
		})
	}
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// TestExchangeForgedAckRejected: a man in the middle flips a bit in the
// receiver's first ack; the sender rejects it, drops the connection,
// reconnects and resends, and every URL still arrives exactly once.
func TestExchangeForgedAckRejected(t *testing.T) {
	book := &addrBook{}
	a := newTestNode(t, "a", testKey, allTo("b"), book)
	b := newTestNode(t, "b", testKey, allTo("b"), book)
	hs := helloLen + sealedName + sealedOK // the receiver's handshake bytes
	var flipped sync.Once
	tp := tcptap.Start(t, b.x.Addr(), func(off int, p []byte) {
		if i := hs + frameHdrLen + 2 - off; i >= 0 && i < len(p) {
			flipped.Do(func() { p[i] ^= 0x80 })
		}
	})
	book.set("b", tp.Addr())
	const n = 300
	route(t, a.x, testURLs("ack", n), n)
	wait.For(t, 20*time.Second, "URLs at b and an empty outbox", func() bool { return b.ins.distinct() == n && a.ob.Len() == 0 })
	s := a.x.Stats()
	if s.Dials < 2 || s.BatchesResent < 1 || s.DialErrors < 1 {
		t.Errorf("sender: %d dials, %d resent, %d failures: want a rejected ack, a reconnect and a resend", s.Dials, s.BatchesResent, s.DialErrors)
	}
	b.ins.check(t, n)
}

// TestHandshakeWithoutKey: a process without the key cannot complete a
// handshake, not even by replaying the bytes of a real client's handshake.
func TestHandshakeWithoutKey(t *testing.T) {
	book := &addrBook{}
	b := newTestNode(t, "b", testKey, allTo("b"), book)
	// Record a legitimate client's handshake.
	tp := tcptap.Start(t, b.x.Addr(), nil)
	c, err := net.Dial("tcp", tp.Addr())
	if err != nil {
		t.Fatal(err)
	}
	x, err := clientHandshake(c, testKey, "a", DefaultMaxFrame, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	x.Close()
	wait.For(t, 5*time.Second, "the recording", func() bool {
		c2s, s2c := tp.Recorded()
		return len(c2s) == helloLen+sealedName && len(s2c) == helloLen+sealedName+sealedOK
	})
	rec, _ := tp.Recorded()

	// Replay it: the server's fresh nonce makes the recorded proof worthless.
	c2, err := net.Dial("tcp", b.x.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write(rec); err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	back, err := io.ReadAll(c2)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server kept a replayed handshake open")
	}
	if len(back) != helloLen+sealedName {
		t.Errorf("the server answered a replayed handshake with %d bytes, want its hello only (%d), no acceptance", len(back), helloLen+sealedName)
	}
	wait.For(t, 5*time.Second, "the refusal counted", func() bool { return b.x.Stats().HandshakeErrors == 1 })
	if b.x.Stats().BatchesReceived != 0 {
		t.Error("a batch was received")
	}
}

// TestHandshakeProtocolVersion: a peer of the first protocol (PCX1) and
// this one refuse each other with an error that names the versions.
func TestHandshakeProtocolVersion(t *testing.T) {
	t.Run("old client", func(t *testing.T) {
		c1, c2 := net.Pipe()
		defer c1.Close()
		errc := make(chan error, 1)
		go func() {
			_, err := serverHandshake(c2, testKey, "srv", DefaultMaxFrame, 5*time.Second)
			c2.Close()
			errc <- err
		}()
		// A PCX1 hello: magic, nonce, uvarint length, name.
		old := cat([]byte(hsOldMagic), make([]byte, nonceLen), []byte{3}, []byte("old"))
		go c1.Write(old)
		got, _ := io.ReadAll(c1)
		err := <-errc
		if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), `"PCX1"`) || !strings.Contains(err.Error(), "same phasecrawl version") {
			t.Errorf("server error %v: want the versions named", err)
		}
		// The old peer reads this version's magic where it expects "PCX1": it reports bad magic.
		if len(got) != helloLen || !bytes.HasPrefix(got, []byte(hsMagic)) {
			t.Errorf("the old client got %q, want a %s hello", got, hsMagic)
		}
	})
	for _, tc := range []struct {
		name  string
		reply []byte // what the server answers to the hello, then it closes
		want  string
	}{
		// A PCX1 server reads the 36-byte hello, finds the magic wrong, closes.
		{"old server", nil, "closed the connection without a hello"},
		{"server of another version", cat([]byte("PCX9"), make([]byte, nonceLen)), `speaks exchange protocol "PCX9"`},
		{"server of the previous version", cat([]byte("PCX2"), make([]byte, nonceLen)), `speaks exchange protocol "PCX2", this node "PCX3"`},
		{"not an exchange", []byte("HTTP/1.1 400 Bad Request\r\n\r\n0123456789"), "not a phasecrawl exchange"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c1, c2 := net.Pipe()
			defer c1.Close()
			go func() {
				defer c2.Close()
				io.ReadFull(c2, make([]byte, helloLen))
				c2.Write(tc.reply)
			}()
			_, err := clientHandshake(c1, testKey, "cli", DefaultMaxFrame, 5*time.Second)
			if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("client error %v: want %q", err, tc.want)
			}
		})
	}
}
