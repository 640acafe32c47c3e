package phase

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/ntp"

	"github.com/phasecrawl/phasecrawl/internal/clock"
	"github.com/phasecrawl/phasecrawl/internal/syncbuf"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// fakeNTP is a minimal NTPv4 server on 127.0.0.1 answering with a chosen
// clock offset, stratum, leap indicator and root dispersion.
type fakeNTP struct {
	addr     string
	offset   time.Duration
	stratum  uint8
	leap     uint8
	rootDisp time.Duration
	kiss     string
	silent   atomic.Bool  // drop requests
	served   atomic.Int64 // requests answered
}

const ntpEpochOffset = 2208988800 // seconds from 1900 to 1970

func ntpStamp(t time.Time) uint64 {
	sec := uint64(t.Unix() + ntpEpochOffset)
	frac := (uint64(t.Nanosecond()) << 32) / 1e9
	return sec<<32 | frac
}

func ntpShort(d time.Duration) uint32 { return uint32(d.Seconds() * 65536) }

// startFakeNTP serves f until the test ends.
func startFakeNTP(t *testing.T, f *fakeNTP) *fakeNTP {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	f.addr = conn.LocalAddr().String()
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 512)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return // closed
			}
			if n < 48 || f.silent.Load() {
				continue
			}
			recv := time.Now().Add(f.offset)
			var p [48]byte
			p[0] = f.leap<<6 | 4<<3 | 4 // LI, VN=4, mode 4 (server)
			p[1] = f.stratum
			p[2] = 6    // poll 64s
			p[3] = 0xEC // precision 2^-20
			binary.BigEndian.PutUint32(p[4:], ntpShort(time.Millisecond))
			binary.BigEndian.PutUint32(p[8:], ntpShort(f.rootDisp))
			if f.kiss != "" {
				copy(p[12:16], f.kiss)
			} else {
				copy(p[12:16], []byte{127, 0, 0, 1})
			}
			binary.BigEndian.PutUint64(p[16:], ntpStamp(recv.Add(-time.Second))) // reference time
			copy(p[24:32], buf[40:48])                                           // origin = client's transmit
			binary.BigEndian.PutUint64(p[32:], ntpStamp(recv))
			binary.BigEndian.PutUint64(p[40:], ntpStamp(time.Now().Add(f.offset)))
			// Counted before the reply goes: the client may have its
			// answer, and the test look, before this goroutine runs again.
			f.served.Add(1)
			_, _ = conn.WriteToUDP(p[:], from)
		}
	})
	t.Cleanup(func() { conn.Close(); wg.Wait() })
	return f
}

// deadAddr returns a loopback UDP address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	return addr
}

