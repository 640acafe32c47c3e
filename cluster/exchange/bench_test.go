package exchange

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/test/testpki"
)

// BenchmarkExchange: URLs routed at a and delivered to b's inserter through
// the outbox and the exchange on loopback (b.N URLs; URLs/s reported).
func BenchmarkExchange(b *testing.B) {
	book := &addrBook{}
	na := newBenchNode(b, "a", book)
	nb := newBenchNode(b, "b", book)
	urls := testURLs("bench", b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < len(urls); i += 1000 {
		if _, err := na.x.Route(b.Context(), urls[i:min(i+1000, len(urls))]); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for nb.ins.distinct() < b.N {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d URLs delivered", nb.ins.distinct(), b.N)
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "urls/s")
}

func newBenchNode(b *testing.B, name string, book *addrBook) *testNode {
	b.Helper()
	n := &testNode{name: name, ins: newFakeInserter()}
	ob, err := OpenOutbox(OutboxConfig{Path: b.TempDir() + "/outbox.db", NoSync: true, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	n.ob = ob
	n.x, err = New(Config{
		Name: name, Listen: "127.0.0.1:0", Key: testKey, Outbox: ob, Local: StoreReceiver(n.ins), Directory: testDir{owner: allTo("b"), addr: book.get},
		Logger: quietLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	book.set(name, n.x.Addr())
	b.Cleanup(func() { n.x.Close(); n.ob.Close() })
	return n
}

// BenchmarkExchangeFrames: frames of a 1000-URL batch written by one side
// of an authenticated connection and read by the other over loopback TCP
// (the wire protocol alone, without the outbox; bytes/s reported), with the
// cluster key alone and inside mutual TLS.
func BenchmarkExchangeFrames(b *testing.B) {
	ca, err := testpki.NewCA("bench CA")
	if err != nil {
		b.Fatal(err)
	}
	l, err := ca.Issue([]string{"srv", "cli"})
	if err != nil {
		b.Fatal(err)
	}
	cert, key, caFile, err := ca.Files(b.TempDir(), "m", l)
	if err != nil {
		b.Fatal(err)
	}
	tc, err := config.Cluster{TLSCert: cert, TLSKey: key, TLSCA: caFile}.ClusterTLS("")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		tls  *tls.Config
	}{{"key", nil}, {"tls", tc}} {
		b.Run(bc.name, func(b *testing.B) { benchFrames(b, bc.tls) })
	}
}

func benchFrames(b *testing.B, tc *tls.Config) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	srv := &Stream{cfg: Config{Name: "srv", Key: testKey, TLS: tc, MaxFrame: DefaultMaxFrame, HandshakeTimeout: 5 * time.Second}}
	cli := &Stream{cfg: Config{Name: "cli", Key: testKey, TLS: tc, MaxFrame: DefaultMaxFrame, HandshakeTimeout: 5 * time.Second}}
	type res struct {
		x   *xconn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- res{nil, err}
			return
		}
		x, err := srv.accept(c)
		ch <- res{x, err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	cx, err := cli.connect(c, "srv")
	if err != nil {
		b.Fatal(err)
	}
	defer cx.Close()
	s := <-ch
	if s.err != nil {
		b.Fatal(s.err)
	}
	defer s.x.Close()
	var es []Entry
	for _, u := range testURLs("frames", 1000) {
		es = append(es, Entry{NewURL: u})
	}
	p := EncodeBatch(Batch{ID: 1, Entries: es})
	b.SetBytes(int64(len(p)))
	done := make(chan error, 1)
	b.ResetTimer()
	go func() {
		for i := 0; i < b.N; i++ {
			if _, err := s.x.readFrame(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 0; i < b.N; i++ {
		if err := cx.writeFrame(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
