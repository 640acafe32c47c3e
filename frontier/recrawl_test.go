package frontier

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRecordCodecPageTail(t *testing.T) {
	now := time.Unix(1700000000, 5)
	want := stored{Record: Record{FP: 7, URL: "http://a.test/x", Host: "a.test", State: Completed, Status: 200, Reason: "ok",
		Due: now.Add(time.Hour), Page: PageState{ETag: `"abc"`, LastModified: "Tue, 14 Nov 2023 22:13:20 GMT",
			Digest: [20]byte{1, 2, 3, 19: 9}, Archived: now, Interval: 90 * time.Second, History: 0b101, Checks: 3}}, seq: 3}
	b := appendRecord(nil, &want)
	got, err := decodeRecord(7, b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Due.Equal(want.Due) || !got.Page.Archived.Equal(want.Page.Archived) {
		t.Fatalf("times: got %v %v", got.Due, got.Page.Archived)
	}
	got.Due, got.Page.Archived = want.Due, want.Page.Archived
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// A record without the tail (written before recurring crawls) is the
	// same bytes as before: nothing is appended.
	plain := want
	plain.Due, plain.Page = time.Time{}, PageState{}
	pb := appendRecord(nil, &plain)
	if p, err := decodeRecord(7, pb); err != nil || !p.Due.IsZero() || !p.Page.zero() {
		t.Fatalf("plain record: %+v, %v", p, err)
	}
	if len(pb) >= len(b) {
		t.Fatalf("plain record of %d bytes, page-tailed of %d", len(pb), len(b))
	}
	for i := len(pb); i < len(b); i++ { // every truncation of the tail is an error, never a panic
		if _, err := decodeRecord(7, b[:i]); err == nil && i > len(pb) {
			t.Errorf("record cut at %d of %d bytes decoded without error", i, len(b))
		}
	}
	// The queue entry of a revisit carries its Due.
	want.State = InList
	q, err := decodeQueueValue(appendQueueValue(nil, &want))
	if err != nil || !q.Due.Equal(want.Due) {
		t.Fatalf("queue value Due = %v, %v; want %v", q.Due, err, want.Due)
	}
}

func TestScheduleNext(t *testing.T) {
	const base = 100 * time.Second
	for _, tc := range []struct {
		name string
		s    Schedule
		cur  time.Duration
		c    Change
		want time.Duration
	}{
		{"off", Schedule{}, 0, Changed, 0},
		{"fixed ignores changes", Schedule{Interval: base}, 50 * time.Second, Changed, base},
		{"adaptive first fetch", Schedule{Interval: base, Adaptive: true}, 0, ChangeUnknown, base},
		{"adaptive shrinks on change", Schedule{Interval: base, Adaptive: true}, base, Changed, 80 * time.Second},
		{"adaptive grows when unchanged", Schedule{Interval: base, Adaptive: true}, base, Unchanged, 140 * time.Second},
		{"adaptive floor (default half)", Schedule{Interval: base, Adaptive: true}, 55 * time.Second, Changed, 50 * time.Second},
		{"adaptive ceiling (default 8x)", Schedule{Interval: base, Adaptive: true}, 700 * time.Second, Unchanged, 800 * time.Second},
		{"adaptive explicit bounds", Schedule{Interval: base, Adaptive: true, Min: 90 * time.Second, Max: 120 * time.Second}, base, Unchanged, 120 * time.Second},
	} {
		if got := tc.s.Next(tc.cur, tc.c); got != tc.want {
			t.Errorf("%s: Next(%s, %d) = %s, want %s", tc.name, tc.cur, tc.c, got, tc.want)
		}
	}
}

func TestPageHistory(t *testing.T) {
	var p PageState
	for _, c := range []Change{Changed, Unchanged, ChangeUnknown, Changed, Unchanged, Unchanged} {
		p.record(c)
	}
	if ch, n := p.Changes(); ch != 2 || n != 5 {
		t.Fatalf("Changes = %d of %d, want 2 of 5 (history %b)", ch, n, p.History)
	}
	for range 40 {
		p.record(Unchanged)
	}
	if ch, n := p.Changes(); ch != 0 || n != 16 {
		t.Fatalf("after 40 unchanged: %d of %d, want 0 of 16", ch, n)
	}
}

// fetchAll marks every URL of us IN_PROGRESS and finishes it COMPLETED
// with rev.
func fetchAll(t *testing.T, f *Frontier, us []NewURL, rev Schedule, c Change) {
	t.Helper()
	if err := f.MarkInProgress(ctx, refsOf(us)); err != nil {
		t.Fatal(err)
	}
	rs := make([]Result, len(us))
	for i, u := range us {
		rs[i] = Result{FP: Fingerprint(u.URL), Host: u.Host, State: Completed, Status: 200, Reason: "ok", Revisit: rev, Change: c,
			Page: &PageState{ETag: "e" + u.URL, Digest: [20]byte{byte(i + 1)}}}
	}
	if err := f.Finish(ctx, rs); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseDue(t *testing.T) {
	f := open(t, nil)
	us := gen("due", 3, 6)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	// Half are revisited every hour, half never.
	fetchAll(t, f, us[:3], Schedule{Interval: time.Hour}, ChangeUnknown)
	fetchAll(t, f, us[3:], Schedule{}, ChangeUnknown)
	if c := f.Counts(); c.Completed != 6 || c.InList != 0 {
		t.Fatalf("counts after the first round: %+v", c)
	}
	next, ok := f.NextDue()
	if !ok || time.Until(next) < 59*time.Minute || time.Until(next) > time.Hour {
		t.Fatalf("NextDue = %v, %v; want about an hour from now", next, ok)
	}
	if n, err := f.ReleaseDue(ctx, time.Now(), 0); err != nil || n != 0 {
		t.Fatalf("ReleaseDue now = %d, %v; want 0 (nothing due)", n, err)
	}
	if d := f.DueURLs(time.Now(), 100); d != 0 {
		t.Fatalf("DueURLs now = %d, want 0", d)
	}
	later := time.Now().Add(2 * time.Hour)
	if d := f.DueURLs(later, 100); d != 3 {
		t.Fatalf("DueURLs in 2h = %d, want 3", d)
	}
	// Survives a restart (kill -9 recovery reads the same file).
	f = reopen(t, f, nil)
	n, err := f.ReleaseDue(ctx, later, 2)
	if err != nil || n != 2 {
		t.Fatalf("ReleaseDue(limit 2) = %d, %v; want 2", n, err)
	}
	if n, err = f.ReleaseDue(ctx, later, 0); err != nil || n != 1 {
		t.Fatalf("second ReleaseDue = %d, %v; want 1", n, err)
	}
	if c := f.Counts(); c.Completed != 3 || c.InList != 3 || f.Revisits() != 3 {
		t.Fatalf("after release: %+v, revisits %d", c, f.Revisits())
	}
	queued := scanAll(t, f, 0, 0)
	if len(queued) != 3 {
		t.Fatalf("queue holds %d URLs, want 3", len(queued))
	}
	for _, r := range queued {
		if r.Due.IsZero() || r.Due.After(later) {
			t.Errorf("queued revisit %s: Due %v", r.URL, r.Due)
		}
		full, ok, err := f.Get(r.Ref())
		if err != nil || !ok || full.Page.ETag != "e"+r.URL || !full.Page.HasDigest() {
			t.Errorf("record of %s lost its page state: %+v, %v", r.URL, full.Page, err)
		}
	}
	f = reopen(t, f, nil)
	if f.Revisits() != 3 || f.DueURLs(time.Now(), 100) != 3 {
		t.Fatalf("after reopen: revisits %d, due %d; want 3, 3", f.Revisits(), f.DueURLs(time.Now(), 100))
	}
	// Fetched again, unchanged: due again, history kept, revisit done.
	fetchAll(t, f, us[:3], Schedule{Interval: time.Hour}, Unchanged)
	if f.Revisits() != 0 || f.Counts().Completed != 6 {
		t.Fatalf("after the revisit: revisits %d, %+v", f.Revisits(), f.Counts())
	}
	r, _, _ := f.Get(RefOf(us[0].URL))
	if ch, k := r.Page.Changes(); ch != 0 || k != 1 || r.Due.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("after an unchanged revisit: %d changes of %d, due %v", ch, k, r.Due)
	}
	// One due entry per URL: the next round releases each once.
	if n, err := f.ReleaseDue(ctx, later, 0); err != nil || n != 3 {
		t.Fatalf("ReleaseDue of the next round = %d, %v; want 3", n, err)
	}
}

func TestDueFilterAndMoves(t *testing.T) {
	f := open(t, nil)
	us := gen("mv", 2, 4)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	fetchAll(t, f, us, Schedule{Interval: time.Minute}, ChangeUnknown)
	refuse := RefOf(us[0].URL).FP
	f.SetDueFilter(func(r Record) bool { return r.FP != refuse })
	later := time.Now().Add(2 * time.Minute)
	if n, err := f.ReleaseDue(ctx, later, 0); err != nil || n != 3 {
		t.Fatalf("ReleaseDue with a filter = %d, %v; want 3", n, err)
	}
	r, _, _ := f.Get(RefOf(us[0].URL))
	if r.State != Completed || !r.Due.After(later) {
		t.Fatalf("refused record: %+v; want COMPLETED, due after %v", r, later)
	}
	// Claim and remove a queued revisit (a rebalance): it leaves the count.
	claimed, err := claim(f, []Ref{RefOf(us[1].URL), RefOf(us[0].URL)})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("Claim = %d, %v", len(claimed), err)
	}
	if n, err := remove(f, claimed); err != nil || n != 2 {
		t.Fatalf("Remove = %d, %v", n, err)
	}
	if f.Revisits() != 2 {
		t.Fatalf("revisits after moving one away = %d, want 2", f.Revisits())
	}
	// The receiving side: a COMPLETED record with its Due, and a queued
	// revisit with its Due.
	g := open(t, nil)
	due := time.Now().Add(30 * time.Second)
	if n, err := addCompleted(g, []NewURL{{URL: us[0].URL, Host: us[0].Host, Due: due}}, ReasonMoved); err != nil || n != 1 {
		t.Fatalf("AddDone = %d, %v", n, err)
	}
	if next, ok := g.NextDue(); !ok || !next.Equal(due) {
		t.Fatalf("NextDue after AddDone = %v, %v; want %v", next, ok, due)
	}
	if r, _, _ := g.Get(RefOf(us[0].URL)); r.Page.Interval <= 25*time.Second || r.Page.Interval > 30*time.Second {
		t.Fatalf("moved record's interval %s, want the time to its due time (about 30s)", r.Page.Interval)
	}
	if _, err := g.Add(ctx, []NewURL{{URL: us[1].URL, Host: us[1].Host, Due: due}}); err != nil {
		t.Fatal(err)
	}
	if c := g.Counts(); c.InList != 1 || c.Completed != 1 || g.Revisits() != 1 {
		t.Fatalf("receiver: %+v, revisits %d", c, g.Revisits())
	}
	// A moved revisit for a URL kept here COMPLETED (a replica) is queued.
	if _, err := g.Add(ctx, []NewURL{{URL: us[0].URL, Host: us[0].Host, Due: due}}); err != nil {
		t.Fatal(err)
	}
	if c := g.Counts(); c.InList != 2 || c.Completed != 0 || g.Revisits() != 2 {
		t.Fatalf("receiver after a moved revisit of a completed URL: %+v, revisits %d", c, g.Revisits())
	}
	if _, ok := g.NextDue(); ok {
		t.Fatal("the queued URL is still in the due index")
	}
}

