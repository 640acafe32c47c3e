package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/fetch/archive"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
)

// The exit codes of phasecrawl crawl.
const (
	exitDone        = 0   // the crawl finished
	exitError       = 1   // it stopped on an error (the error is the last line)
	exitUsage       = 2   // bad usage: no URL, a bad flag value
	exitInterrupted = 130 // SIGINT or SIGTERM: the data directory can be resumed
)

const crawlUsage = `Usage: phasecrawl crawl [flags] URL... | -f FILE | -

Crawls the sites of the URLs to the end with one node, then prints a
summary and exits. The scope is the URLs' hosts (--allow-domain widens it).
URLs come from the arguments, from -f FILE (one a line, # comments) and
from standard input when an argument is "-".

Progress goes to standard error: on a terminal one line redrawn twice a
second, otherwise a plain line every 10 s. The node's log goes to
DATA/phasecrawl.log (--verbose: standard error). The summary goes to
standard output (--json: one JSON object).

Exit status: 0 the crawl finished, 1 it stopped on an error, 2 bad usage,
130 interrupted (Ctrl-C). An interrupted crawl goes on where it stopped
when the same command runs again with the same --data.

Flags (every flag of phasecrawl run that makes sense for one node):
`

// crawlFlags are the flags of phasecrawl crawl beside the node's.
type crawlFlags struct {
	file     string
	verbose  bool
	quiet    bool
	json     bool
	progress time.Duration
}

// crawlSummary is what phasecrawl crawl prints at the end.
type crawlSummary struct {
	// Result: finished, budget (max_pages or max_duration reached),
	// interrupted or failed.
	Result  string  `json:"result"`
	Data    string  `json:"data"`
	Seconds float64 `json:"seconds"` // this run
	// PagesThisRun were fetched by this run; the figures below are read
	// from the crawl log, so they count every run on the data directory.
	PagesThisRun int64            `json:"pages_this_run"`
	Pages        int64            `json:"pages"`
	ByStatus     map[string]int64 `json:"pages_by_status"` // 2xx, 3xx, 4xx, 5xx, failed
	Bytes        int64            `json:"bytes"`
	Hosts        int              `json:"hosts"`
	// Refused counts URLs not fetched, by reason: robots (robots.txt
	// disallowed, from the crawl log) and the scope's reasons (this run).
	Refused  map[string]int64 `json:"refused"`
	Queued   int64            `json:"queued"` // URLs left to fetch (IN_LIST and STALLED)
	WARC     []string         `json:"warc"`
	CDXJ     []string         `json:"cdxj"`
	CrawlLog string           `json:"crawl_log"`
	Log      string           `json:"log"`
	Error    string           `json:"error,omitempty"`
}

func cmdCrawl(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cf crawlFlags
	var urls []string
	started := time.Now()
	cfg, err := config.LoadWith(args, os.LookupEnv, io.Discard, config.LoadOptions{
		Command: "crawl",
		Defaults: func(c *config.Config) {
			c.Data = ""
			c.HTTP = "127.0.0.1:0"
		},
		Flags: func(fs *flag.FlagSet) { crawlOwnFlags(fs, &cf) },
		Args:  &urls,
		Finish: func(c *config.Config) error {
			return crawlFinish(c, &urls, cf.file, stdin, started)
		},
	})
	if errors.Is(err, flag.ErrHelp) {
		crawlHelp(stdout)
		return exitDone
	}
	if err != nil {
		fmt.Fprintf(stderr, "phasecrawl crawl: %v (phasecrawl crawl -h lists the flags)\n", oneLine(err))
		return exitUsage
	}
	return crawl(cfg, cf, stdout, stderr, started)
}

// crawlHelp prints the usage and the flags, with a crawl's defaults.
func crawlHelp(w io.Writer) {
	fmt.Fprint(w, crawlUsage)
	cfg := config.Default()
	cfg.Data, cfg.HTTP = "", "127.0.0.1:0"
	var cf crawlFlags
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	config.BindFlags(fs, &cfg)
	crawlOwnFlags(fs, &cf)
	fs.VisitAll(func(f *flag.Flag) {
		if crawlRefused[f.Name] != "" {
			return
		}
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		kind, usage := flag.UnquoteUsage(f)
		line := "  " + dash + f.Name
		if kind != "" {
			line += " " + kind
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, usage)
	})
	fmt.Fprintln(w, "  --data default: a new directory named after the first host and the time")
}

