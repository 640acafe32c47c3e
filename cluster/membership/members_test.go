package membership

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

var (
	testKey  = bytes.Repeat([]byte{0x42}, 32)
	otherKey = bytes.Repeat([]byte{0x17}, 32)
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startTestMember(t *testing.T, name, bind string, key []byte, join ...string) (*Members, error) {
	t.Helper()
	return StartMembers(MembersConfig{
		Name: name, BindAddr: bind, Join: join, SecretKey: key,
		Meta:           NodeMeta{API: "127.0.0.1:80" + name[len(name)-1:], Exchange: "127.0.0.1:90" + name[len(name)-1:]},
		Logger:         quietLogger(),
		Tune:           FastTimings,
		LeavePropagate: 200 * time.Millisecond,
	})
}

// waitNames waits (bounded) until m sees exactly want as its alive members.
func waitNames(t *testing.T, m *Members, want []string) {
	t.Helper()
	wait.For(t, 15*time.Second, fmt.Sprintf("%s sees %v", m.Name(), want), func() (bool, string) {
		got := m.AliveNames()
		return slices.Equal(got, want), fmt.Sprintf("%s sees %v", m.Name(), got)
	})
}

func TestMembersJoinLeaveRejoin(t *testing.T) {
	a, err := startTestMember(t, "node-a", "127.0.0.1:0", testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := startTestMember(t, "node-b", "127.0.0.1:0", testKey, a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	c, err := startTestMember(t, "node-c", "127.0.0.1:0", testKey, a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"node-a", "node-b", "node-c"}
	for _, m := range []*Members{a, b, c} {
		waitNames(t, m, all)
	}
	for _, x := range a.Alive() {
		if x.State != StateAlive || x.Exchange != "127.0.0.1:90"+x.Name[5:] || x.Gossip == "" {
			t.Errorf("member %+v: want alive with metadata", x)
		}
	}

	cAddr := c.Addr()
	if err := c.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Members{a, b} {
		waitNames(t, m, []string{"node-a", "node-b"})
	}

	// Restart: a new Members with the same name (and address) rejoins.
	c2, err := startTestMember(t, "node-c", cAddr, testKey, b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Shutdown()
	for _, m := range []*Members{a, b, c2} {
		waitNames(t, m, all)
	}
	if err := c2.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c2.Shutdown(); err != nil { // after Leave: no-op
		t.Fatal(err)
	}
}

func TestMembersWrongKeyRefused(t *testing.T) {
	a, err := startTestMember(t, "node-a", "127.0.0.1:0", testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := startTestMember(t, "node-x", "127.0.0.1:0", otherKey, a.Addr())
	if err == nil {
		b.Shutdown()
		t.Fatal("join with another key succeeded")
	}
	if !strings.Contains(err.Error(), "join") || !strings.Contains(err.Error(), "use another cluster key") {
		t.Errorf("error %q should say the join was refused because the key differs", err)
	}
	if got := a.AliveNames(); !slices.Equal(got, []string{"node-a"}) {
		t.Errorf("a sees %v", got)
	}
}

func TestMembersConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  MembersConfig
		want string
	}{
		{"no key", MembersConfig{Name: "x", BindAddr: "127.0.0.1:0"}, "--cluster-key-file"},
		{"short key", MembersConfig{Name: "x", BindAddr: "127.0.0.1:0", SecretKey: []byte("short")}, "16, 24 or 32"},
		{"bad port", MembersConfig{Name: "x", BindAddr: "127.0.0.1:99999", SecretKey: testKey}, "0..65535"},
		{"big meta", MembersConfig{Name: "x", BindAddr: "127.0.0.1:0", SecretKey: testKey, Meta: NodeMeta{API: strings.Repeat("a", 600)}}, "512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = quietLogger()
			m, err := StartMembers(tc.cfg)
			if err == nil {
				m.Shutdown()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestSplitHostPortDefault(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int
		err  bool
	}{
		{"", "0.0.0.0", 7946, false},
		{"127.0.0.1", "127.0.0.1", 7946, false},
		{"127.0.0.1:8000", "127.0.0.1", 8000, false},
		{":8000", "0.0.0.0", 8000, false},
		{"[::1]:8000", "::1", 8000, false},
		{"::1", "::1", 7946, false},
		{"host:x", "", 0, true},
	} {
		h, p, err := splitHostPortDefault(tc.in, "0.0.0.0", 7946)
		if (err != nil) != tc.err || h != tc.host || p != tc.port {
			t.Errorf("%q: got %q %d %v", tc.in, h, p, err)
		}
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	raw := bytes.Repeat([]byte{7}, 24)
	for _, tc := range []struct {
		name    string
		content []byte
		want    []byte
		err     string
	}{
		{"raw16", raw[:16], raw[:16], ""},
		{"raw24", raw, raw, ""},
		{"b64-32", []byte(base64.StdEncoding.EncodeToString(testKey) + "\n"), testKey, ""},
		{"short", []byte("abc"), nil, "16, 24 or 32"},
		{"raw-bad", []byte{1, 2, 3}, nil, "16, 24 or 32"},
		{"b64-short", []byte(base64.StdEncoding.EncodeToString(raw[:10])), nil, "16, 24 or 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			k, err := LoadKey(p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--cluster-key-file") {
					t.Fatalf("err %v, want mention of %q and --cluster-key-file", err, tc.err)
				}
				return
			}
			if err != nil || !bytes.Equal(k, tc.want) {
				t.Fatalf("got %x, %v", k, err)
			}
		})
	}
	if _, err := LoadKey(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--cluster-key-file") {
		t.Errorf("missing file: %v", err)
	}
}

// TestMembersJoinRetry: a node started before the member it joins keeps
// trying until that member is up (nodes of a cluster start together),
// and gives up with a clear error once JoinRetry has passed.
func TestMembersJoinRetry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	started := make(chan *Members, 1)
	go func() {
		time.Sleep(700 * time.Millisecond)
		a, err := startTestMember(t, "node-a", addr, testKey)
		if err != nil {
			t.Errorf("start node-a on %s: %v", addr, err)
		}
		started <- a
	}()
	b, err := StartMembers(MembersConfig{
		Name: "node-b", BindAddr: "127.0.0.1:0", Join: []string{addr}, SecretKey: testKey, JoinRetry: 15 * time.Second,
		Logger: quietLogger(), Tune: FastTimings, LeavePropagate: 200 * time.Millisecond,
	})
	a := <-started
	if a != nil {
		defer a.Shutdown()
	}
	if err != nil {
		t.Fatalf("join with retry: %v", err)
	}
	defer b.Shutdown()
	waitNames(t, b, []string{"node-a", "node-b"})

	// Nobody there: one attempt (negative JoinRetry) fails at once, naming the address.
	_, err = StartMembers(MembersConfig{
		Name: "node-c", BindAddr: "127.0.0.1:0", Join: []string{"127.0.0.1:1"}, SecretKey: testKey, JoinRetry: -1,
		Logger: quietLogger(), Tune: FastTimings,
	})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("join of nobody: err = %v, want an error naming 127.0.0.1:1", err)
	}
}
