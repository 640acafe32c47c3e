package salvage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/cluster"
	"github.com/phasecrawl/phasecrawl/cluster/exchange"
	"github.com/phasecrawl/phasecrawl/frontier"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// recordCase is a frontier record a dead node may leave, and what salvage
// sends for it.
type recordCase struct {
	name  string
	depth int
	// set brings the record (already added IN_LIST unless it is made by
	// cluster.RecordWriter.AddDone or AddReplicas) to its state.
	set   func(ctx context.Context, f *frontier.Frontier, u frontier.NewURL) error
	state frontier.State
	kind  exchange.Kind
}

func mark(ctx context.Context, f *frontier.Frontier, u frontier.NewURL) error {
	return f.MarkInProgress(ctx, []frontier.Ref{frontier.RefOf(u.URL)})
}

func finish(state frontier.State, reason string) func(context.Context, *frontier.Frontier, frontier.NewURL) error {
	return func(ctx context.Context, f *frontier.Frontier, u frontier.NewURL) error {
		if err := mark(ctx, f, u); err != nil {
			return err
		}
		r := frontier.RefOf(u.URL)
		return f.Finish(ctx, []frontier.Result{{FP: r.FP, Host: r.Host, State: state, Status: 200, Reason: reason, RetryAt: time.Now().Add(time.Hour)}})
	}
}

var recordCases = []recordCase{
	{"in_list", 1, nil, frontier.InList, exchange.KindMoved},
	{"in_progress", 2, mark, frontier.InProgress, exchange.KindMoved},
	{"stalled", 3, finish(frontier.Stalled, "timeout"), frontier.Stalled, exchange.KindMoved},
	{"completed", 4, finish(frontier.Completed, "ok"), frontier.Completed, exchange.KindDone},
	{"completed_robots", 5, finish(frontier.Completed, "robots"), frontier.Completed, exchange.KindDone},
	{"moved_here_done", 6, func(ctx context.Context, f *frontier.Frontier, u frontier.NewURL) error {
		_, err := cluster.RecordWriter{Records: f}.AddDone(ctx, []frontier.NewURL{u})
		return err
	}, frontier.Completed, exchange.KindDone},
	{"replica", 7, func(ctx context.Context, f *frontier.Frontier, u frontier.NewURL) error {
		_, err := cluster.RecordWriter{Records: f}.AddReplicas(ctx, []frontier.NewURL{u})
		return err
	}, frontier.Completed, exchange.KindReplica},
}

