package membership

import (
	"bytes"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/phasecrawl/phasecrawl/internal/tcptap"
)

// TestMembersPushPullSealed: a join's push/pull over TCP, recorded by a man
// in the middle, carries neither the member names nor their metadata.
// Compression is off (it would hide them from the search on its own).
func TestMembersPushPullSealed(t *testing.T) {
	tune := func(c *memberlist.Config) {
		FastTimings(c)
		c.EnableCompression = false
	}
	start := func(name string, meta NodeMeta, join ...string) *Members {
		m, err := StartMembers(MembersConfig{Name: name, BindAddr: "127.0.0.1:0", Join: join, SecretKey: testKey, Meta: meta,
			Logger: quietLogger(), Tune: tune, LeavePropagate: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
		return m
	}
	ma := NodeMeta{API: "127.0.0.1:18081", Exchange: "127.0.0.1:19471"}
	a := start("gossip-member-alpha", ma)
	tp := tcptap.Start(t, a.Addr(), nil)
	b := start("gossip-member-bravo", NodeMeta{API: "127.0.0.1:18082", Exchange: "127.0.0.1:19472"}, tp.Addr())
	waitNames(t, a, []string{"gossip-member-alpha", "gossip-member-bravo"})
	waitNames(t, b, []string{"gossip-member-alpha", "gossip-member-bravo"})
	c2s, s2c := tp.Recorded()
	if len(c2s) < 64 || len(s2c) < 64 {
		t.Fatalf("the join's push/pull did not go through the tap: %d and %d bytes", len(c2s), len(s2c))
	}
	for _, s := range []string{"gossip-member-alpha", "gossip-member-bravo", "18081", "18082", "19471", "19472"} {
		if bytes.Contains(c2s, []byte(s)) || bytes.Contains(s2c, []byte(s)) {
			t.Errorf("%q is readable in the push/pull", s)
		}
	}
	t.Logf("push/pull: %d bytes from the joiner, %d back, sealed", len(c2s), len(s2c))
}

// TestMembersRefuseClearText: a memberlist without the key (clear-text
// gossip) can neither join the members nor be taken in by them.
func TestMembersRefuseClearText(t *testing.T) {
	a, err := startTestMember(t, "node-a", "127.0.0.1:0", testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	mc := memberlist.DefaultLANConfig()
	mc.Name, mc.BindAddr, mc.BindPort = "plain", "127.0.0.1", 0
	mc.Logger = log.New(bytes.NewBuffer(nil), "", 0)
	FastTimings(mc)
	plain, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Shutdown()
	if n, err := plain.Join([]string{a.Addr()}); err == nil || n != 0 {
		t.Errorf("a clear-text memberlist joined (%d, %v)", n, err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := a.AliveNames(); !slices.Equal(got, []string{"node-a"}) {
		t.Errorf("a sees %v", got)
	}
	if plain.NumMembers() != 1 {
		t.Errorf("the clear-text memberlist sees %d members", plain.NumMembers())
	}
}