// crawlOwnFlags defines the flags of phasecrawl crawl beside the node's.
func crawlOwnFlags(fs *flag.FlagSet, cf *crawlFlags) {
	fs.StringVar(&cf.file, "f", "", "`FILE` with one URL a line (# comments); - for standard input")
	fs.BoolVar(&cf.verbose, "verbose", false, "log to standard error instead of DATA/phasecrawl.log")
	fs.BoolVar(&cf.quiet, "quiet", false, "print only the summary")
	fs.BoolVar(&cf.json, "json", false, "print the summary as one JSON object")
	fs.DurationVar(&cf.progress, "progress-interval", 0, "time between two progress lines (0: 500ms on a terminal, 10s otherwise)")
}

// crawlRefused are the run flags that make no sense for one node that
// crawls once, with why.
var crawlRefused = map[string]string{
	"gossip":           "a crawl runs one node (phasecrawl run --gossip joins a cluster)",
	"join":             "a crawl runs one node (phasecrawl run --join joins a cluster)",
	"cluster-key-file": "a crawl runs one node",
	"exchange":         "a crawl runs one node",
	"phases":           "a crawl runs one node",
	"phase-duration":   "a crawl runs one node",
	"ntp":              "a crawl runs one node",
	"revisit":          "a recurring crawl never ends (phasecrawl run --revisit)",
	"exit-when-done":   "a crawl always exits when done",
}

// oneLine joins the lines of err's message.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}

// crawlFinish completes the configuration of a crawl: its URLs (args, -f
// and "-"), the flags it refuses, and the default data directory.
func crawlFinish(c *config.Config, args *[]string, file string, stdin io.Reader, now time.Time) error {
	if c.Cluster.Enabled() {
		return errors.New("--gossip: " + crawlRefused["gossip"])
	}
	if c.Recurring() {
		return errors.New("--revisit: " + crawlRefused["revisit"])
	}
	var urls []string
	readList := func(name string, r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line != "" && !strings.HasPrefix(line, "#") {
				urls = append(urls, line)
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		return nil
	}
	stdinRead := false
	for _, a := range *args {
		if a == "-" {
			if !stdinRead {
				if err := readList("standard input", stdin); err != nil {
					return err
				}
				stdinRead = true
			}
			continue
		}
		urls = append(urls, a)
	}
	switch file {
	case "":
	case "-":
		if !stdinRead {
			if err := readList("standard input", stdin); err != nil {
				return err
			}
		}
	default:
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("-f: %w", err)
		}
		err = readList(file, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	c.Seeds = append(c.Seeds, urls...)
	seeds, err := c.ReadSeeds()
	if err != nil {
		return err
	}
	if len(seeds) == 0 {
		return errors.New("no URL given: phasecrawl crawl https://example.org/")
	}
	for _, s := range seeds {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%q is not an http:// or https:// URL", s)
		}
	}
	if strings.TrimSpace(c.Data) == "" {
		u, _ := url.Parse(strings.TrimSpace(seeds[0]))
		host := strings.NewReplacer(":", "_", "/", "_").Replace(u.Host)
		c.Data = host + "-" + now.Format("20060102-150405")
	}
	return nil
}

// crawl runs the node of phasecrawl crawl to the end and prints the
// summary; it returns the exit code.
func crawl(cfg config.Config, cf crawlFlags, stdout, stderr io.Writer, started time.Time) int {
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		fmt.Fprintf(stderr, "phasecrawl crawl: data directory: %v\n", err)
		return exitError
	}
	logPath := filepath.Join(cfg.Data, "phasecrawl.log")
	logOut := stderr
	if !cf.verbose {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "phasecrawl crawl: log: %v\n", err)
			return exitError
		}
		defer f.Close()
		logOut = f
	}
	log := newLogger(cfg.Log, logOut)
	log.Info("crawl", "data", cfg.Data, "seeds", len(cfg.Seeds), "workers", cfg.Workers, "delay", cfg.Delay)
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: log}})
	if err != nil {
		fmt.Fprintf(stderr, "phasecrawl crawl: %v\n", err)
		return exitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- n.Run(runCtx) }()

	tty := false
	if f, ok := stderr.(*os.File); ok {
		tty = isTerminal(f)
	}
	p := &progress{w: stderr, tty: tty, quiet: cf.quiet, start: started, every: progressEvery(cf.progress, tty)}
	if !cf.quiet {
		status := ""
		if a := n.Addr(); a != nil {
			status = fmt.Sprintf(", status page http://%s/", a)
		}
		seeds, _ := cfg.ReadSeeds() // read once already (crawlFinish)
		fmt.Fprintf(stderr, "crawling %d URLs into %s%s\n", len(seeds), cfg.Data, status)
	}
	result, err := waitCrawl(ctx, n, runErr, p)
	interrupted := ctx.Err() != nil
	stop() // a second Ctrl-C kills the process (stop also cancels ctx)
	if err == nil {
		if interrupted && !cf.quiet {
			p.clear()
			fmt.Fprintln(stderr, "interrupted: the requests in flight finish (Ctrl-C again stops at once; the data directory stays resumable)")
			p.drawn = false
		}
		cancel()
		err = <-runErr // requests in flight finish, the outputs are flushed
		if interrupted {
			result = "interrupted"
		}
	}
	st := n.Status() // in-memory counts: still there once Run has closed the node
	p.clear()
	sum := summarize(cfg, n, st, result, time.Since(started))
	sum.Log = logPath
	if cf.verbose {
		sum.Log = ""
	}
	if err != nil {
		sum.Result, sum.Error = "failed", err.Error()
	}
	if cf.json {
		enc := json.NewEncoder(stdout)
		_ = enc.Encode(sum)
	} else {
		printSummary(stdout, sum)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "phasecrawl crawl: %v\n", err)
		return exitError
	case result == "interrupted":
		return exitInterrupted
	}
	return exitDone
}

