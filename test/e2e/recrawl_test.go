package e2e

import (
	"errors"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

// recrawlWeb is a small web whose pages half change every changeEvery.
func recrawlWeb(validators bool, changeEvery time.Duration) synthweb.Config {
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seeds, wc.TrapHosts = 5, 40, 2, 0
	wc.SlowHosts, wc.CrawlDelayHosts, wc.UnlinkedHosts = 0, 0, 0
	wc.ChangeEvery, wc.ChangingPages, wc.Validators = changeEvery, 0.5, validators
	return wc
}

// warcCapture is one response or revisit record of a page.
type warcCapture struct {
	typ, profile, refersURI, refersDate, date, digest string
	uri                                               string
}

// readCaptures reads every WARC file of dir with nlnwa/gowarc (strict,
// digests checked) and returns the response and revisit records per
// target URI (robots.txt aside), in the order written.
func readCaptures(t *testing.T, dir string) map[string][]warcCapture {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatal("no WARC file written")
	}
	out := map[string][]warcCapture{}
	for _, f := range files {
		rd, err := gowarc.NewWarcFileReader(f, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("gowarc: %s: %v", f, err)
			}
			wr := rec.WarcRecord
			if v, err := wr.ValidateDigest(); err != nil || len(v) > 0 {
				t.Errorf("gowarc: %s: %s record: digests %v %v", f, wr.Type(), v, err)
			}
			h := wr.WarcHeader()
			uri := h.Get(gowarc.WarcTargetURI)
			if (wr.Type() == gowarc.Response || wr.Type() == gowarc.Revisit) && !strings.HasSuffix(uri, "/robots.txt") {
				out[uri] = append(out[uri], warcCapture{typ: wr.Type().String(), profile: h.Get(gowarc.WarcProfile),
					refersURI: h.Get(gowarc.WarcRefersToTargetURI), refersDate: h.Get(gowarc.WarcRefersToDate), date: h.Get(gowarc.WarcDate),
					digest: h.Get(gowarc.WarcPayloadDigest), uri: uri})
			}
			rec.Close()
		}
		rd.Close()
	}
	return out
}

// warcBefore reports whether WARC-Date a is before b.
func warcBefore(a, b string) bool {
	ta, _ := time.Parse(time.RFC3339Nano, a)
	tb, _ := time.Parse(time.RFC3339Nano, b)
	return ta.Before(tb)
}

