package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/node"
)

// apiClient talks to a node's HTTP API.
var apiClient = &http.Client{Timeout: 60 * time.Second}

func nodeURL(addr, path string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/") + path
}

func cmdSeed(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("node", "127.0.0.1:7070", "node API address")
	file := fs.String("f", "", "file with one URL a line (- for standard input)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var body bytes.Buffer
	for _, u := range fs.Args() {
		body.WriteString(u + "\n")
	}
	if *file != "" {
		var r io.Reader = os.Stdin
		if *file != "-" {
			f, err := os.Open(*file)
			if err != nil {
				return fmt.Errorf("seeds file: %w", err)
			}
			defer f.Close()
			r = f
		}
		if _, err := io.Copy(&body, r); err != nil {
			return fmt.Errorf("read seeds: %w", err)
		}
	}
	if body.Len() == 0 {
		return fmt.Errorf("no URLs: give them as arguments or with -f FILE")
	}
	resp, err := apiClient.Post(nodeURL(*addr, "/v1/seeds"), "text/plain", &body)
	if err != nil {
		return fmt.Errorf("post seeds to %s: %w", *addr, err)
	}
	defer resp.Body.Close()
	var res node.SeedResult
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("node answered %s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	fmt.Fprintf(stdout, "%d given, %d new\n", res.Given, res.Added)
	for _, b := range res.Bad {
		fmt.Fprintf(stdout, "line %d: %s: %s\n", b.Line, b.URL, b.Error)
	}
	if len(res.Bad) > 0 {
		return fmt.Errorf("%d seeds refused", len(res.Bad))
	}
	return nil
}

func cmdStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("node", "127.0.0.1:7070", "node API address")
	asJSON := fs.Bool("json", false, "print the raw JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	resp, err := apiClient.Get(nodeURL(*addr, "/v1/status"))
	if err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status of %s: %s: %s", *addr, resp.Status, strings.TrimSpace(string(data)))
	}
	if *asJSON {
		_, err := stdout.Write(data)
		return err
	}
	var s node.Status
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "node      %s (up %.0fs, phase %d of %d)\n", s.Node, s.UptimeS, s.Phase.Current, s.Phase.NPhase)
	fmt.Fprintf(stdout, "fetched   %d pages, %d bytes\n", s.PagesFetched, s.BytesFetched)
	fmt.Fprintf(stdout, "frontier  in_list %d  in_progress %d  completed %d  stalled %d\n", s.Frontier.InList, s.Frontier.InProgress, s.Frontier.Completed, s.Frontier.Stalled)
	fmt.Fprintf(stdout, "bucket    free %d  queuing %d  fetching %d  timewait %d\n", s.Bucket.Free, s.Bucket.Queuing, s.Bucket.Fetching, s.Bucket.TimeWait)
	return nil
}