func TestAdaptiveInterval(t *testing.T) {
	f := open(t, nil)
	us := gen("ad", 1, 2)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	sched := Schedule{Interval: 100 * time.Second, Adaptive: true, Min: 60 * time.Second, Max: 200 * time.Second}
	fetchAll(t, f, us, sched, ChangeUnknown)
	// us[0] never changes, us[1] always does: rounds of release and fetch.
	for round := range 4 {
		if n, err := f.ReleaseDue(ctx, time.Now().Add(time.Hour), 0); err != nil || n != 2 {
			t.Fatalf("round %d: released %d, %v", round, n, err)
		}
		for i, c := range []Change{Unchanged, Changed} {
			fetchAll(t, f, us[i:i+1], sched, c)
		}
	}
	want := []struct {
		interval time.Duration
		changes  int
	}{{200 * time.Second, 0}, {60 * time.Second, 4}} // 100×1.4⁴ capped at 200; 100×0.8⁴ = 41 raised to 60
	for i, u := range us {
		r, _, _ := f.Get(RefOf(u.URL))
		ch, n := r.Page.Changes()
		if r.Page.Interval != want[i].interval || ch != want[i].changes || n != 4 {
			t.Errorf("%s: interval %s, %d changes of %d; want %s, %d of 4", u.URL, r.Page.Interval, ch, n, want[i].interval, want[i].changes)
		}
		if d := time.Until(r.Due); d < want[i].interval-time.Minute/2 || d > want[i].interval {
			t.Errorf("%s: due in %s, want about %s", u.URL, d, want[i].interval)
		}
	}
}