// TestRecurringCrawl crawls a web whose pages half change every 3 s with
// a revisit interval of 2 s, for several intervals, with and without the
// servers' validators: every page is fetched again one interval after its
// last fetch (within a scan period and some slack), an unchanged page is
// a 304 (or the same payload) archived as a revisit record referring to
// its last capture, a changed page is archived in full again, and another
// WARC reader reads every record.
func TestRecurringCrawl(t *testing.T) {
	const (
		interval    = 2 * time.Second
		changeEvery = 3 * time.Second
		run         = 11 * time.Second
		// slack: the revisit lane's tick (1 s), the scheduler's pass and
		// the host's delay between the due pages of one host, under -race
		// on a shared machine.
		slack = 2500 * time.Millisecond
	)
	for _, tc := range []struct {
		name       string
		validators bool
		profile    string
		unchanged  int // status of an unchanged page's fetch
	}{
		{"validators", true, archive.ProfileNotModified, 304},
		{"digest", false, archive.ProfileIdenticalPayload, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startWeb(t, recrawlWeb(tc.validators, changeEvery))
			cfg := srv.NodeConfig("recrawl", t.TempDir(), 10*time.Millisecond)
			cfg.Recrawl.Interval = interval
			exp := srv.Web.Expected(srv.Scope(cfg.UserAgent))
			n, stop := runNode(t, cfg)
			start := time.Now()
			// The node crawls for run, real time: the revisits over that
			// span (one interval after each fetch) are what is checked.
			time.Sleep(run)
			metrics := fetchText(t, "http://"+n.Addr().String()+"/metrics")
			stop()
			end := time.Now()

			visits := map[string][]synthweb.Visit{}
			for host, vs := range srv.Web.Visits() {
				for _, v := range vs {
					if v.URI != "/robots.txt" {
						u := "http://" + host + v.URI
						visits[u] = append(visits[u], v)
					}
				}
			}
			caps := readCaptures(t, filepath.Join(cfg.Data, "warc"))
			// The first response record of each payload: the one every
			// revisit record of the payload refers to (warc.dedup), under
			// its own URL or another's.
			first := map[string]warcCapture{}
			for _, cs := range caps {
				for _, c := range cs {
					if f, ok := first[c.digest]; c.typ == "response" && (!ok || warcBefore(c.date, f.date)) {
						first[c.digest] = c
					}
				}
			}
			var maxLate time.Duration
			var unchanged, changed int
			for u := range exp.Pages {
				vs := visits[u]
				if len(vs) < 3 {
					t.Errorf("%s fetched %d times in %s, want at least 3 (interval %s)", u, len(vs), run, interval)
					continue
				}
				for i := 1; i < len(vs); i++ {
					gap := vs[i].Start.Sub(vs[i-1].End)
					if gap < interval-50*time.Millisecond || gap > interval+slack {
						t.Errorf("%s: fetch %d came %s after the previous one ended, want %s..%s", u, i, gap, interval, interval+slack)
					}
					maxLate = max(maxLate, gap-interval)
				}
				if idle := end.Sub(vs[len(vs)-1].End); idle > interval+slack+time.Second {
					t.Errorf("%s: not fetched during the last %s of the run", u, idle)
				}
				if vs[0].Status != 200 {
					continue // 404s, 410s and redirects: no revisit records
				}
				// What each fetch should have archived.
				var want []warcCapture
				for i, v := range vs {
					if i == 0 {
						want = append(want, warcCapture{typ: "response"})
						continue
					}
					r0, _, _ := srv.Web.Revision(u, vs[i-1].Start)
					r1, _, _ := srv.Web.Revision(u, v.Start)
					if r0 == r1 {
						unchanged++
						if v.Status != tc.unchanged {
							t.Errorf("%s: unchanged at fetch %d, got status %d, want %d", u, i, v.Status, tc.unchanged)
						}
						want = append(want, warcCapture{typ: "revisit", profile: tc.profile, refersURI: u})
					} else {
						changed++
						if v.Status != 200 {
							t.Errorf("%s: changed at fetch %d, got status %d, want 200", u, i, v.Status)
						}
						want = append(want, warcCapture{typ: "response"})
					}
				}
				got := caps[u]
				if len(got) != len(want) {
					t.Errorf("%s: %d WARC captures for %d fetches", u, len(got), len(want))
					continue
				}
				lastFull := ""
				for i := range want {
					g := got[i]
					orig, ok := first[g.digest]
					if !ok {
						t.Errorf("%s: capture %d has payload %q, of no response record", u, i, g.digest)
						continue
					}
					if orig.uri != u {
						// The payload of another URL's capture, archived
						// before: every capture of this URL is a revisit
						// of it.
						if g.typ != "revisit" || g.refersURI != orig.uri || g.refersDate != orig.date ||
							i == 0 && g.profile != archive.ProfileIdenticalPayload {
							t.Errorf("%s: capture %d is %+v, want a revisit of %s at %s", u, i, g, orig.uri, orig.date)
						}
						continue
					}
					if g.typ != want[i].typ || g.profile != want[i].profile || g.refersURI != want[i].refersURI {
						t.Errorf("%s: capture %d is %+v, want %+v", u, i, g, want[i])
					}
					if g.typ == "revisit" && g.refersDate != lastFull {
						t.Errorf("%s: revisit %d refers to %q, the last full capture is of %q", u, i, g.refersDate, lastFull)
					}
					if g.typ == "response" {
						lastFull = g.date
					}
				}
			}
			if unchanged == 0 || changed == 0 {
				t.Errorf("%d unchanged and %d changed revisits: the web should give both", unchanged, changed)
			}
			for _, m := range []string{"phasecrawl_recrawl_due_urls ", "phasecrawl_pages_unchanged_total ", "phasecrawl_pages_changed_total ", "phasecrawl_recrawl_lag_seconds_count "} {
				if !strings.Contains(metrics, m) {
					t.Errorf("/metrics lacks %s", m)
				}
			}
			if strings.Contains(metrics, "phasecrawl_pages_unchanged_total 0\n") {
				t.Error("phasecrawl_pages_unchanged_total is 0")
			}
			t.Logf("%d pages over %s: %d unchanged and %d changed revisits; latest revisit %s after its due time (+ the fetch's own commit)",
				len(exp.Pages), end.Sub(start).Round(time.Second), unchanged, changed, maxLate.Round(time.Millisecond))
		})
	}
}

