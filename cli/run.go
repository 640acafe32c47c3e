package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
)

// newLogger builds the slog logger the configuration asks for.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// cmdRun starts a node (phasecrawl run) and runs it until SIGINT or
// SIGTERM or, with exit_when_done, until the crawl is done (watchDone).
func cmdRun(args []string, stderr io.Writer) error {
	cfg, err := config.Load(args, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	log.Info("config loaded", "name", cfg.Name, "data", cfg.Data, "http", cfg.HTTP, "workers", cfg.Workers, "delay", cfg.Delay, "seeds", len(cfg.Seeds))
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: log}})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.ExitWhenDone {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go watchDone(ctx, n, cfg.DoneGrace, log, cancel)
	}
	return n.Run(ctx)
}

// donePoll is how often run --exit-when-done looks at the crawl;
// memberTimeout bounds each member's answer.
const (
	donePoll      = 500 * time.Millisecond
	memberTimeout = 2 * time.Second
)

// watchDone ends a node run with exit_when_done (stop) once the crawl is
// done: alone, once the node is done; in a cluster, once every member is.
// It returns when ctx is done.
//
// The crawl is done when every member that gossip says is alive answers
// its status with done (nothing IN_LIST, IN_PROGRESS or STALLED, no
// element queued or fetching; or its crawl budget spent) and an empty
// outbox, at least one page was
// fetched (a cluster that fetched nothing waits for its seeds), and all of
// it (the members, and each one's counts: pages, completed, stalled,
// errors) stays the same for the grace period, the largest done_grace
// among the members. A URL sent to a member stays in the sender's outbox
// until the receiver has it in its frontier, so a URL between two members
// is always seen; and since every new URL comes from a fetch, which
// changes a member's counts, two looks a grace period apart that see the
// same done cluster saw no work in between. A member that cannot be
// asked, or that gossip suspects, makes the crawl not done.
func watchDone(ctx context.Context, n *node.Node, grace time.Duration, log *slog.Logger, stop context.CancelFunc) {
	t := time.NewTicker(donePoll)
	defer t.Stop()
	var last string
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fp, g, ok := crawlDone(ctx, n)
		g = max(g, grace)
		now := time.Now()
		switch {
		case !ok:
			last = ""
		case fp != last:
			last, since = fp, now
		case now.Sub(since) >= g:
			log.Info("crawl done: exiting (exit_when_done)", "grace", g)
			stop()
			return
		}
	}
}

// crawlDone looks at every member once: ok when each is done, with the
// fingerprint of what it saw and the largest done_grace of the members.
func crawlDone(ctx context.Context, n *node.Node) (fp string, grace time.Duration, ok bool) {
	return doneView(n.Status(), func(addr string) (node.Status, error) {
		c := api.Client{Addr: addr, Timeout: memberTimeout, MaxAnswer: 1 << 20}
		return c.Status(ctx)
	})
}

// doneView is crawlDone on this node's status self, asking the other
// members for theirs with ask.
func doneView(self node.Status, ask func(api string) (node.Status, error)) (fp string, grace time.Duration, ok bool) {
	all := []node.Status{self}
	for _, m := range self.Members {
		switch {
		case m.Name == self.Node, m.State == "dead", m.State == "left":
			continue
		case m.State != "alive" || m.API == "":
			return "", 0, false
		}
		st, err := ask(m.API)
		if err != nil {
			return "", 0, false
		}
		all = append(all, st)
	}
	var parts []string
	var completed int64
	for _, st := range all {
		if !st.Done && !budgetSpent(st) {
			return "", 0, false
		}
		for _, k := range st.Outbox {
			if k > 0 {
				return "", 0, false
			}
		}
		completed += st.Frontier.Completed + st.Frontier.Stalled
		grace = max(grace, time.Duration(st.DoneGraceS*float64(time.Second)))
		parts = append(parts, fmt.Sprintf("%s:%d:%d:%d:%d:%d", st.Node, st.Frontier.Completed, st.Frontier.Stalled,
			st.Frontier.InList, st.PagesFetched, st.FetchErrors))
	}
	if completed == 0 {
		return "", 0, false // nothing crawled yet: waiting for seeds
	}
	sort.Strings(parts)
	return strings.Join(parts, " "), grace, true
}

// budgetSpent reports whether a node has spent its crawl budget
// (max_pages, max_duration): it starts no new request, so its crawl is
// over although URLs are left; the requests in flight finish when it
// stops (shutdown_timeout), as at any graceful stop.
func budgetSpent(st node.Status) bool {
	return st.Budget.Reached != ""
}
