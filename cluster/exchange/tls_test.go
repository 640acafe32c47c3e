package exchange

import (
	"bytes"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/internal/tcptap"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/test/testpki"
)

// memberTLS writes a certificate for names signed by ca, and ca, and loads
// them as config cluster.tls_* would.
func memberTLS(t *testing.T, ca *testpki.CA, names ...string) *tls.Config {
	t.Helper()
	l, err := ca.Issue(names)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, caFile, err := ca.Files(t.TempDir(), "member", l)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Cluster{TLSCert: cert, TLSKey: key, TLSCA: caFile}.ClusterTLS("")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newTLSNode(t *testing.T, name string, tc *tls.Config, owner func(frontier.NewURL) string, book *addrBook) *testNode {
	t.Helper()
	n := &testNode{name: name, ins: newFakeInserter()}
	n.ob = openTestOutbox(t, filepath.Join(t.TempDir(), "outbox.db"))
	x, err := New(Config{
		Name: name, Listen: "127.0.0.1:0", Key: testKey, TLS: tc, Outbox: n.ob, Local: StoreReceiver(n.ins), Directory: testDir{owner: owner, addr: book.get},
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, AckTimeout: 10 * time.Second, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.x = x
	book.set(name, x.Addr())
	t.Cleanup(func() { n.x.Close(); n.ob.Close() })
	return n
}

// TestExchangeMutualTLS: with cluster.tls_* the exchange runs over mutual
// TLS 1.3 (the cluster key's handshake inside): members with certificates
// of the CA for their names exchange URLs; a certificate of another CA or
// for another name, or a side without TLS, is refused and nothing crosses.
func TestExchangeMutualTLS(t *testing.T) {
	ca, err := testpki.NewCA("phasecrawl test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	const sa, rb = "tls-member-alpha", "tls-member-bravo"
	for _, tc := range []struct {
		name   string
		sender func() *tls.Config // member sa
		recv   func() *tls.Config // member rb
		ok     bool
	}{
		{"certificates of the CA for the member names",
			func() *tls.Config { return memberTLS(t, ca, sa) }, func() *tls.Config { return memberTLS(t, ca, rb) }, true},
		{"sender's certificate of another CA",
			func() *tls.Config { return withRoots(memberTLS(t, other, sa), ca) }, func() *tls.Config { return memberTLS(t, ca, rb) }, false},
		{"receiver's certificate of another CA",
			func() *tls.Config { return memberTLS(t, ca, sa) }, func() *tls.Config { return withRoots(memberTLS(t, other, rb), ca) }, false},
		{"receiver's certificate for another name",
			func() *tls.Config { return memberTLS(t, ca, sa) }, func() *tls.Config { return memberTLS(t, ca, "tls-member-charlie") }, false},
		{"sender's certificate for another name",
			func() *tls.Config { return memberTLS(t, ca, "mallory") }, func() *tls.Config { return memberTLS(t, ca, rb) }, false},
		{"sender without TLS", func() *tls.Config { return nil }, func() *tls.Config { return memberTLS(t, ca, rb) }, false},
		{"receiver without TLS", func() *tls.Config { return memberTLS(t, ca, sa) }, func() *tls.Config { return nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			book := &addrBook{}
			a := newTLSNode(t, sa, tc.sender(), allTo(rb), book)
			b := newTLSNode(t, rb, tc.recv(), allTo(rb), book)
			tp := tcptap.Start(t, b.x.Addr(), nil)
			book.set(rb, tp.Addr())
			urls := wireURLs(500)
			route(t, a.x, urls, 250)
			if !tc.ok {
				wait.For(t, 10*time.Second, "refusals", func() bool {
					return a.x.Stats().DialErrors >= 2 && b.x.Stats().HandshakeErrors >= 2
				})
				if b.ins.distinct() != 0 || b.x.Stats().BatchesReceived != 0 || a.x.Stats().BatchesSent != 0 {
					t.Errorf("a batch crossed: received %d, sent %d", b.x.Stats().BatchesReceived, a.x.Stats().BatchesSent)
				}
				return
			}
			wait.For(t, 20*time.Second, "URLs at b", func() bool { return b.ins.distinct() == len(urls) && a.ob.Len() == 0 })
			c2s, s2c := tp.Recorded()
			// TLS records (0x16: handshake, version 3.x) from the first byte
			// on; the cluster key's handshake is not visible inside.
			if len(c2s) < 3 || c2s[0] != 0x16 || c2s[1] != 3 || len(s2c) < 3 || s2c[0] != 0x16 {
				t.Fatalf("the connection does not start with TLS records: % x / % x", c2s[:min(3, len(c2s))], s2c[:min(3, len(s2c))])
			}
			// Nor are the URLs, nor the member names (no server name in
			// the client hello; TLS 1.3 encrypts the certificates).
			for _, w := range [][]byte{c2s, s2c} {
				for _, s := range []string{hsMagic, urls[7].URL, urls[9].Host, sa, rb} {
					if bytes.Contains(w, []byte(s)) {
						t.Errorf("%q is visible on the wire", s)
					}
				}
			}
		})
	}
}

// withRoots makes c trust ca too, so that only its own certificate is foreign.
func withRoots(c *tls.Config, ca *testpki.CA) *tls.Config {
	c.RootCAs.AddCert(ca.Cert)
	c.ClientCAs.AddCert(ca.Cert)
	return c
}