// TestRecrawlPriorityUnderOverload: with one worker and a revisit interval
// shorter than a round of the whole web, the due work exceeds capacity;
// the host of the site with priority is served first, so its pages are
// revisited far sooner than the others'.
func TestRecrawlPriorityUnderOverload(t *testing.T) {
	srv := startWeb(t, recrawlWeb(true, 3*time.Second))
	cfg := srv.NodeConfig("overload", t.TempDir(), 60*time.Millisecond)
	cfg.Workers = 1
	cfg.Bucket.ListCap = 5 // trips are not preempted: short ones let the worker turn to the priority host sooner
	cfg.Recrawl.Interval = time.Second
	exp := srv.Web.Expected(srv.Scope(cfg.UserAgent))
	perHost := map[string]int{}
	for u := range exp.Pages {
		perHost[hostOf(u)]++
	}
	// The priority site: the smallest host of at least 3 pages (a trip
	// is not preempted, so a large host's own trips would fill its gaps).
	vip := ""
	for h, k := range perHost {
		if k >= 3 && (vip == "" || k < perHost[vip] || k == perHost[vip] && h < vip) {
			vip = h
		}
	}
	if vip == "" {
		t.Fatalf("no host with 3 pages: %v", perHost)
	}
	cfg.Sites = []config.Site{{Match: vip, Priority: 10}}
	_, stop := runNode(t, cfg)
	// The node crawls for 12 s, real time, under more due work than it
	// can do: the gaps between revisits over that span are what is checked.
	time.Sleep(12 * time.Second)
	stop()

	// Mean gap between two fetches of a URL, for the priority host and
	// for the others, over the revisits after the first round.
	var gap [2]time.Duration
	var cnt [2]int
	for host, vs := range srv.Web.Visits() {
		last := map[string]time.Time{}
		k := 1
		if host == vip {
			k = 0
		}
		for _, v := range vs {
			if v.URI == "/robots.txt" {
				continue
			}
			if prev, ok := last[v.URI]; ok {
				gap[k] += v.Start.Sub(prev)
				cnt[k]++
			}
			last[v.URI] = v.End
		}
	}
	if cnt[0] == 0 || cnt[1] == 0 {
		t.Fatalf("revisits: %d of the priority host, %d of the others", cnt[0], cnt[1])
	}
	mean := [2]time.Duration{gap[0] / time.Duration(cnt[0]), gap[1] / time.Duration(cnt[1])}
	t.Logf("one worker, %d URLs, interval 1s: the priority host's %d URLs revisited every %s on average (%d revisits), the others' every %s (%d)",
		len(exp.Pages), perHost[vip], mean[0].Round(time.Millisecond), cnt[0], mean[1].Round(time.Millisecond), cnt[1])
	if mean[0]*3 > mean[1]*2 {
		t.Errorf("the priority host is not served first: mean revisit gap %s, the others' %s", mean[0], mean[1])
	}
}

func hostOf(u string) string {
	h := strings.TrimPrefix(u, "http://")
	if i := strings.IndexByte(h, '/'); i >= 0 {
		h = h[:i]
	}
	return h
}
