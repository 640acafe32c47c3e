package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/internal/wait"
	"github.com/phasecrawl/phasecrawl/launch"
	"github.com/phasecrawl/phasecrawl/node"
	"github.com/phasecrawl/phasecrawl/report"
)

// reportWeb serves a small synthetic web on loopback.
func reportWeb(t *testing.T, hosts, pages int, trap bool) *webnode.Server {
	t.Helper()
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.Seeds = hosts, pages, 3
	wc.SlowHosts, wc.CrawlDelayHosts, wc.TrapHosts = 0, 0, 0
	if trap {
		wc.TrapHosts = 1
	}
	w, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// startReportNode runs a node on cfg; stop stops it and waits.
func startReportNode(t *testing.T, cfg config.Config) (n *node.Node, stop func()) {
	t.Helper()
	n, err := launch.New(cfg, launch.Options{Options: node.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("node run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("node did not stop within a minute")
		}
	}
	t.Cleanup(stop)
	return n, stop
}

// apiGet GETs path from the node at addr: its status code and body.
func apiGet(t *testing.T, addr, path string, v any) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, data)
		}
	}
	return resp.StatusCode
}

// runReport runs `phasecrawl report args... --json` and decodes its output.
func runReport(t *testing.T, args ...string) report.Report {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := Run(append([]string{"report", "--json"}, args...), nil, &out, &errOut); code != 0 {
		t.Fatalf("report %v: exit %d: %s", args, code, errOut.String())
	}
	var rep report.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report %v: %v: %s", args, err, out.String())
	}
	return rep
}

// servedPages returns the page requests (robots.txt left out) the web
// served per host.
func servedPages(rep synthweb.Report) map[string]int64 {
	out := map[string]int64{}
	for h, hr := range rep.Hosts {
		if p := int64(hr.Requests - hr.RobotsFetches); p > 0 {
			out[h] = p
		}
	}
	return out
}

func sumCounts(cs []report.Count) (pages, nbytes int64) {
	for _, c := range cs {
		pages, nbytes = pages+c.Pages, nbytes+c.Bytes
	}
	return pages, nbytes
}

