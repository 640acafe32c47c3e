package phase

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/clock"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt with what the scripts print")

// TestScripts runs the schedule's scenarios in testdata/*.txt, in the
// manner of etcd raft's data-driven tests. A script is a list of
// commands, each followed, when it prints something, by a line "----" and
// the output expected, up to a blank line; "#" starts a comment line. A
// command's output differing from the one in the file fails the test;
// go test -run TestScripts -rewrite writes the outputs into the files.
//
// Every schedule of a script reads one clock.Fake as its local clock
// (now, tick) and has its own TimeSource: cluster time is local time plus
// its offset, with its uncertainty. Instants are written @seconds since the
// Unix epoch (@1009.5), durations as Go writes them (1.2s). The first
// argument of a command is the schedule it acts on, or a comma-separated
// list of them.
//
//	schedule ID [self=NAME] [duration=10s] [guard=1s] [phases=1] [columns=1999]
//	         [offset=D] [unc=D] [at=@T] [clock=ID]   a new schedule (self: ID);
//	                         at=@T: its cluster time is T now; clock=ID: it
//	                         shares that schedule's TimeSource
//	clock ID [offset=D] [unc=D] [at=@T]   change a schedule's TimeSource
//	now @T | tick D          move the local clock (forward only)
//	members IDS from=E NAMES...           SetMembersFrom(E, NAMES)
//	members IDS at=@T NAMES...            SetMembersFromInstant(T, NAMES)
//	set IDS NAMES...                      SetMembers: the epoch it takes effect
//	set IDS after=E NAMES...              SetMembersAfter: the epoch
//	set IDS at=@T [late] NAMES...         SetMembersAt: the instant
//	active IDS [@T...]       Active at local times T (default: now)
//	state IDS [@T...]        At: the whole state
//	handover IDS [@T...]     Handover
//	busy ID [@T] lookahead=D hashes=N     BusyHosts: the busy hashes below N
//	distinct IDS epochs=E..F [in=D]       whether the open members work on
//	                         distinct phases at D into each epoch E..F
//	announce-epoch ID [@T] lead=D         AnnounceEpoch
//	announce-at ID [@T] lead=D            AnnounceAt
//	hold IDS on|off          SetHold
//	fence ID [@T] epochs=N   Fence: the epoch the fence lasts until
//	latest ID                Latest and LatestAt
func TestScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

// scriptCmd is one command of a script and the output expected of it.
type scriptCmd struct {
	line int      // the command's line in its file
	text string   // the command
	pre  []string // the comment and blank lines before it
	want string
}

// parseScript reads a script; trailing holds the lines after its last
// command.
func parseScript(path string) (cmds []scriptCmd, trailing []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var pre []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre = append(pre, l)
			continue
		}
		if l == "----" {
			return nil, nil, fmt.Errorf("%s:%d: ---- without a command", path, i+1)
		}
		c := scriptCmd{line: i + 1, text: strings.TrimSpace(l), pre: pre}
		pre = nil
		if i+1 < len(lines) && lines[i+1] == "----" {
			i++
			var out []string
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
				i++
				out = append(out, lines[i])
			}
			c.want = strings.Join(out, "\n")
		}
		cmds = append(cmds, c)
	}
	return cmds, pre, nil
}