func newTestClock(t *testing.T, logs *syncbuf.Buffer, servers ...string) *Clock {
	t.Helper()
	cfg := DefaultClockConfig(servers...)
	cfg.Timeout = 500 * time.Millisecond
	cfg.Logger = slog.New(slog.DiscardHandler)
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	c, err := NewClock(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func near(got, want, tol time.Duration) bool { d := got - want; return d < tol && d > -tol }

func TestClockPicksSmallestRootDistance(t *testing.T) {
	far := startFakeNTP(t, &fakeNTP{offset: 2 * time.Second, stratum: 2, rootDisp: 200 * time.Millisecond})
	close := startFakeNTP(t, &fakeNTP{offset: -time.Second, stratum: 3, rootDisp: 2 * time.Millisecond})
	c := newTestClock(t, nil, far.addr, close.addr)
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := c.State()
	if !st.Synced || st.Server != close.addr || st.Stratum != 3 || st.Err != nil || st.LastSync.IsZero() {
		t.Fatalf("state %+v", st)
	}
	if !near(st.Offset, -time.Second, 50*time.Millisecond) || !near(c.Offset(), -time.Second, 50*time.Millisecond) {
		t.Fatalf("offset %v, want ~-1s", st.Offset)
	}
	if !near(c.Now().Sub(time.Now()), -time.Second, 50*time.Millisecond) {
		t.Fatal("Now is not local time plus the offset")
	}
	if u := c.Uncertainty(); u < 2*time.Millisecond || u > 100*time.Millisecond || u < st.RootDistance {
		t.Fatalf("uncertainty %v (root distance %v)", u, st.RootDistance)
	}
	if far.served.Load() == 0 {
		t.Fatal("not every server was queried")
	}
}

// TestClockOnInjectedLocal: the clock reads the local clock it is given:
// cluster time is that clock plus the offset, the sample is stamped with
// it, and the uncertainty grows by 15 ppm of the time it moved since.
func TestClockOnInjectedLocal(t *testing.T) {
	srv := startFakeNTP(t, &fakeNTP{offset: 2 * time.Second, stratum: 2, rootDisp: 5 * time.Millisecond})
	local := clock.NewFake(time.Now())
	cfg := DefaultClockConfig(srv.addr)
	cfg.Timeout, cfg.Logger, cfg.Local = 500*time.Millisecond, slog.New(slog.DiscardHandler), local
	c, err := NewClock(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := c.State()
	if !st.LastSync.Equal(local.Now()) {
		t.Fatalf("last sync %v, want the local clock's %v", st.LastSync, local.Now())
	}
	if got := c.Now(); !got.Equal(local.Now().Add(c.Offset())) {
		t.Fatalf("Now %v, want the local clock plus the offset %v", got, c.Offset())
	}
	u0 := c.Uncertainty()
	local.Advance(1000 * time.Second)
	if u := c.Uncertainty(); u != u0+15*time.Millisecond {
		t.Fatalf("uncertainty %v after 1000s, want %v + 15ms", u, u0)
	}
}

func TestClockRejectsInvalidResponses(t *testing.T) {
	tests := []struct {
		name string
		srv  func() *fakeNTP
		want error
	}{
		{"kiss of death", func() *fakeNTP { return &fakeNTP{stratum: 0, kiss: "RATE"} }, ntp.ErrKissOfDeath},
		{"leap not in sync", func() *fakeNTP { return &fakeNTP{stratum: 2, leap: 3} }, ntp.ErrInvalidLeapSecond},
		{"stratum 16", func() *fakeNTP { return &fakeNTP{stratum: 16} }, ntp.ErrInvalidStratum},
		{"dispersion over 16s", func() *fakeNTP { return &fakeNTP{stratum: 2, rootDisp: 17 * time.Second} }, ntp.ErrInvalidDispersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := startFakeNTP(t, tc.srv())
			c := newTestClock(t, nil, bad.addr)
			err := c.Sync(context.Background())
			if !errors.Is(err, tc.want) {
				t.Fatalf("Sync error %v, want %v", err, tc.want)
			}
			if st := c.State(); st.Synced || st.Offset != 0 || !errors.Is(st.Err, tc.want) {
				t.Fatalf("state %+v", st)
			}
			// With a good server next to it, the good one is used.
			good := startFakeNTP(t, &fakeNTP{offset: 300 * time.Millisecond, stratum: 4, rootDisp: 50 * time.Millisecond})
			c = newTestClock(t, nil, bad.addr, good.addr)
			if err := c.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := c.State(); !st.Synced || st.Server != good.addr || !near(st.Offset, 300*time.Millisecond, 50*time.Millisecond) {
				t.Fatalf("state %+v", st)
			}
		})
	}
}

func TestClockNoServerReachable(t *testing.T) {
	var logs syncbuf.Buffer
	silent := &fakeNTP{stratum: 2}
	silent.silent.Store(true)
	startFakeNTP(t, silent)
	c := newTestClock(t, &logs, deadAddr(t), silent.addr)
	err := c.Sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), silent.addr) {
		t.Fatalf("Sync error %v, want one naming %s", err, silent.addr)
	}
	st := c.State()
	if st.Synced || st.Offset != 0 || st.Err == nil || st.Server != "" {
		t.Fatalf("state %+v", st)
	}
	if c.Uncertainty() != time.Second {
		t.Fatalf("uncertainty %v, want the 1s default", c.Uncertainty())
	}
	if !near(c.Now().Sub(time.Now()), 0, 50*time.Millisecond) {
		t.Fatal("Now is not the local clock")
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "no NTP server usable") {
		t.Fatalf("no warning logged: %s", logs.String())
	}

	// No servers at all: the local clock, unsynced, with a warning.
	c = newTestClock(t, &logs, []string{}...)
	if err := c.Sync(context.Background()); err == nil || c.State().Synced {
		t.Fatal("a clock without servers reports synced")
	}
}

