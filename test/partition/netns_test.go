package partition_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testNet is a set of network namespaces made for one test: a hub holding
// a bridge (and the synthetic web, at .1), one namespace per node (at
// .11, .12, ...), all on the bridge, and a veth from the test's own
// namespace to the bridge (.254) so the test reaches the web and the
// nodes' APIs. Addresses are from the benchmarking range 198.18.0.0/15,
// one /24 per test run. Everything is removed at cleanup.
type testNet struct {
	t      testing.TB
	id     string // 4 hex digits, unique per run: in every name
	octet  int    // the /24 is 198.18.<octet>.0
	hub    string
	nodeNS []string
}

// requireNetns skips the test (fails it when CI=true) unless it can create
// network namespaces: it must run as root with iproute2 and iptables.
func requireNetns(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("partition tests (network namespaces, real processes) in -short mode")
	}
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
	default:
		for _, bin := range []string{"ip", "iptables"} {
			if _, err := exec.LookPath(bin); err != nil {
				why = bin + " not found (iproute2 and iptables are needed)"
			}
		}
	}
	if why == "" {
		name := "pcprobe" + randHex(t, 2)
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			why = fmt.Sprintf("ip netns add fails: %v: %s", err, strings.TrimSpace(string(out)))
		} else {
			_ = exec.Command("ip", "netns", "del", name).Run()
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("partition tests cannot run: %s (CI=true: they must run in CI)", why)
	}
	t.Skipf("partition tests need network namespaces: %s", why)
}

func randHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// run runs a command, failing the test on error.
func run(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
}

// newTestNet creates the hub and n node namespaces.
func newTestNet(t *testing.T, n int) *testNet {
	t.Helper()
	nt := &testNet{t: t}
	out, _ := exec.Command("ip", "-o", "-4", "addr").Output()
	for tries := 0; ; tries++ {
		nt.id = randHex(t, 2)
		var o [1]byte
		_, _ = rand.Read(o[:])
		nt.octet = int(o[0]) % 250
		if !strings.Contains(string(out), fmt.Sprintf("198.18.%d.", nt.octet)) {
			break
		}
		if tries > 20 {
			t.Fatal("no free /24 in 198.18.0.0/16 for the test network")
		}
	}
	nt.hub = "pc" + nt.id + "hub"
	t.Cleanup(nt.remove) // registered first: runs after the processes are killed
	run(t, "ip", "netns", "add", nt.hub)
	nt.ns(nt.hub, "ip", "link", "set", "lo", "up")
	br := "br" + nt.id
	nt.ns(nt.hub, "ip", "link", "add", br, "type", "bridge")
	nt.ns(nt.hub, "ip", "addr", "add", nt.ip(1)+"/24", "dev", br)
	nt.ns(nt.hub, "ip", "link", "set", br, "up")
	// The test's own namespace: a veth to the bridge, no forwarding.
	host, hubEnd := "pc"+nt.id+"t", "pc"+nt.id+"u"
	run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", hubEnd)
	run(t, "ip", "link", "set", hubEnd, "netns", nt.hub)
	nt.ns(nt.hub, "ip", "link", "set", hubEnd, "master", br)
	nt.ns(nt.hub, "ip", "link", "set", hubEnd, "up")
	run(t, "ip", "addr", "add", nt.ip(254)+"/24", "dev", host)
	run(t, "ip", "link", "set", host, "up")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("pc%sn%d", nt.id, i)
		nt.nodeNS = append(nt.nodeNS, name)
		run(t, "ip", "netns", "add", name)
		nt.ns(name, "ip", "link", "set", "lo", "up")
		a, b := fmt.Sprintf("pc%sa%d", nt.id, i), fmt.Sprintf("pc%sb%d", nt.id, i)
		run(t, "ip", "link", "add", a, "type", "veth", "peer", "name", b)
		run(t, "ip", "link", "set", a, "netns", name)
		run(t, "ip", "link", "set", b, "netns", nt.hub)
		nt.ns(nt.hub, "ip", "link", "set", b, "master", br)
		nt.ns(nt.hub, "ip", "link", "set", b, "up")
		nt.ns(name, "ip", "link", "set", a, "name", "eth0")
		nt.ns(name, "ip", "addr", "add", nt.nodeIP(i)+"/24", "dev", "eth0")
		nt.ns(name, "ip", "link", "set", "eth0", "up")
	}
	return nt
}

// ip returns 198.18.<octet>.<host>.
func (nt *testNet) ip(host int) string { return fmt.Sprintf("198.18.%d.%d", nt.octet, host) }

// nodeIP is node i's address.
func (nt *testNet) nodeIP(i int) string { return nt.ip(11 + i) }

// webIP is the synthetic web's address (in the hub).
func (nt *testNet) webIP() string { return nt.ip(1) }

// ns runs a command inside namespace name.
func (nt *testNet) ns(name string, args ...string) {
	nt.t.Helper()
	run(nt.t, append([]string{"ip", "netns", "exec", name}, args...)...)
}

// cmd returns a command that runs inside namespace name.
func (nt *testNet) cmd(name, bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", name, bin}, args...)...)
}

// cut drops, inside node i's namespace, the packets it sends to each of
// peers and, unless oneWay, those it receives from them: the web and the
// test keep reaching it.
func (nt *testNet) cut(i int, peers []int, oneWay bool) {
	nt.t.Helper()
	for _, p := range peers {
		nt.ns(nt.nodeNS[i], "iptables", "-w", "-I", "OUTPUT", "-d", nt.nodeIP(p), "-j", "DROP")
		if !oneWay {
			nt.ns(nt.nodeNS[i], "iptables", "-w", "-I", "INPUT", "-s", nt.nodeIP(p), "-j", "DROP")
		}
	}
}

// heal removes every rule cut added in node i's namespace.
func (nt *testNet) heal(i int) {
	nt.t.Helper()
	nt.ns(nt.nodeNS[i], "iptables", "-w", "-F", "OUTPUT")
	nt.ns(nt.nodeNS[i], "iptables", "-w", "-F", "INPUT")
}

// remove deletes the namespaces (their veths and the bridge go with them).
func (nt *testNet) remove() {
	for _, name := range append(append([]string{}, nt.nodeNS...), nt.hub) {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			nt.t.Logf("cleanup: ip netns del %s: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
	}
	_ = exec.Command("ip", "link", "del", "pc"+nt.id+"t").Run() // gone with the hub already, normally
}