func runScript(t *testing.T, path string) {
	cmds, trailing, err := parseScript(path)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld()
	var out strings.Builder
	blank := false // out ends with a blank line
	for i := range cmds {
		c := &cmds[i]
		got, err := w.run(c.text)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", path, c.line, c.text, err)
		}
		got = strings.TrimRight(got, "\n")
		if !*rewrite && got != c.want {
			t.Errorf("%s:%d: %s\nwant:\n%s\ngot:\n%s", path, c.line, c.text, c.want, got)
		}
		pre := c.pre
		if blank && len(pre) > 0 && strings.TrimSpace(pre[0]) == "" {
			pre = pre[1:]
		}
		for _, l := range pre {
			out.WriteString(l + "\n")
		}
		out.WriteString(c.text + "\n")
		blank = false
		if got != "" {
			// The blank line ends the output.
			out.WriteString("----\n" + got + "\n\n")
			blank = true
		}
	}
	if blank && len(trailing) > 0 && strings.TrimSpace(trailing[0]) == "" {
		trailing = trailing[1:]
	}
	for _, l := range trailing {
		out.WriteString(l + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeClock is a TimeSource with a settable offset and uncertainty.
type fakeClock struct {
	off, unc atomic.Int64
}

func (f *fakeClock) Now() time.Time             { return time.Now().Add(f.Offset()) }
func (f *fakeClock) Offset() time.Duration      { return time.Duration(f.off.Load()) }
func (f *fakeClock) Uncertainty() time.Duration { return time.Duration(f.unc.Load()) }

// world is the state of a running script.
type world struct {
	local  *clock.Fake
	scheds map[string]*Schedule
	clocks map[string]*fakeClock
	order  []string // the schedules, in the order they were made
}

func newWorld() *world {
	return &world{local: clock.NewFake(time.Unix(0, 0)), scheds: map[string]*Schedule{}, clocks: map[string]*fakeClock{}}
}

// args is a command's arguments: key=value options, @instants and the
// rest (words) in order.
type args struct {
	opts  map[string]string
	times []time.Time
	words []string
}

func parseArgs(fields []string) (args, error) {
	a := args{opts: map[string]string{}}
	for _, f := range fields {
		switch k, v, ok := strings.Cut(f, "="); {
		case ok:
			a.opts[k] = v
		case strings.HasPrefix(f, "@"):
			at, err := parseInstant(f)
			if err != nil {
				return a, err
			}
			a.times = append(a.times, at)
		default:
			a.words = append(a.words, f)
		}
	}
	return a, nil
}

// parseInstant reads @seconds (a decimal, exact to the nanosecond).
func parseInstant(s string) (time.Time, error) {
	s = strings.TrimPrefix(s, "@")
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if len(frac) > 9 {
		return time.Time{}, fmt.Errorf("instant %s: finer than a nanosecond", s)
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("instant %s: %w", s, err)
	}
	var ns int64
	if frac != "" {
		if ns, err = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64); err != nil {
			return time.Time{}, fmt.Errorf("instant %s: %w", s, err)
		}
	}
	total := sec*1e9 + ns
	if neg {
		total = -total
	}
	return time.Unix(0, total), nil
}

// instant writes t as @seconds, with no trailing zeros.
func instant(t time.Time) string {
	ns := t.UnixNano()
	sign := ""
	if ns < 0 {
		sign, ns = "-", -ns
	}
	s := fmt.Sprintf("@%s%d", sign, ns/1e9)
	if f := ns % 1e9; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%09d", f), "0")
	}
	return s
}

func (a args) duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := a.opts[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: %w", key, v, err)
	}
	return d, nil
}

func (a args) int(key string, def int64) (int64, error) {
	v, ok := a.opts[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: %w", key, v, err)
	}
	return n, nil
}

// at is the instants given, or the local clock's now.
func (w *world) at(a args) []time.Time {
	if len(a.times) > 0 {
		return a.times
	}
	return []time.Time{w.local.Now()}
}

// targets resolves a comma-separated list of schedules.
func (w *world) targets(list string) ([]string, []*Schedule, error) {
	ids := strings.Split(list, ",")
	var ss []*Schedule
	for _, id := range ids {
		s, ok := w.scheds[id]
		if !ok {
			return nil, nil, fmt.Errorf("no schedule %q", id)
		}
		ss = append(ss, s)
	}
	return ids, ss, nil
}