// waitCrawl draws the progress until the crawl is done (or its budget
// spent), ctx is cancelled (interrupted) or Run fails.
func waitCrawl(ctx context.Context, n *node.Node, runErr chan error, p *progress) (string, error) {
	check := time.NewTicker(200 * time.Millisecond)
	defer check.Stop()
	draw := time.NewTicker(p.every)
	defer draw.Stop()
	p.draw(n.Status(), time.Now())
	doneSeen := 0
	for {
		select {
		case <-ctx.Done():
			return "interrupted", nil
		case err := <-runErr:
			if err == nil {
				err = errors.New("the node stopped")
			}
			return "failed", err
		case now := <-draw.C:
			p.draw(n.Status(), now)
		case now := <-check.C:
			st := n.Status()
			finished := st.Done
			budget := budgetSpent(st)
			if !finished && !budget {
				doneSeen = 0
				continue
			}
			if doneSeen++; doneSeen >= 2 {
				p.draw(st, now)
				if finished {
					return "finished", nil
				}
				return "budget", nil
			}
		}
	}
}

// progressEvery is the time between two progress lines: set (by
// --progress-interval), or twice a second on a terminal and every 10 s
// elsewhere (a log file, a pipe).
func progressEvery(set time.Duration, tty bool) time.Duration {
	switch {
	case set > 0:
		return set
	case tty:
		return 500 * time.Millisecond
	}
	return 10 * time.Second
}

// progress writes the progress line.
type progress struct {
	w         io.Writer
	tty       bool
	quiet     bool
	start     time.Time
	every     time.Duration
	lastPages int64
	lastAt    time.Time
	rate      float64
	drawn     bool
}

// draw writes one progress line: redrawn in place on a terminal, a plain
// line otherwise.
func (p *progress) draw(st node.Status, now time.Time) {
	if p.quiet {
		return
	}
	// pages/s over at least a second (the last line, drawn at the end,
	// keeps the rate of the line before).
	switch dt := now.Sub(p.lastAt).Seconds(); {
	case p.lastAt.IsZero():
		p.lastPages, p.lastAt = st.PagesFetched, now
	case dt >= 1:
		p.rate = float64(st.PagesFetched-p.lastPages) / dt
		p.lastPages, p.lastAt = st.PagesFetched, now
	case p.rate == 0 && dt > 0.2:
		p.rate = float64(st.PagesFetched-p.lastPages) / dt
	}
	line := fmt.Sprintf("pages %d  %.1f/s  queued %d  hosts %d  errors %d  archived %s  %s",
		st.PagesFetched, p.rate, st.Frontier.InList+st.Frontier.Stalled, st.Bucket.Fetching+st.Bucket.Queuing,
		st.FetchErrors, humanBytes(st.BytesFetched), elapsed(now.Sub(p.start)))
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// clear ends the redrawn line before the summary.
func (p *progress) clear() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\n")
	}
}