func TestClockKeepsOffsetWhenServersVanish(t *testing.T) {
	srv := startFakeNTP(t, &fakeNTP{offset: 5 * time.Second, stratum: 2, rootDisp: time.Millisecond})
	c := newTestClock(t, nil, srv.addr)
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.silent.Store(true)
	if err := c.Sync(context.Background()); err == nil {
		t.Fatal("Sync succeeded against a silent server")
	}
	st := c.State()
	if st.Synced || !near(st.Offset, 5*time.Second, 50*time.Millisecond) || st.Server != srv.addr || st.Err == nil {
		t.Fatalf("state %+v", st)
	}
	if u := c.Uncertainty(); u >= time.Second {
		t.Fatalf("uncertainty %v: the last good sample should still bound it", u)
	}
}

func TestClockRunStopsOnCancel(t *testing.T) {
	srv := startFakeNTP(t, &fakeNTP{offset: time.Second, stratum: 2})
	c := newTestClock(t, nil, srv.addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	wait.For(t, 10*time.Second, "Run synced", func() bool { return c.State().Synced })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestClockConfigValidate(t *testing.T) {
	mod := func(f func(*ClockConfig)) ClockConfig { c := DefaultClockConfig("pool.ntp.org"); f(&c); return c }
	for i, c := range []ClockConfig{
		mod(func(c *ClockConfig) { c.Servers = []string{""} }),
		mod(func(c *ClockConfig) { c.Interval = time.Millisecond }),
		mod(func(c *ClockConfig) { c.Timeout = 0 }),
		mod(func(c *ClockConfig) { c.UnsyncedUncertainty = -1 }),
	} {
		if _, err := NewClock(c); err == nil {
			t.Errorf("case %d accepted: %+v", i, c)
		}
	}
}

// Clock and LocalClock are TimeSources with Offset (for Schedule).
var (
	_ TimeSource                          = (*Clock)(nil)
	_ interface{ Offset() time.Duration } = (*Clock)(nil)
	_ TimeSource                          = LocalClock{}
)

// TestChronyLoopback queries a real chronyd serving on loopback. chronyd
// (Debian package chrony) must run as root; CI installs it. Without it the
// test fails when CI=true and is skipped otherwise.
func TestChronyLoopback(t *testing.T) {
	missing := func(why string) {
		msg := "chrony test needs " + why + " (apt-get install -y chrony; chronyd runs as root)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	bin, err := exec.LookPath("chronyd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/chronyd"); serr != nil {
			missing("chronyd, which is not installed")
		}
		bin = "/usr/sbin/chronyd"
	}
	if os.Geteuid() != 0 {
		missing("root: chronyd refuses to start otherwise")
	}
	dir := t.TempDir()
	addr := deadAddr(t) // a free loopback UDP port
	_, port, _ := net.SplitHostPort(addr)
	conf := filepath.Join(dir, "chrony.conf")
	cfg := fmt.Sprintf(`port %s
bindaddress 127.0.0.1
allow 127.0.0.1
local stratum 8
cmdport 0
bindcmdaddress /
pidfile %s/chronyd.pid
driftfile %s/drift
`, port, dir, dir)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out syncbuf.Buffer
	cmd := exec.CommandContext(ctx, bin, "-d", "-x", "-u", "root", "-f", conf)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	c := newTestClock(t, nil, addr)
	var lastErr error
	for i := 0; i < 50; i++ { // chronyd needs a moment to bind
		select {
		case err := <-exited:
			t.Fatalf("chronyd exited: %v\n%s", err, out.String())
		default:
		}
		if lastErr = c.Sync(ctx); lastErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatalf("no valid answer from chronyd on %s: %v\nchronyd output:\n%s", addr, lastErr, out.String())
	}
	st := c.State()
	t.Logf("chronyd %s: offset %v, root distance %v, rtt %v, stratum %d", addr, st.Offset, st.RootDistance, st.RTT, st.Stratum)
	if !st.Synced || st.Stratum != 8 || !near(st.Offset, 0, 50*time.Millisecond) || st.RootDistance > time.Second {
		t.Fatalf("state %+v", st)
	}
}