func (w *world) run(line string) (string, error) {
	fields := strings.Fields(line)
	cmd := fields[0]
	switch cmd {
	case "now", "tick":
		return "", w.move(cmd, fields[1:])
	}
	if len(fields) < 2 {
		return "", fmt.Errorf("%s: no schedule named", cmd)
	}
	a, err := parseArgs(fields[2:])
	if err != nil {
		return "", err
	}
	switch cmd {
	case "schedule":
		return "", w.newSchedule(fields[1], a)
	case "clock":
		c, ok := w.clocks[fields[1]]
		if !ok {
			return "", fmt.Errorf("no schedule %q", fields[1])
		}
		return "", w.setClock(c, a)
	}
	ids, ss, err := w.targets(fields[1])
	if err != nil {
		return "", err
	}
	if cmd == "distinct" {
		return distinct(ids, ss, a)
	}
	var b strings.Builder
	for i, s := range ss {
		if err := w.apply(&b, cmd, ids[i], s, a); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

func (w *world) move(cmd string, fields []string) error {
	if len(fields) != 1 {
		return fmt.Errorf("%s: want one argument", cmd)
	}
	if cmd == "tick" {
		d, err := time.ParseDuration(fields[0])
		if err != nil || d < 0 {
			return fmt.Errorf("tick %s: want a duration >= 0", fields[0])
		}
		w.local.Advance(d)
		return nil
	}
	at, err := parseInstant(fields[0])
	if err != nil {
		return err
	}
	if at.Before(w.local.Now()) {
		return fmt.Errorf("now %s: before the local clock's %s", instant(at), instant(w.local.Now()))
	}
	w.local.Set(at)
	return nil
}

func (w *world) newSchedule(id string, a args) error {
	if _, dup := w.scheds[id]; dup {
		return fmt.Errorf("schedule %q made twice", id)
	}
	cfg := testScheduleConfig(id)
	if v, ok := a.opts["self"]; ok {
		cfg.Self = v
	}
	var err error
	if cfg.PhaseDuration, err = a.duration("duration", 10*time.Second); err != nil {
		return err
	}
	if cfg.Guard, err = a.duration("guard", time.Second); err != nil {
		return err
	}
	n, err := a.int("phases", int64(cfg.Phases))
	if err != nil {
		return err
	}
	cfg.Phases = int(n)
	if n, err = a.int("columns", int64(cfg.Columns)); err != nil {
		return err
	}
	cfg.Columns = int(n)
	clk := &fakeClock{}
	if other, ok := a.opts["clock"]; ok {
		if clk, ok = w.clocks[other]; !ok {
			return fmt.Errorf("clock=%s: no schedule %q", other, other)
		}
	}
	if err := w.setClock(clk, a); err != nil {
		return err
	}
	cfg.Clock, cfg.Local = clk, w.local
	s, err := NewSchedule(cfg)
	if err != nil {
		return err
	}
	w.scheds[id], w.clocks[id] = s, clk
	w.order = append(w.order, id)
	return nil
}

func (w *world) setClock(c *fakeClock, a args) error {
	if _, ok := a.opts["offset"]; ok {
		d, err := a.duration("offset", 0)
		if err != nil {
			return err
		}
		c.off.Store(int64(d))
	}
	if _, ok := a.opts["unc"]; ok {
		d, err := a.duration("unc", 0)
		if err != nil {
			return err
		}
		c.unc.Store(int64(d))
	}
	if v, ok := a.opts["at"]; ok {
		at, err := parseInstant(v)
		if err != nil {
			return err
		}
		c.off.Store(int64(at.Sub(w.local.Now())))
	}
	return nil
}

// apply runs cmd on schedule s (named id), writing its output to b.
func (w *world) apply(b *strings.Builder, cmd, id string, s *Schedule, a args) error {
	switch cmd {
	case "members":
		if v, ok := a.opts["at"]; ok {
			at, err := parseInstant(v)
			if err != nil {
				return err
			}
			fmt.Fprintf(b, "%s: in effect from %s\n", id, instant(s.SetMembersFromInstant(at, a.words)))
			return nil
		}
		from, err := a.int("from", 0)
		if err != nil {
			return err
		}
		if _, ok := a.opts["from"]; !ok {
			return fmt.Errorf("members: want from=EPOCH or at=@T")
		}
		s.SetMembersFrom(from, a.words)
	case "set":
		return set(b, id, s, a)
	case "active":
		for _, at := range w.at(a) {
			p, n, open := s.Active(at)
			fmt.Fprintf(b, "%s %s: phase %d of %d %s\n", id, instant(at), p, n, openWord(open))
		}
	case "state":
		for _, at := range w.at(a) {
			fmt.Fprintf(b, "%s %s: %s\n", id, instant(at), stateString(s.At(at)))
		}
	case "handover":
		for _, at := range w.at(a) {
			fmt.Fprintf(b, "%s %s: handover %s\n", id, instant(at), instant(s.Handover(at)))
		}
	case "busy":
		la, err := a.duration("lookahead", 0)
		if err != nil {
			return err
		}
		n, err := a.int("hashes", 12)
		if err != nil {
			return err
		}
		at := w.at(a)[0]
		busy := s.BusyHosts(at, la)
		var hs []string
		for h := range uint64(n) {
			if busy(h) {
				hs = append(hs, strconv.FormatUint(h, 10))
			}
		}
		fmt.Fprintf(b, "%s %s lookahead %s: busy [%s] of 0..%d\n", id, instant(at), la, strings.Join(hs, " "), n-1)
	case "announce-epoch", "announce-at":
		lead, err := a.duration("lead", 0)
		if err != nil {
			return err
		}
		at := w.at(a)[0]
		if cmd == "announce-epoch" {
			fmt.Fprintf(b, "%s %s lead %s: epoch %d\n", id, instant(at), lead, s.AnnounceEpoch(at, lead))
		} else {
			fmt.Fprintf(b, "%s %s lead %s: %s\n", id, instant(at), lead, instant(s.AnnounceAt(at, lead)))
		}
	case "hold":
		if len(a.words) != 1 || (a.words[0] != "on" && a.words[0] != "off") {
			return fmt.Errorf("hold: want on or off")
		}
		s.SetHold(a.words[0] == "on")
	case "fence":
		n, err := a.int("epochs", 1)
		if err != nil {
			return err
		}
		at := w.at(a)[0]
		fmt.Fprintf(b, "%s %s: fenced until epoch %d\n", id, instant(at), s.Fence(at, int(n)))
	case "latest":
		fmt.Fprintf(b, "%s: latest %v from %s\n", id, s.Latest(), instant(s.LatestAt()))
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

// set runs the set command: SetMembers, SetMembersAfter or SetMembersAt.
func set(b *strings.Builder, id string, s *Schedule, a args) error {
	if v, ok := a.opts["at"]; ok {
		at, err := parseInstant(v)
		if err != nil {
			return err
		}
		names, late := a.words, false
		if len(names) > 0 && names[0] == "late" {
			names, late = names[1:], true
		}
		fmt.Fprintf(b, "%s: from %s\n", id, instant(s.SetMembersAt(names, at, late)))
		return nil
	}
	if _, ok := a.opts["after"]; ok {
		e, err := a.int("after", 0)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "%s: from epoch %d\n", id, s.SetMembersAfter(a.words, e))
		return nil
	}
	fmt.Fprintf(b, "%s: from epoch %d\n", id, s.SetMembers(a.words))
	return nil
}

// distinct tells whether the schedules open at D into each epoch of a
// range work on distinct phases, with one phase count.
func distinct(ids []string, ss []*Schedule, a args) (string, error) {
	lo, hi, ok := strings.Cut(a.opts["epochs"], "..")
	from, err1 := strconv.ParseInt(lo, 10, 64)
	to, err2 := strconv.ParseInt(hi, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return "", fmt.Errorf("distinct: want epochs=E..F")
	}
	in, err := a.duration("in", 0)
	if err != nil {
		return "", err
	}
	var bad []string
	for e := from; e <= to; e++ {
		seen := map[int]string{}
		nphase := -1
		for i, s := range ss {
			at := EpochStart(e, s.PhaseDuration()).Add(in)
			st := s.At(at)
			if !st.Open {
				continue
			}
			if o, dup := seen[st.Phase]; dup {
				bad = append(bad, fmt.Sprintf("epoch %d: %s and %s on phase %d", e, o, ids[i], st.Phase))
			}
			if nphase >= 0 && st.NPhase != nphase {
				bad = append(bad, fmt.Sprintf("epoch %d: %s counts %d phases, another %d", e, ids[i], st.NPhase, nphase))
			}
			seen[st.Phase], nphase = ids[i], st.NPhase
		}
	}
	if len(bad) > 0 {
		return strings.Join(bad, "\n"), nil
	}
	return fmt.Sprintf("epochs %d..%d: the open members work on distinct phases", from, to), nil
}

func openWord(open bool) string {
	if open {
		return "open"
	}
	return "closed"
}

// stateString writes a State on one line: the instants as @seconds, the
// request deadline in local time.
func stateString(st State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d phase %d of %d %s", st.Epoch, st.Phase, st.NPhase, openWord(st.Open))
	if st.Held {
		b.WriteString(" held")
	}
	fmt.Fprintf(&b, " current %d slot %s swap %s guard %s from %s", st.Current(), instant(time.Unix(0, st.Slot)), instant(st.NextSwap), st.Guard, instant(st.GuardStart))
	if st.GuardCapped {
		b.WriteString(" capped")
	}
	fmt.Fprintf(&b, " deadline %s members %v", instant(st.RequestDeadline), st.Members)
	return b.String()
}

// The scripts' parser and printer round-trip.
func TestScriptInstants(t *testing.T) {
	for _, s := range []string{"@0", "@1009.5", "@1008.999", "@-1.000000001", "@1735689600.25"} {
		at, err := parseInstant(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := instant(at); got != s {
			t.Errorf("instant(parseInstant(%s)) = %s", s, got)
		}
	}
	if at, _ := parseInstant("@1008.999"); at.UnixNano() != 1008999000000 {
		t.Errorf("@1008.999 = %d ns", at.UnixNano())
	}
	if _, err := parseInstant("@1.0000000001"); err == nil {
		t.Error("an instant finer than a nanosecond accepted")
	}
}
