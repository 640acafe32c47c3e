package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/node"
)

// TestCrawlFinish: the URLs of phasecrawl crawl come from the arguments,
// - (standard input) and -f; the data directory defaults to the first
// host and the time; what makes no sense for one crawl is refused.
func TestCrawlFinish(t *testing.T) {
	now := time.Date(2026, 11, 28, 23, 5, 9, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		set   func(*config.Config)
		seeds []string
		data  string
		err   string
	}{
		{name: "args", args: []string{"https://example.org/", "http://b.test:8080/x"},
			seeds: []string{"https://example.org/", "http://b.test:8080/x"}, data: "example.org-20261128-230509"},
		{name: "stdin", args: []string{"-"}, stdin: "# list\n\nhttp://b.test:8080/\nhttp://c.test/\n",
			seeds: []string{"http://b.test:8080/", "http://c.test/"}, data: "b.test_8080-20261128-230509"},
		{name: "data given", args: []string{"http://a.test/"}, set: func(c *config.Config) { c.Data = "mine" },
			seeds: []string{"http://a.test/"}, data: "mine"},
		{name: "no URL", err: "no URL given"},
		{name: "empty stdin", args: []string{"-"}, stdin: "# nothing\n", err: "no URL given"},
		{name: "not a URL", args: []string{"example.org"}, err: `"example.org" is not an http:// or https:// URL`},
		{name: "revisit", args: []string{"http://a.test/"}, set: func(c *config.Config) { c.Recrawl.Interval = time.Hour }, err: "--revisit"},
		{name: "cluster", args: []string{"http://a.test/"}, set: func(c *config.Config) { c.Cluster.Gossip = "127.0.0.1:7946" }, err: "--gossip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Data = ""
			if tc.set != nil {
				tc.set(&c)
			}
			args := tc.args
			err := crawlFinish(&c, &args, "", strings.NewReader(tc.stdin), now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(c.Seeds, " ") != strings.Join(tc.seeds, " ") || c.Data != tc.data {
				t.Errorf("seeds %q data %q, want %q %q", c.Seeds, c.Data, tc.seeds, tc.data)
			}
		})
	}
}

// TestProgressLine: on a terminal the line is redrawn in place (carriage
// return, clear to the end of the line); elsewhere it is a plain line.
func TestProgressLine(t *testing.T) {
	st := node.Status{PagesFetched: 120, BytesFetched: 2_500_000, FetchErrors: 3}
	st.Frontier.InList, st.Frontier.Stalled, st.Bucket.Fetching = 40, 2, 5
	start := time.Now()
	for _, tty := range []bool{true, false} {
		var b bytes.Buffer
		p := &progress{w: &b, tty: tty, start: start}
		p.draw(node.Status{}, start)
		p.draw(st, start.Add(65*time.Second))
		p.clear()
		out := b.String()
		want := "pages 120  1.8/s  queued 42  hosts 5  errors 3  archived 2.5 MB  1:05"
		if tty {
			if strings.Count(out, "\r") != 2 || strings.Count(out, "\x1b[K") != 2 || strings.Count(out, "\n") != 1 ||
				!strings.Contains(out, "\r"+want+"\x1b[K\n") {
				t.Errorf("terminal: %q", out)
			}
			continue
		}
		if strings.ContainsAny(out, "\r\x1b") || !strings.HasSuffix(out, "\n"+want+"\n") {
			t.Errorf("pipe: %q", out)
		}
	}
	var b bytes.Buffer
	(&progress{w: &b, quiet: true}).draw(st, start)
	if b.Len() != 0 {
		t.Errorf("--quiet drew %q", b.String())
	}
}

// TestProgressEvery: twice a second on a terminal, every 10 s elsewhere,
// unless --progress-interval says otherwise.
func TestProgressEvery(t *testing.T) {
	for _, tc := range []struct {
		set  time.Duration
		tty  bool
		want time.Duration
	}{
		{0, true, 500 * time.Millisecond},
		{0, false, 10 * time.Second},
		{time.Second, true, time.Second},
		{200 * time.Millisecond, false, 200 * time.Millisecond},
	} {
		if got := progressEvery(tc.set, tc.tty); got != tc.want {
			t.Errorf("progressEvery(%s, %v) = %s, want %s", tc.set, tc.tty, got, tc.want)
		}
	}
}