// TestReportNode crawls a small synthetic web (with a per-host cap and a
// depth limit that refuse URLs) with one node, then checks GET /v1/hosts
// and the MIME-type, status-code and rate reports against what the web
// served and the node's status; `report --node` against the API; and, once
// the node stopped, `report --data` on its data directory, and the same
// figures again from a node restarted on it.
func TestReportNode(t *testing.T) {
	srv := reportWeb(t, 12, 400, false)
	cfg := srv.NodeConfig("report", t.TempDir(), time.Millisecond)
	cfg.Workers = 8
	cfg.Scope.MaxPagesPerHost = 20
	cfg.Scope.MaxDepth = 6
	n, stop := startReportNode(t, cfg)
	addr := n.Addr().String()
	wait.For(t, 2*time.Minute, "crawl done", func() bool { return n.Status().Done })
	st := n.Status()

	var hr api.HostsReport
	if code := apiGet(t, addr, "/v1/hosts?sort=requests&n=1000", &hr); code != http.StatusOK || hr.Sort != "requests" {
		t.Fatalf("GET /v1/hosts: %d, sort %q", code, hr.Sort)
	}
	served := servedPages(srv.Web.Report())
	var pages, nbytes, capRefused, depthRefused int64
	got := map[string]int64{}
	for i, h := range hr.Hosts {
		if i > 0 && h.Requests > hr.Hosts[i-1].Requests {
			t.Errorf("hosts not sorted by requests: %s %d after %d", h.Host, h.Requests, hr.Hosts[i-1].Requests)
		}
		got[h.Host] = h.Pages
		pages, nbytes = pages+h.Pages, nbytes+h.Bytes
		capRefused += h.RefusedByReason["cap"]
		depthRefused += h.RefusedByReason["depth"]
		if h.Queued != 0 {
			t.Errorf("%s: %d queued after the crawl", h.Host, h.Queued)
		}
		if h.Requests < h.Pages || h.FirstFetch == nil || h.LastFetch == nil || h.LastFetch.Before(*h.FirstFetch) {
			t.Errorf("%s: %+v", h.Host, h)
		}
	}
	if !reflect.DeepEqual(got, served) {
		t.Errorf("pages per host %v, the web served %v", got, served)
	}
	if pages != st.PagesFetched || nbytes != st.BytesFetched {
		t.Errorf("hosts add up to %d pages, %d bytes; status says %d, %d", pages, nbytes, st.PagesFetched, st.BytesFetched)
	}
	if skipped := n.Frontier().Skipped(); capRefused == 0 || capRefused > skipped {
		t.Errorf("cap refusals %d, the frontier refused %d over the cap", capRefused, skipped)
	}
	if depthRefused == 0 {
		t.Errorf("no depth refusal with scope.max_depth=%d", cfg.Scope.MaxDepth)
	}

	var top api.HostsReport
	if apiGet(t, addr, "/v1/hosts?sort=bytes&n=3", &top); len(top.Hosts) != 3 || top.Hosts[0].Bytes < top.Hosts[1].Bytes || top.Hosts[1].Bytes < top.Hosts[2].Bytes {
		t.Errorf("sort=bytes&n=3: %+v", top.Hosts)
	}
	for _, q := range []string{"sort=pages", "n=0", "n=x", "sort=queued&n=100001"} {
		if code := apiGet(t, addr, "/v1/hosts?"+q, nil); code != http.StatusBadRequest {
			t.Errorf("GET /v1/hosts?%s: %d, want 400", q, code)
		}
	}
	var mimes, codes api.CountsReport
	apiGet(t, addr, "/v1/reports/mimetypes", &mimes)
	apiGet(t, addr, "/v1/reports/statuscodes", &codes)
	if p, b := sumCounts(mimes.Rows); p != st.PagesFetched || b != st.BytesFetched || len(mimes.Rows) == 0 || mimes.Rows[0].Key != "text/html" {
		t.Errorf("MIME types %+v add up to %d pages, %d bytes; status %d, %d", mimes.Rows, p, b, st.PagesFetched, st.BytesFetched)
	}
	if p, _ := sumCounts(codes.Rows); p != st.PagesFetched || len(codes.Rows) == 0 || codes.Rows[0].Key != "200" {
		t.Errorf("status codes %+v add up to %d pages; status %d", codes.Rows, p, st.PagesFetched)
	}
	var rate report.Samples
	apiGet(t, addr, "/v1/reports/rate", &rate)
	var inRing int64
	for _, p := range rate.Pages {
		inRing += p
	}
	if len(rate.Pages) != report.RateSlots || inRing != st.PagesFetched || rate.IntervalS != 10 {
		t.Errorf("rate: %d slots of %gs, %d pages in them; status %d pages", len(rate.Pages), rate.IntervalS, inRing, st.PagesFetched)
	}

	t.Logf("%d hosts, %d pages, %d bytes, refused %d over the cap and %d by depth", len(hr.Hosts), pages, nbytes, capRefused, depthRefused)

	// report --node: the node alone is its cluster.
	byNode := runReport(t, "--node", addr, "--sort", "requests", "--n", "0")
	if !reflect.DeepEqual(byNode.Hosts, hr.Hosts) || !reflect.DeepEqual(byNode.MIMETypes, mimes.Rows) || !reflect.DeepEqual(byNode.StatusCodes, codes.Rows) {
		t.Errorf("report --node differs from the API:\n%+v\n%+v", byNode.Hosts, hr.Hosts)
	}

	// report --data on the stopped node: the same figures, read from its files.
	stop()
	byData := runReport(t, "--data", cfg.Data, "--sort", "requests", "--n", "0")
	if !reflect.DeepEqual(byData.Hosts, hr.Hosts) || !reflect.DeepEqual(byData.MIMETypes, mimes.Rows) || !reflect.DeepEqual(byData.StatusCodes, codes.Rows) {
		t.Errorf("report --data differs from the API:\n%+v\n%+v", byData.Hosts, hr.Hosts)
	}
	var text bytes.Buffer
	if code := Run([]string{"report", "--data", cfg.Data, "--sort", "errors", "--n", "2"}, nil, &text, io.Discard); code != 0 ||
		!strings.Contains(text.String(), "== hosts (2)") || !strings.Contains(text.String(), "text/html") {
		t.Errorf("text report (exit %d):\n%s", code, text.String())
	}

	// A node restarted on the directory reads its crawl log and refusals again.
	cfg.Seeds = nil
	n2, stop2 := startReportNode(t, cfg)
	defer stop2()
	var again api.HostsReport
	wait.For(t, 30*time.Second, "restarted node's hosts report", func() bool {
		apiGet(t, n2.Addr().String(), "/v1/hosts?sort=requests&n=1000", &again)
		return reflect.DeepEqual(again.Hosts, hr.Hosts)
	})
}