func TestHostsAndHostNextDue(t *testing.T) {
	f := open(t, nil)
	us := gen("hs", 3, 9)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	fetchAll(t, f, us[:3], Schedule{Interval: time.Hour}, ChangeUnknown) // one URL of each host
	var all []HostStats
	for after := ""; ; {
		hs, next, err := f.Hosts(after, 2)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, hs...)
		if next == "" {
			break
		}
		after = next
	}
	if len(all) != 3 || all[0].Host != "hs0.test" || all[2].Host != "hs2.test" || all[0].Admitted != 3 || all[0].Fetched != 1 {
		t.Fatalf("hosts: %+v", all)
	}
	due, ok, err := f.HostNextDue("HS1.test")
	if err != nil || !ok || time.Until(due) < 59*time.Minute {
		t.Fatalf("HostNextDue = %v %v %v", due, ok, err)
	}
	if _, ok, _ := f.HostNextDue("none.test"); ok {
		t.Fatal("a host without records has a due time")
	}
}

func TestRevisitAfterTriesUsedUp(t *testing.T) {
	f := open(t, func(o *Options) { o.MaxTries = 1 })
	us := gen("st", 1, 1)
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	ref := RefOf(us[0].URL)
	if err := f.MarkInProgress(ctx, []Ref{ref}); err != nil {
		t.Fatal(err)
	}
	err := f.Finish(ctx, []Result{{FP: ref.FP, Host: ref.Host, State: Stalled, Reason: "timeout", Revisit: Schedule{Interval: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := f.Get(ref)
	if r.State != Completed || r.Due.IsZero() {
		t.Fatalf("a URL completed by its last failed try: %s, due %v; want COMPLETED and due again", r.State, r.Due)
	}
}

// TestRedueCopies: the due time of a COMPLETED record follows the copies
// other members send: a replica takes the owner's due time as it is, a
// moved record only an earlier one; a refused release waits the page's
// interval (not a minute), so a due time shipped by a rebalance is late by
// at most one interval.
func TestRedueCopies(t *testing.T) {
	f := open(t, nil)
	us := gen("rd", 1, 1)
	u := us[0]
	base := time.Now().Add(10 * time.Second).Truncate(time.Millisecond)
	dueOf := func() time.Time {
		t.Helper()
		r, ok, err := f.Get(RefOf(u.URL))
		if err != nil || !ok || r.State != Completed {
			t.Fatalf("record: %+v, %v, %v; want COMPLETED", r, ok, err)
		}
		return r.Due
	}
	steps := []struct {
		name    string
		replica bool
		due     time.Time
		want    time.Time
	}{
		{"a new replica", true, base, base},
		{"the owner's next revisit, later", true, base.Add(3 * time.Second), base.Add(3 * time.Second)},
		{"the owner's due time, earlier", true, base.Add(time.Second), base.Add(time.Second)},
		{"a moved copy, later: kept", false, base.Add(5 * time.Second), base.Add(time.Second)},
		{"a moved copy, earlier: taken", false, base, base},
		{"no due time: kept", true, time.Time{}, base},
		{"fetched here, a moved copy earlier: kept", false, base.Add(-time.Second), base},
	}
	for i, s := range steps {
		if i == len(steps)-1 { // fetched here since
			if n, err := f.ReleaseDue(ctx, base, 0); err != nil || n != 1 {
				t.Fatalf("ReleaseDue = %d, %v", n, err)
			}
			fetchAll(t, f, us, Schedule{Interval: 10 * time.Second}, ChangeUnknown)
			s.want = dueOf()
		}
		reason := ReasonMoved
		if s.replica {
			reason = ReasonReplica
		}
		if _, err := addCompleted(f, []NewURL{{URL: u.URL, Host: u.Host, Due: s.due}}, reason); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := dueOf(); !got.Equal(s.want) {
			t.Fatalf("%s: due %v, want %v", s.name, got, s.want)
		}
		if next, ok := f.NextDue(); !ok || !next.Equal(s.want) {
			t.Fatalf("%s: NextDue %v, %v; want %v (one index entry, at the record's due time)", s.name, next, ok, s.want)
		}
	}
	// Refused: it waits its interval (10s), not more.
	f.SetDueFilter(func(Record) bool { return false })
	now := base.Add(time.Second)
	if n, err := f.ReleaseDue(ctx, now, 0); err != nil || n != 0 {
		t.Fatalf("ReleaseDue refusing all = %d, %v", n, err)
	}
	r, _, _ := f.Get(RefOf(u.URL))
	if want := now.Add(10 * time.Second); r.Page.Interval != 10*time.Second || !dueOf().Equal(want) {
		t.Fatalf("refused: due %v with interval %s; want %v (its interval later)", dueOf(), r.Page.Interval, want)
	}
}

// TestSitemapLastModDue: a known URL added again with a sitemap's
// <lastmod> newer than its last capture is due at once; one whose lastmod
// is not newer, one without a lastmod, and one not revisited at all keep
// their schedule; a new URL with a lastmod is added as usual.
func TestSitemapLastModDue(t *testing.T) {
	f := open(t, nil)
	us := gen("lm", 1, 5)
	if _, err := f.Add(ctx, us[:4]); err != nil {
		t.Fatal(err)
	}
	archived := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := f.MarkInProgress(ctx, refsOf(us[:4])); err != nil {
		t.Fatal(err)
	}
	var rs []Result
	for i, u := range us[:4] {
		rev := Schedule{Interval: 24 * time.Hour}
		if i == 3 {
			rev = Schedule{} // crawled once
		}
		rs = append(rs, Result{FP: Fingerprint(u.URL), Host: u.Host, State: Completed, Status: 200, Reason: "ok", Revisit: rev,
			Page: &PageState{Digest: [20]byte{byte(i + 1)}, Archived: archived}})
	}
	if err := f.Finish(ctx, rs); err != nil {
		t.Fatal(err)
	}
	mods := []time.Time{archived.Add(time.Minute), archived.Add(-time.Minute), {}, archived.Add(time.Minute), archived.Add(time.Minute)}
	again := slices.Clone(us)
	for i := range again {
		again[i].LastMod = mods[i]
	}
	if _, err := f.Add(ctx, again); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if n, err := f.ReleaseDue(ctx, now, 0); err != nil || n != 1 {
		t.Fatalf("ReleaseDue after the sitemap = %d, %v; want 1 (the page modified since its capture)", n, err)
	}
	want := []struct {
		state State
		due   bool // due in about a day
	}{{InList, false}, {Completed, true}, {Completed, true}, {Completed, false}, {InList, false}}
	for i, u := range us {
		r, ok, err := f.Get(RefOf(u.URL))
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", u.URL, ok, err)
		}
		later := r.Due.After(now.Add(23 * time.Hour))
		if r.State != want[i].state || later != want[i].due {
			t.Errorf("%s (lastmod %v): %s due %v; want %s, due in a day %v", u.URL, mods[i], r.State, r.Due, want[i].state, want[i].due)
		}
	}
}

// TestHostRounds: a host's attempts and bytes are counted per round; the
// first round ends at the host's first revisit, a later one when a revisit
// finds as many attempts as the host has URLs. The trip times reported
// (AddRoundTimeAsync) follow the same rounds; LatestRound is the current
// round once it has an attempt per URL, else the last one. The counts
// survive a reopen.
func TestHostRounds(t *testing.T) {
	dir := t.TempDir()
	o := DefaultOptions(filepath.Join(dir, "frontier.db"))
	o.NoSync = true
	f, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	us := gen("rnd", 1, 3)
	host := us[0].Host
	if _, err := f.Add(ctx, us); err != nil {
		t.Fatal(err)
	}
	fetch := func(us []NewURL, bytes int64) {
		t.Helper()
		if err := f.MarkInProgress(ctx, refsOf(us)); err != nil {
			t.Fatal(err)
		}
		var rs []Result
		for _, u := range us {
			rs = append(rs, Result{FP: Fingerprint(u.URL), Host: u.Host, State: Completed, Status: 200, Reason: "ok", Bytes: bytes,
				Revisit: Schedule{Interval: time.Minute}})
		}
		if err := f.Finish(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	release := func() {
		t.Helper()
		if n, err := f.ReleaseDue(ctx, time.Now().Add(2*time.Minute), 0); err != nil || n != len(us) {
			t.Fatalf("ReleaseDue = %d, %v", n, err)
		}
	}
	trip := func(d time.Duration) {
		t.Helper()
		p := f.AddRoundTimeAsync(ctx, strings.ToUpper(host), d)
		if n, err := p.Wait(); err != nil || n != 1 {
			t.Fatalf("AddRoundTimeAsync = %d, %v", n, err)
		}
		if hs, ok := p.Host(); !ok || hs.Host != host || hs.RoundTime <= 0 {
			t.Fatalf("Pending.Host = %+v, %v", hs, ok)
		}
	}
	latest := func(what string, want time.Duration) {
		t.Helper()
		hs, _, _ := f.Host(host)
		_, _, took, ok := hs.LatestRound()
		if ok != (want > 0) || took != want {
			t.Fatalf("%s: LatestRound %v %v, want %v", what, took, ok, want)
		}
	}
	type counts struct {
		round, roundBytes, last, lastBytes int64
		roundTime, lastTime                time.Duration
	}
	check := func(what string, want counts) {
		t.Helper()
		hs, ok, err := f.Host(host)
		if err != nil || !ok {
			t.Fatalf("%s: host stats %v %v", what, ok, err)
		}
		if got := (counts{hs.RoundFetched, hs.RoundBytes, hs.LastRoundFetched, hs.LastRoundBytes, hs.RoundTime, hs.LastRoundTime}); got != want {
			t.Fatalf("%s: rounds %+v, want %+v", what, got, want)
		}
	}
	fetch(us[:2], 100)
	trip(time.Second)
	check("first crawl, two pages", counts{2, 200, 0, 0, time.Second, 0})
	latest("first crawl, two pages", 0) // not every URL tried yet, no last round
	fetch(us[2:], 100)
	trip(2 * time.Second)
	check("first crawl done", counts{3, 300, 0, 0, 3 * time.Second, 0})
	latest("first crawl done", 3*time.Second)
	release()
	fetch(us[:1], 1000)
	check("first revisit", counts{1, 1000, 3, 300, 0, 3 * time.Second})
	latest("first revisit", 3*time.Second)
	trip(time.Second)
	fetch(us[1:], 1000)
	trip(4 * time.Second)
	check("second round done", counts{3, 3000, 3, 300, 5 * time.Second, 3 * time.Second})
	latest("second round done", 5*time.Second)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(o); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check("reopened", counts{3, 3000, 3, 300, 5 * time.Second, 3 * time.Second})
	release()
	fetch(us[:1], 10)
	check("third round", counts{1, 10, 3, 3000, 0, 5 * time.Second})
	// A host this frontier has no statistics of is left alone.
	if n, err := f.AddRoundTimeAsync(ctx, "other.test", time.Second).Wait(); err != nil || n != 0 {
		t.Fatalf("AddRoundTimeAsync of an unknown host = %d, %v", n, err)
	}
	if _, ok, _ := f.Host("other.test"); ok {
		t.Fatal("AddRoundTimeAsync created the stats of an unknown host")
	}
}