// deadDir builds a data directory as a node killed mid-crawl leaves it:
// per record case n records, and outbox entries waiting for two peers (n
// discovered URLs for "a", n completed records for "b"). It returns the
// URLs with the case (or outbox kind) each stands for.
func deadDir(t *testing.T, n int) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	f, err := frontier.Open(frontier.Options{Path: filepath.Join(dir, FrontierFile), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, tc := range recordCases {
		for i := range n {
			u := frontier.NewURL{URL: fmt.Sprintf("http://h%d.test/%s/%d", i%7, tc.name, i), Depth: tc.depth}
			if tc.name != "moved_here_done" && tc.name != "replica" {
				if _, err := f.Add(ctx, []frontier.NewURL{u}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.set != nil {
				if err := tc.set(ctx, f, u); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
			}
			want[u.URL] = tc.name
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ob, err := exchange.OpenOutbox(exchange.OutboxConfig{Path: filepath.Join(dir, OutboxFile), NoSync: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var news, dones []frontier.NewURL
	for i := range n {
		news = append(news, frontier.NewURL{URL: fmt.Sprintf("http://o%d.test/new/%d", i%3, i), Host: fmt.Sprintf("o%d.test", i%3), Depth: 8})
		dones = append(dones, frontier.NewURL{URL: fmt.Sprintf("http://o%d.test/done/%d", i%3, i), Host: fmt.Sprintf("o%d.test", i%3), Depth: 9})
		want[news[i].URL], want[dones[i].URL] = "outbox new", "outbox done"
	}
	if err := ob.Put(ctx, "a", news); err != nil {
		t.Fatal(err)
	}
	if err := ob.PutDone(ctx, "b", dones); err != nil {
		t.Fatal(err)
	}
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

// addLendEntries adds to the outbox of the dead node's directory dir what
// cluster.lend files there: a URL of its own it lent (its record is in its
// frontier: not sent from the outbox), and the outcome of a URL it
// fetched for another member (sent on to it).
func addLendEntries(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	ob, err := exchange.OpenOutbox(exchange.OutboxConfig{Path: filepath.Join(dir, OutboxFile), NoSync: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	// With cluster.lend: URLs of its own the node lent (their records are
	// in its frontier: not sent from the outbox), and the outcome of a URL
	// it fetched for another member (sent on to it).
	lends := []frontier.NewURL{{URL: "http://h0.test/in_list/0", Host: "h0.test\n7 0 dead", Depth: 3}}
	if err := ob.PutKind(ctx, "a", exchange.KindLend, lends); err != nil {
		t.Fatal(err)
	}
	outcome := frontier.NewURL{URL: "http://o1.test/lent/1", Host: "o1.test\n2 200 0 10 0 ok", Depth: 4}
	if err := ob.PutKind(ctx, "b", exchange.KindOutcome, []frontier.NewURL{outcome}); err != nil {
		t.Fatal(err)
	}
	want[outcome.URL] = "outbox outcome"
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDirEach: every record state of a dead node's frontier, and every
// outbox entry, is read with the kind it is sent as and its depth, the
// completed fingerprints before the URLs to crawl.
func TestDirEach(t *testing.T) {
	dir, want := deadDir(t, 5)
	addLendEntries(t, dir, want)
	d, err := OpenDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.HasOutbox() {
		t.Fatal("no outbox")
	}
	byCase := map[string]recordCase{}
	for _, tc := range recordCases {
		byCase[tc.name] = tc
	}
	seen := map[string]int{}
	unfinishedSeen := false
	err = d.Each(func(it Item) error {
		c, ok := want[it.URL]
		if !ok {
			return fmt.Errorf("unexpected %s", it.URL)
		}
		seen[c]++
		finished := it.Kind == exchange.KindDone || it.Kind == exchange.KindReplica
		if finished && unfinishedSeen {
			t.Errorf("%s (%s) after a URL to crawl", it.URL, it.Kind)
		}
		unfinishedSeen = unfinishedSeen || !finished
		switch c {
		case "outbox new":
			if it.Source != FromOutbox || it.Kind != exchange.KindNew || it.Peer != "a" || it.Depth != 8 {
				t.Errorf("%s: %+v", c, it)
			}
		case "outbox done":
			if it.Source != FromOutbox || it.Kind != exchange.KindDone || it.Peer != "b" || it.Depth != 9 {
				t.Errorf("%s: %+v", c, it)
			}
		case "outbox outcome":
			if it.Source != FromOutbox || it.Kind != exchange.KindOutcome || it.Peer != "b" || it.Depth != 4 {
				t.Errorf("%s: %+v", c, it)
			}
		default:
			tc := byCase[c]
			if it.Source != FromFrontier || it.State != tc.state || it.Kind != tc.kind || it.Depth != tc.depth || it.Host == "" {
				t.Errorf("%s: read %+v, want state %s kind %s depth %d", c, it, tc.state, tc.kind, tc.depth)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range want {
		if n := map[string]int{"outbox outcome": 1}[c]; n == 0 && seen[c] != 5 || n > 0 && seen[c] != n {
			t.Errorf("%s: %d items, want %d", c, seen[c], max(n, 5))
		}
	}
}

// TestOpenDirRefuses: a directory a running node holds, one without a
// frontier and a path that is not a directory are refused with errors that
// say so.
func TestOpenDirRefuses(t *testing.T) {
	held := t.TempDir()
	f, err := frontier.Open(frontier.Options{Path: filepath.Join(held, FrontierFile), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	heldOutbox, _ := deadDir(t, 1)
	ob, err := exchange.OpenOutbox(exchange.OutboxConfig{Path: filepath.Join(heldOutbox, OutboxFile), NoSync: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o600)
	for _, tc := range []struct {
		name, dir, want string
		locked          bool
	}{
		{"frontier held", held, "locked by another process", true},
		{"outbox held", heldOutbox, "locked by another process", true},
		{"empty directory", t.TempDir(), "not a phasecrawl data directory", false},
		{"not a directory", file, "not a directory", false},
		{"missing", filepath.Join(t.TempDir(), "none"), "no such file", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := OpenDir(tc.dir, 100*time.Millisecond)
			if err == nil {
				d.Close()
				t.Fatal("opened")
			}
			if errors.Is(err, ErrLocked) != tc.locked || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want %q (locked %v)", err, tc.want, tc.locked)
			}
		})
	}
}

// ownsAll is the Directory of a member alone: it owns every URL and knows
// no peer.
type ownsAll struct{}

func (ownsAll) OwnerOf(frontier.NewURL) string { return "live" }
func (ownsAll) AddrOf(string) (string, bool)   { return "", false }

// liveMember is an exchange backed by a frontier that owns every URL.
func liveMember(t *testing.T) (*exchange.Stream, *frontier.Frontier) {
	t.Helper()
	f, err := frontier.Open(frontier.Options{Path: filepath.Join(t.TempDir(), "frontier.db"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := exchange.OpenOutbox(exchange.OutboxConfig{Path: filepath.Join(t.TempDir(), "outbox.db"), NoSync: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	x, err := exchange.New(exchange.Config{Name: "live", Listen: "127.0.0.1:0", Key: testKey, Outbox: ob, Local: exchange.StoreReceiver(cluster.RecordWriter{Records: f}),
		Directory: ownsAll{}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close(); ob.Close(); f.Close() })
	return x, f
}

// TestRunIntoExchange: Run sends a dead node's directory to a live
// member's exchange in acknowledged batches; the member's frontier ends up
// with every unfinished URL to crawl (depth kept) and every completed one
// done; a second Run adds nothing (the receiver dedups by fingerprint).
func TestRunIntoExchange(t *testing.T) {
	const n = 40
	dir, want := deadDir(t, n)
	x, live := liveMember(t)
	ctx := context.Background()
	var sums []Summary
	for round := range 2 {
		d, err := OpenDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Run(ctx, d, Config{Node: x.Addr(), Key: testKey, BatchSize: 64, Logger: quiet()})
		d.Close()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		t.Logf("round %d:\n%s", round, s)
		sums = append(sums, s)
	}
	s := sums[0]
	total := len(want)
	if s.Peer != "live" || s.Sent != total || s.Batches != (total+63)/64 || s.Skipped != 0 || s.Resent != 0 {
		t.Errorf("first run: %+v, want %d entries sent to live in %d batches", s, total, (total+63)/64)
	}
	wantF := FrontierCounts{InList: n, InProgress: n, Stalled: n, Completed: 4 * n, Replicas: n}
	if s.Frontier != wantF || s.Outbox["new"] != n || s.Outbox["done"] != n {
		t.Errorf("first run counted %+v outbox %v, want %+v and %d new, %d done", s.Frontier, s.Outbox, wantF, n, n)
	}
	if s.Kinds["moved"] != 3*n || s.Kinds["done"] != 4*n || s.Kinds["replica"] != n || s.Kinds["new"] != n {
		t.Errorf("kinds sent: %v", s.Kinds)
	}
	if s.Added != uint64(total) {
		t.Errorf("first run: %d new to the member, want %d", s.Added, total)
	}
	if r := sums[1]; r.Sent != total || r.Added != 0 {
		t.Errorf("second run: %d sent, %d added, want %d sent, 0 added", r.Sent, r.Added, total)
	}
	for u, c := range want {
		rec, ok, err := live.Get(frontier.RefOf(u))
		if err != nil || !ok {
			t.Errorf("%s (%s) not in the live member's frontier (%v)", u, c, err)
			continue
		}
		wantDone := c == "outbox done" || c == "completed" || c == "completed_robots" || c == "moved_here_done" || c == "replica"
		if (rec.State == frontier.Completed) != wantDone {
			t.Errorf("%s (%s): %s at the live member", u, c, rec.State)
		}
		if !wantDone && rec.State != frontier.InList {
			t.Errorf("%s (%s): %s at the live member, want in_list", u, c, rec.State)
		}
	}
	if c := live.Counts(); c.Total() != int64(total) {
		t.Errorf("live frontier %+v, want %d records", c, total)
	}
}

// flaky is a sender whose Sends fail as told.
type flaky struct {
	fails  *int // Sends still to fail
	closed *int
	sent   *[]int
}

func (f flaky) Send(_ context.Context, id uint64, es []exchange.Entry) (uint64, error) {
	if *f.fails > 0 {
		*f.fails--
		return 0, fmt.Errorf("connection reset (fake)")
	}
	*f.sent = append(*f.sent, len(es))
	return uint64(len(es)), nil
}
func (f flaky) Peer() string       { return "fake" }
func (f flaky) MaxBatchBytes() int { return 1 << 20 }
func (f flaky) Close() error       { *f.closed++; return nil }

// TestRunRetries: a batch that fails is sent again on a new connection; one
// that keeps failing ends Run with an error naming the batch, what it
// holds and how far Run got.
func TestRunRetries(t *testing.T) {
	dir, want := deadDir(t, 10)
	for _, tc := range []struct {
		name    string
		fails   int
		wantErr string
		resent  int
	}{
		{"recovers", 2, "", 2},
		{"gives up", 100, "batch 1 (", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fails, closed, dials := tc.fails, 0, 0
			var sent []int
			cfg := Config{Node: "fake:1", BatchSize: 32, Attempts: 3, Backoff: time.Millisecond, Logger: quiet(),
				dial: func(context.Context) (sender, error) {
					dials++
					return flaky{&fails, &closed, &sent}, nil
				}}
			d, err := OpenDir(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			s, err := Run(context.Background(), d, cfg)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) ||
				!strings.Contains(err.Error(), "done") || !strings.Contains(err.Error(), "to fake:1 failed after 0 sent (0 batches): connection reset")) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if s.Resent != tc.resent || dials != tc.resent+1 || closed != dials {
				t.Errorf("resent %d, dials %d, closes %d; want %d resent, a dial and a close per attempt", s.Resent, dials, closed, tc.resent)
			}
			if tc.wantErr == "" && (s.Sent != len(want) || len(sent) != (len(want)+31)/32) {
				t.Errorf("sent %d in %v, want %d", s.Sent, sent, len(want))
			}
		})
	}
}

// TestRunDryRun: a dry run counts without connecting.
func TestRunDryRun(t *testing.T) {
	dir, want := deadDir(t, 3)
	d, err := OpenDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := Run(context.Background(), d, Config{DryRun: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range s.Kinds {
		n += v
	}
	if n != len(want) || s.Sent != 0 || s.Batches != 0 || !strings.Contains(s.String(), "dry run") {
		t.Errorf("dry run: %+v", s)
	}
}