// TestReportArgs: report refuses bad flags.
func TestReportArgs(t *testing.T) {
	for _, args := range [][]string{
		{"report"},
		{"report", "--data", "x", "--node", "y"},
		{"report", "--data", t.TempDir(), "--sort", "pages"},
		{"report", "--data", t.TempDir(), "--n", "-1"},
		{"report", "--data", t.TempDir()}, // no frontier there
		{"report", "--node", "127.0.0.1:1"},
	} {
		var errOut bytes.Buffer
		if code := Run(args, nil, io.Discard, &errOut); code != 1 || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, %q", args, code, errOut.String())
		}
	}
}

// TestReportCluster crawls a small synthetic web with two members in this
// process; `report --node` on one of them gathers both: every host the web
// served appears once, with the pages the web served it.
func TestReportCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster in -short mode")
	}
	srv := reportWeb(t, 8, 200, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dn, err := startDemoCluster(ctx, srv, t.TempDir(), 2*time.Millisecond, 8, 2, time.Second, false, log, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, len(dn))
	for _, d := range dn {
		go func() { errc <- d.n.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range dn {
			if err := <-errc; err != nil {
				t.Errorf("node run: %v", err)
			}
		}
	}()
	if err := waitDemoCluster(ctx, dn, time.Minute); err != nil {
		t.Fatal(err)
	}
	var seeds bytes.Buffer
	if code := Run(append([]string{"seed", "--node", dn[0].n.Addr().String()}, srv.Web.Seeds()...), nil, &seeds, &seeds); code != 0 {
		t.Fatalf("seed: exit %d: %s", code, seeds.String())
	}
	wait.For(t, 2*time.Minute, "cluster crawl done", func() bool {
		st := demoStatus(dn)
		return st.Done && st.PagesFetched > 0
	})
	st := demoStatus(dn)
	rep := runReport(t, "--node", dn[1].n.Addr().String(), "--n", "0")
	served := servedPages(srv.Web.Report())
	got := map[string]int64{}
	var pages int64
	for _, h := range rep.Hosts {
		if _, dup := got[h.Host]; dup {
			t.Errorf("host %s listed twice", h.Host)
		}
		got[h.Host] = h.Pages
		pages += h.Pages
	}
	if !reflect.DeepEqual(got, served) {
		t.Errorf("pages per host %v, the web served %v", got, served)
	}
	if p, _ := sumCounts(rep.StatusCodes); pages != st.PagesFetched || p != pages {
		t.Errorf("hosts add up to %d pages, status codes to %d; the members fetched %d", pages, p, st.PagesFetched)
	}
	for _, d := range dn {
		if d.n.Status().PagesFetched == 0 {
			t.Errorf("%s fetched nothing: the report gathered one member only", d.name)
		}
	}
	t.Logf("%d hosts, %d pages from %d members", len(rep.Hosts), pages, len(dn))
}