// humanBytes writes b in B, kB, MB or GB (powers of 1000).
func humanBytes(b int64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

// elapsed writes d as H:MM:SS or M:SS.
func elapsed(d time.Duration) string {
	s := int64(d.Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// summarize builds the summary from the node's last status st, its
// metrics and its data directory (crawl log, WARC files).
func summarize(cfg config.Config, n *node.Node, st node.Status, result string, d time.Duration) crawlSummary {
	sum := crawlSummary{
		Result: result, Data: cfg.Data, Seconds: d.Seconds(), PagesThisRun: st.PagesFetched,
		ByStatus: map[string]int64{}, Refused: nonZero(node.CountsByLabel(n.Metrics().OutOfScope, "reason")),
		Queued:   st.Frontier.InList + st.Frontier.Stalled + st.Frontier.InProgress,
		CrawlLog: filepath.Join(cfg.Data, "crawl.log"),
		WARC:     []string{}, CDXJ: []string{},
	}
	hosts := map[string]bool{}
	if f, err := os.Open(sum.CrawlLog); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var e archive.LogEntry
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			if e.Reason == "robots" {
				sum.Refused["robots"]++
				continue
			}
			if u, err := url.Parse(e.URL); err == nil {
				hosts[u.Host] = true
			}
			sum.Pages++
			sum.Bytes += e.Bytes
			if e.Status >= 100 && e.Status < 600 {
				sum.ByStatus[fmt.Sprintf("%dxx", e.Status/100)]++
			} else {
				sum.ByStatus["failed"]++
			}
		}
		f.Close()
	}
	sum.Hosts = len(hosts)
	if cfg.WARC.Enabled {
		sum.WARC, _ = filepath.Glob(filepath.Join(cfg.Data, "warc", "*.warc.gz"))
		sum.CDXJ, _ = filepath.Glob(filepath.Join(cfg.Data, "warc", "*.cdxj"))
		sort.Strings(sum.WARC)
		sort.Strings(sum.CDXJ)
		if sum.WARC == nil {
			sum.WARC = []string{}
		}
		if sum.CDXJ == nil {
			sum.CDXJ = []string{}
		}
	}
	return sum
}

// printSummary writes the summary for a person.
func printSummary(w io.Writer, s crawlSummary) {
	d := time.Duration(s.Seconds * float64(time.Second)).Round(100 * time.Millisecond)
	switch s.Result {
	case "finished":
		fmt.Fprintf(w, "crawl finished in %s\n", d)
	case "budget":
		fmt.Fprintf(w, "crawl stopped after %s: its budget (--max-pages, --max-duration) is spent\n", d)
	case "interrupted":
		fmt.Fprintf(w, "crawl interrupted after %s: the same command with --data %s goes on where it stopped\n", d, s.Data)
	default:
		fmt.Fprintf(w, "crawl failed after %s\n", d)
	}
	thisRun := ""
	if s.PagesThisRun != s.Pages {
		thisRun = fmt.Sprintf(" (%d this run)", s.PagesThisRun)
	}
	fmt.Fprintf(w, "  pages      %d%s, %s, %d hosts\n", s.Pages, thisRun, humanBytes(s.Bytes), s.Hosts)
	fmt.Fprintf(w, "  status     %s\n", keyCounts(s.ByStatus))
	refused := map[string]int64{}
	for k, v := range s.Refused {
		if name, ok := refusedNames[k]; ok {
			k = name
		}
		refused[k] += v
	}
	fmt.Fprintf(w, "  refused    %s\n", keyCounts(refused))
	if s.Queued > 0 {
		fmt.Fprintf(w, "  left       %d URLs\n", s.Queued)
	}
	fmt.Fprintf(w, "  data       %s\n", s.Data)
	for _, f := range s.WARC {
		fmt.Fprintf(w, "  WARC       %s\n", f)
	}
	for _, f := range s.CDXJ {
		fmt.Fprintf(w, "  CDXJ       %s\n", f)
	}
	fmt.Fprintf(w, "  crawl log  %s\n", s.CrawlLog)
	if s.Log != "" {
		fmt.Fprintf(w, "  node log   %s\n", s.Log)
	}
}

// refusedNames are the words of the summary for the reasons a URL was
// refused (the summary's JSON keeps the reasons as they are).
var refusedNames = map[string]string{
	"robots":  "robots.txt",
	"host":    "other hosts",
	"exclude": "excluded",
	"include": "not included",
	"scheme":  "not http(s)",
	"depth":   "too deep",
}

// keyCounts writes "k1 n1, k2 n2" sorted by key, or "none".
func keyCounts(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// nonZero drops the zero counts of m.
func nonZero(m map[string]int64) map[string]int64 {
	maps.DeleteFunc(m, func(_ string, v int64) bool { return v == 0 })
	return m
}
