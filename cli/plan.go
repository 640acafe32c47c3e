package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
)

// planPage is the sites asked of the node at a time: the API's most.
const planPage = 1000

// cmdPlan prints a node's revisit plan (GET /v1/plan, every page) as a table.
func cmdPlan(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := nodeFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tPRIORITY\tREVISIT_S\tNEXT_DUE\tLAST_ROUND_S\tMEASURED\tPAGES\tBYTES\tDEADLINE_S")
	c := api.Client{Addr: *addr}
	var spare *float64
	var roundEnd *time.Time
	for after, first := "", true; first || after != ""; first = false {
		page, err := c.Plan(context.Background(), after, planPage)
		if err != nil {
			return fmt.Errorf("plan of %s: %w", *addr, err)
		}
		spare, roundEnd = page.SpareS, page.FirstRoundEnd
		for _, s := range page.Sites {
			due := "-"
			if s.NextDue != nil {
				due = s.NextDue.UTC().Format(time.RFC3339)
			}
			measured := "no" // estimated: pages × delay
			if s.LastRoundMeasured {
				measured = "yes"
			}
			fmt.Fprintf(tw, "%s\t%d\t%g\t%s\t%.3f\t%s\t%d\t%d\t%g\n", s.Host, s.Priority, s.RevisitS, due, s.LastRoundS, measured, s.Pages, s.Bytes, s.DeadlineS)
		}
		after = page.Next
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if spare == nil {
		fmt.Fprintln(stdout, "spare_s: - (no host to revisit, or not computed yet)")
	} else {
		fmt.Fprintf(stdout, "spare_s: %.3f\n", *spare)
	}
	if roundEnd != nil {
		fmt.Fprintf(stdout, "first_round_end: %s (estimated)\n", roundEnd.UTC().Format(time.RFC3339))
	}
	return nil
}
