package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/report"
)

// crawlLogFile is the crawl log's file name in a data directory.
const crawlLogFile = "crawl.log"

// reportAllHosts is the n asked of each member: every host, merged here.
const reportAllHosts = 100000

// cmdReport prints the hosts, MIME-type and status-code reports of a
// stopped node (its data directory) or of every member of a cluster (its
// API).
func cmdReport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: phasecrawl report --data DIR | --node ADDR [--sort queued|requests|bytes|errors] [--n N] [--json]

Prints three reports: the hosts (URLs queued, requests, pages, bytes,
errors by kind, URLs refused by reason, first and last fetch), the MIME
types and the HTTP status codes of the responses, each a text table (--json:
one JSON object {hosts, mimetypes, statuscodes}).
--data reads a stopped node's data directory (its crawl log and, read-only,
its frontier); --node asks a running node for the members of its cluster
and gathers every alive member's reports through their APIs. Flags:
`)
		fs.PrintDefaults()
	}
	data := fs.String("data", "", "data directory of a stopped node (its --data)")
	addr := fs.String("node", "", "API address of a running node: its whole cluster is reported")
	by := fs.String("sort", report.SortQueued, "order of the hosts: queued, requests, bytes or errors")
	n := fs.Int("n", 50, "hosts listed (0: all)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	if (*data == "") == (*addr == "") {
		return errors.New("give one of --data DIR (a stopped node) or --node ADDR (a running cluster)")
	}
	if !report.ValidSort(*by) {
		return fmt.Errorf("--sort=%q: must be queued, requests, bytes or errors", *by)
	}
	if *n < 0 {
		return fmt.Errorf("--n=%d: must be 0 (all) or more", *n)
	}
	var rep report.Report
	var err error
	if *data != "" {
		rep, err = dataReport(*data)
	} else {
		rep, err = clusterReport(*addr, stderr)
	}
	if err != nil {
		return err
	}
	rep.Hosts = report.SortHosts(rep.Hosts, *by, *n)
	rep.MIMETypes = report.SortCounts(rep.MIMETypes)
	rep.StatusCodes = report.SortCounts(rep.StatusCodes)
	if rep.Hosts == nil {
		rep.Hosts = []report.Host{}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return report.WriteText(stdout, rep)
}

// dataReport builds the reports of a stopped node from its data
// directory: its crawl log, the refused URLs it saved and, opened
// read-only, its frontier.
func dataReport(dir string) (report.Report, error) {
	r, err := frontier.OpenReadOnly(filepath.Join(dir, frontierFile), 0)
	if err != nil {
		return report.Report{}, err
	}
	defer r.Close()
	queued, err := r.QueuedByHost()
	if err != nil {
		return report.Report{}, err
	}
	t := report.NewTally()
	if _, _, err := t.ReadCrawlLog(filepath.Join(dir, crawlLogFile), 0); err != nil {
		return report.Report{}, err
	}
	refused, err := report.LoadRefused(filepath.Join(dir, report.RefusedName))
	if err != nil {
		return report.Report{}, err
	}
	t.AddRefusedAll(refused)
	rep := report.Report{Hosts: t.Hosts(), MIMETypes: t.MIMETypes(), StatusCodes: t.StatusCodes()}
	seen := make(map[string]bool, len(rep.Hosts))
	for i := range rep.Hosts {
		rep.Hosts[i].Queued = queued[rep.Hosts[i].Host]
		seen[rep.Hosts[i].Host] = true
	}
	for h, v := range queued {
		if !seen[h] {
			rep.Hosts = append(rep.Hosts, report.Host{Host: h, Queued: v})
		}
	}
	return rep, nil
}

// clusterReport gathers the reports of every alive member of the cluster
// of the node at addr (the node alone when it runs alone). A member that
// does not answer is named on stderr and left out.
func clusterReport(addr string, stderr io.Writer) (report.Report, error) {
	ctx := context.Background()
	members, err := (&api.Client{Addr: addr}).Members(ctx)
	if err != nil {
		return report.Report{}, fmt.Errorf("members of %s: %w", addr, err)
	}
	var rep report.Report
	asked := 0
	for _, m := range members {
		target := m.API
		if m.Self || target == "" {
			target = addr // this node: the address we reached it at
		}
		if m.State != "alive" {
			fmt.Fprintf(stderr, "member %s is %s: left out\n", m.Name, m.State)
			continue
		}
		one, err := memberReport(ctx, target)
		if err != nil {
			fmt.Fprintf(stderr, "member %s: %v: left out\n", m.Name, err)
			continue
		}
		rep = report.Merge(rep, one)
		asked++
	}
	if asked == 0 {
		return report.Report{}, fmt.Errorf("no member of %s's cluster answered", addr)
	}
	return rep, nil
}

// memberReport asks one node for its three reports.
func memberReport(ctx context.Context, addr string) (report.Report, error) {
	c := api.Client{Addr: addr}
	var hosts api.HostsReport
	var mimes, codes api.CountsReport
	for path, v := range map[string]any{
		fmt.Sprintf("/v1/hosts?sort=queued&n=%d", reportAllHosts): &hosts,
		"/v1/reports/mimetypes":                                   &mimes,
		"/v1/reports/statuscodes":                                 &codes,
	} {
		if err := c.GetJSON(ctx, path, v); err != nil {
			return report.Report{}, fmt.Errorf("GET %s: %w", path, err)
		}
	}
	return report.Report{Hosts: hosts.Hosts, MIMETypes: mimes.Rows, StatusCodes: codes.Rows}, nil
}
