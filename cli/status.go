package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/phasecrawl/phasecrawl/api"
)

// cmdStatus prints a running node's status (GET /v1/status): a few lines,
// or the JSON as the node wrote it.
func cmdStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := nodeFlag(fs)
	asJSON := fs.Bool("json", false, "print the raw JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := api.Client{Addr: *addr}
	data, err := c.Get(context.Background(), "/v1/status")
	if err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	if *asJSON {
		_, err := stdout.Write(data)
		return err
	}
	var s api.Status
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "node      %s (up %.0fs, phase %d of %d)\n", s.Node, s.UptimeS, s.Phase.Current, s.Phase.NPhase)
	fmt.Fprintf(stdout, "fetched   %d pages, %d bytes\n", s.PagesFetched, s.BytesFetched)
	fmt.Fprintf(stdout, "frontier  in_list %d  in_progress %d  completed %d  stalled %d\n", s.Frontier.InList, s.Frontier.InProgress, s.Frontier.Completed, s.Frontier.Stalled)
	fmt.Fprintf(stdout, "bucket    free %d  queuing %d  fetching %d  timewait %d\n", s.Bucket.Free, s.Bucket.Queuing, s.Bucket.Fetching, s.Bucket.TimeWait)
	if s.Paused {
		fmt.Fprintf(stdout, "paused    no new request starts (phasecrawl resume)\n")
	}
	if s.Budget.Reached != "" {
		fmt.Fprintf(stdout, "budget    spent (%s): no new request starts\n", s.Budget.Reached)
	}
	return nil
}
