package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/frontier"
)

// frontierFile is the frontier's file name in a data directory.
const frontierFile = "frontier.db"

// exportRecord is one line of `phasecrawl export --format jsonl`.
type exportRecord struct {
	URL        string     `json:"url"`
	Host       string     `json:"host"`
	State      string     `json:"state"`
	Depth      int        `json:"depth"`
	Tries      int        `json:"tries"`
	Status     int        `json:"status,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	Discovered *time.Time `json:"discovered,omitempty"`
	Fetched    *time.Time `json:"fetched,omitempty"`
	NextTry    *time.Time `json:"next_try,omitempty"`
}

// exportStates are the --state values and the frontier states they name.
var exportStates = map[string]frontier.State{
	"completed":   frontier.Completed,
	"in_list":     frontier.InList,
	"in_progress": frontier.InProgress,
	"stalled":     frontier.Stalled,
}

// cmdExport writes the URLs of a stopped node's frontier in the states
// asked for, one a line.
func cmdExport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: phasecrawl export --data DIR --state STATE[,STATE] [--format jsonl|text] [--out FILE]

Writes the URLs of a stopped node's frontier (its data directory, opened
read-only) in the given states: completed, in_list, stalled, in_progress
(a node killed while fetching), or all. jsonl: one JSON object a line
{url, host, state, depth, tries, status, reason, discovered, fetched,
next_try}; text: one URL a line. A node still running holds its frontier:
stop it first. Flags:
`)
		fs.PrintDefaults()
	}
	data := fs.String("data", "", "data directory of a stopped node (its --data). Required")
	stateArg := fs.String("state", "", "completed, in_list, stalled, in_progress or all; comma-separated for several. Required")
	format := fs.String("format", "jsonl", "jsonl or text")
	out := fs.String("out", "", "write to FILE instead of standard output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	if *data == "" {
		return errors.New("--data: required: the data directory of a stopped node")
	}
	want, err := parseExportStates(*stateArg)
	if err != nil {
		return err
	}
	if *format != "jsonl" && *format != "text" {
		return fmt.Errorf("--format=%q: must be jsonl or text", *format)
	}
	path := filepath.Join(*data, frontierFile)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("--data=%q: not a phasecrawl data directory (no %s): %w", *data, frontierFile, err)
	}
	ro, err := frontier.OpenReadOnly(path, 0)
	if errors.Is(err, frontier.ErrLocked) {
		return fmt.Errorf("--data=%q: a running node holds its frontier: stop the node first (export reads a stopped node's data): %w", *data, err)
	}
	if err != nil {
		return err
	}
	defer ro.Close()

	w := stdout
	var file *os.File
	if *out != "" {
		if file, err = os.Create(*out); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer file.Close()
		w = file
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	count := 0
	err = ro.Records(func(s frontier.State) bool { return want[s] }, func(r frontier.Record) error {
		count++
		if *format == "text" {
			_, err := bw.WriteString(r.URL + "\n")
			return err
		}
		return enc.Encode(exportRecord{URL: r.URL, Host: r.Host, State: r.State.String(), Depth: r.Depth, Tries: r.Tries,
			Status: r.Status, Reason: r.Reason, Discovered: timeOrNil(r.Discovered), Fetched: timeOrNil(r.Fetched), NextTry: timeOrNil(r.NextTry)})
	})
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export: write: %w", err)
	}
	if file != nil {
		if err := file.Close(); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	fmt.Fprintf(stderr, "exported %d URLs (%s)\n", count, *stateArg)
	return nil
}

// parseExportStates reads --state: a comma-separated list of states, or all.
func parseExportStates(arg string) (map[frontier.State]bool, error) {
	want := map[frontier.State]bool{}
	for _, s := range strings.Split(arg, ",") {
		s = strings.TrimSpace(s)
		if s == "all" {
			for _, st := range exportStates {
				want[st] = true
			}
			continue
		}
		st, ok := exportStates[s]
		if !ok {
			return nil, fmt.Errorf("--state=%q: must be completed, in_list, stalled, in_progress or all (comma-separated for several)", arg)
		}
		want[st] = true
	}
	return want, nil
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
