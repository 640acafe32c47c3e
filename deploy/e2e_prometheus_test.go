package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// promClient asks a Prometheus server's HTTP API.
type promClient struct{ base string }

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
	Values [][2]any          `json:"values"`
}

func (p promClient) query(ctx context.Context, q string, at time.Time) ([]promSample, string, error) {
	v := url.Values{"query": {q}}
	if !at.IsZero() {
		v.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	var res struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(ctx, p.base+"/api/v1/query?"+v.Encode(), &res); err != nil {
		return nil, "", fmt.Errorf("query %s: %w", q, err)
	}
	if res.Status != "success" {
		return nil, "", fmt.Errorf("query %s: %s", q, res.Error)
	}
	return res.Data.Result, res.Data.ResultType, nil
}

// byInstance runs an instant query and returns each series' value by its
// instance label.
func (p promClient) byInstance(ctx context.Context, q string, at time.Time) (map[string]float64, error) {
	res, _, err := p.query(ctx, q, at)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range res {
		v, err := sampleValue(s.Value)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", q, err)
		}
		out[s.Metric["instance"]] = v
	}
	return out, nil
}

func sampleValue(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v[1])
	}
	return strconv.ParseFloat(s, 64)
}

func sampleTime(v [2]any) (time.Time, error) {
	f, ok := v[0].(float64)
	if !ok {
		return time.Time{}, fmt.Errorf("sample time %v is not a number", v[0])
	}
	return time.Unix(0, int64(math.Round(f*1000))*int64(time.Millisecond)), nil
}

// fakePodTargets writes the file_sd targets that Kubernetes service
// discovery (role pod) would produce for the StatefulSet's pods, one group
// per declared container port, with the pod IP 127.0.0.1 and each pod's
// prometheus.io/port annotation and api port set to its node's loopback
// port. A pod of another application is added as a decoy.
func fakePodTargets(t *testing.T, m k8sManifests, apiPorts []int, path string) {
	t.Helper()
	sanitize := func(s string) string { return regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(s, "_") }
	c := m.container(t)
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	var groups []group
	pod := func(name string, podLabels, annotations map[string]string, apiPort int) {
		for _, p := range c.Ports {
			port := int(p.ContainerPort)
			if p.Name == "api" {
				port = apiPort
			}
			l := map[string]string{
				"__meta_kubernetes_namespace":                   "crawl",
				"__meta_kubernetes_pod_name":                    name,
				"__meta_kubernetes_pod_ip":                      "127.0.0.1",
				"__meta_kubernetes_pod_ready":                   "true",
				"__meta_kubernetes_pod_container_name":          c.Name,
				"__meta_kubernetes_pod_container_port_name":     p.Name,
				"__meta_kubernetes_pod_container_port_number":   strconv.Itoa(port),
				"__meta_kubernetes_pod_container_port_protocol": string(p.Protocol),
				"__meta_kubernetes_pod_controller_kind":         "StatefulSet",
				"__meta_kubernetes_pod_controller_name":         m.sts.Name,
			}
			for k, v := range podLabels {
				l["__meta_kubernetes_pod_label_"+sanitize(k)] = v
				l["__meta_kubernetes_pod_labelpresent_"+sanitize(k)] = "true"
			}
			for k, v := range annotations {
				if k == "prometheus.io/port" {
					v = strconv.Itoa(apiPort)
				}
				l["__meta_kubernetes_pod_annotation_"+sanitize(k)] = v
				l["__meta_kubernetes_pod_annotationpresent_"+sanitize(k)] = "true"
			}
			groups = append(groups, group{Targets: []string{fmt.Sprintf("127.0.0.1:%d", port)}, Labels: l})
		}
	}
	tmpl := m.sts.Spec.Template
	for i, p := range apiPorts {
		pod(fmt.Sprintf("%s-%d", m.sts.Name, i), tmpl.Labels, tmpl.Annotations, p)
	}
	pod("other-app-0", map[string]string{"app.kubernetes.io/name": "other"}, tmpl.Annotations, freePort(t, false))
	data, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// statusPoll is one GET /v1/status of a node: its pages_fetched was read
// between start and end.
type statusPoll struct {
	start, end time.Time
	pages      int64
}

// TestPrometheusScrapesCluster runs a three-node cluster of the real binary
// on loopback against the synthetic web, scraped every second by a real
// Prometheus server with deploy/prometheus/prometheus-kubernetes.yml (the
// pods' discovery faked from deploy/k8s/statefulset.yaml) and
// deploy/prometheus/rules.yml, and checks what Prometheus reports against
// the nodes' own /v1/status.
func TestPrometheusScrapesCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster and a Prometheus server")
	}
	promBin := requireTool(t, "prometheus", "the end-to-end scrape test needs a Prometheus server (Debian package prometheus)")
	bin := phasecrawlBinary(t)
	m := loadK8s(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.TrapHosts = 40, 1200, 0
	// A short crawl (what is measured here is the scraping): no slow hosts,
	// no Crawl-delay, sites of even size (no long tail on one big site); a
	// 100 ms delay makes it last the few seconds a rate needs.
	wc.SlowHosts, wc.CrawlDelayHosts, wc.ZipfS = 0, 0, 0
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := webnode.Start(web)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	exp := web.Expected(srv.Scope(config.Default().UserAgent))

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const nodes = 3
	type node struct {
		name string
		api  string
		p    *proc
	}
	var ns []*node
	var apiPorts []int
	gossip0 := ""
	for i := range nodes {
		apiPort, gossipPort, xPort := freePort(t, false), freePort(t, true), freePort(t, false)
		n := &node{name: fmt.Sprintf("%s-%d", m.sts.Name, i), api: fmt.Sprintf("127.0.0.1:%d", apiPort)}
		args := []string{"run", "--name", n.name, "--data", filepath.Join(dir, n.name), "--http", n.api,
			"--gossip", fmt.Sprintf("127.0.0.1:%d", gossipPort), "--exchange", fmt.Sprintf("127.0.0.1:%d", xPort),
			"--cluster-key-file", keyFile, "--phase-duration", "1s",
			"--resolve", web.ResolvePattern() + "=" + srv.Addr, "--allow-private", "--allow-domain", wc.Domain,
			"--max-pages-per-host", strconv.Itoa(webnode.MaxPagesPerHost), "--delay", "100ms", "--log-format", "json"}
		if i == 0 {
			gossip0 = fmt.Sprintf("127.0.0.1:%d", gossipPort)
		} else {
			args = append(args, "--join", gossip0)
		}
		// Faster retries than the default minute: nothing fails here, but a
		// stall must not outlast the test.
		n.p = startProc(t, n.name, bin, []string{"PHASECRAWL_FETCH_RETRY_BACKOFF=1s", "PHASECRAWL_SHUTDOWN_TIMEOUT=10s"}, args...)
		// Like podManagementPolicy OrderedReady: the next node starts once this one is ready.
		wait.For(t, 30*time.Second, n.name+" ready", func() (bool, string) {
			if n.p.exited() {
				t.Fatalf("%s exited: %v\n%s", n.name, n.p.err, n.p.out.String())
			}
			code, body, err := getStatus(ctx, "http://"+n.api+"/readyz")
			return err == nil && code == 200, fmt.Sprintf("%d %v %s", code, err, body)
		})
		ns = append(ns, n)
		apiPorts = append(apiPorts, apiPort)
	}
	wait.For(t, 60*time.Second, "cluster of 3 formed", func() (bool, string) {
		var state []string
		ok := true
		for _, n := range ns {
			var st nodeStatus
			if err := getJSON(ctx, "http://"+n.api+"/v1/status", &st); err != nil {
				return false, err.Error()
			}
			members, err := metricValue(ctx, n.api, "phasecrawl_cluster_members")
			if err != nil {
				return false, err.Error()
			}
			state = append(state, fmt.Sprintf("%s: members metric %v, status members %d alive, nphase %d", n.name, members, st.aliveMembers(), st.Phase.NPhase))
			if members != nodes || st.Phase.NPhase < nodes || (len(st.Members) > 0 && st.aliveMembers() != nodes) {
				ok = false
			}
		}
		return ok, strings.Join(state, "; ")
	})

	// Prometheus: the Kubernetes configuration, discovery from files.
	targets := filepath.Join(dir, "targets.json")
	fakePodTargets(t, m, apiPorts, targets)
	cfgPath := writeKubernetesConfigForFileSD(t, dir, targets, time.Second)
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	prom := promClient{base: "http://" + promAddr}
	pp := startProc(t, "prometheus", promBin, nil, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn", "--storage.tsdb.retention.time=1h")
	wait.For(t, 60*time.Second, "prometheus ready", func() (bool, string) {
		if pp.exited() {
			t.Fatalf("prometheus exited: %v\n%s", pp.err, pp.out.String())
		}
		code, body, err := getStatus(ctx, prom.base+"/-/ready")
		return err == nil && code == 200, fmt.Sprintf("%d %v %.200s", code, err, body)
	})
	wait.For(t, 30*time.Second, "prometheus scrapes exactly the three pods' APIs", func() (bool, string) {
		var res struct {
			Data struct {
				ActiveTargets []struct {
					Labels    map[string]string `json:"labels"`
					ScrapeURL string            `json:"scrapeUrl"`
					Health    string            `json:"health"`
					LastError string            `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := getJSON(ctx, prom.base+"/api/v1/targets?state=active", &res); err != nil {
			return false, err.Error()
		}
		var got []string
		for _, tg := range res.Data.ActiveTargets {
			got = append(got, fmt.Sprintf("%s %s %s %s %s", tg.Labels["job"], tg.Labels["instance"], tg.Labels["namespace"], tg.ScrapeURL, tg.Health))
		}
		sort.Strings(got)
		var want []string
		for _, n := range ns {
			want = append(want, fmt.Sprintf("phasecrawl %s crawl http://%s/metrics up", n.name, n.api))
		}
		return strings.Join(got, "\n") == strings.Join(want, "\n"), fmt.Sprintf("targets %q, want %q", got, want)
	})

	// Crawl, polling every node's status.
	if _, err := postSeeds(ctx, ns[0].api, web.Seeds(), ""); err != nil {
		t.Fatal(err)
	}
	seeded := time.Now()
	polls := map[string][]statusPoll{}
	var finished time.Time // when the polls began to see the crawl done
	wait.Steady(t, 2*time.Minute-time.Since(seeded), 200*time.Millisecond, "crawl done after the seeds", func() (bool, string) {
		all := true
		var state []string
		for _, n := range ns {
			var st nodeStatus
			start := time.Now()
			if err := getJSON(ctx, "http://"+n.api+"/v1/status", &st); err != nil {
				t.Fatal(err)
			}
			polls[n.name] = append(polls[n.name], statusPoll{start: start, end: time.Now(), pages: st.PagesFetched})
			if !st.Done || st.outboxLen() > 0 {
				all = false
			}
			state = append(state, fmt.Sprintf("%s: %+v", n.name, st))
		}
		switch {
		case !all:
			finished = time.Time{}
		case finished.IsZero():
			finished = time.Now()
		}
		return all, strings.Join(state, "; ")
	})
	final := map[string]nodeStatus{}
	var total int64
	for _, n := range ns {
		var st nodeStatus
		if err := getJSON(ctx, "http://"+n.api+"/v1/status", &st); err != nil {
			t.Fatal(err)
		}
		final[n.name] = st
		total += st.PagesFetched
	}
	crawl := finished.Sub(seeded)
	t.Logf("crawl: %d pages (expected %d) in %s", total, exp.Fetches, crawl.Round(time.Millisecond))
	if total != int64(exp.Fetches) {
		t.Errorf("the cluster fetched %d pages, the synthetic web expects %d", total, exp.Fetches)
	}

	t.Run("counters match /v1/status", func(t *testing.T) {
		wait.For(t, 15*time.Second, "Prometheus' last pages_fetched_total equals /v1/status", func() (bool, string) {
			got, err := prom.byInstance(ctx, `sum by (instance) (phasecrawl_pages_fetched_total{job="phasecrawl"})`, time.Time{})
			if err != nil {
				return false, err.Error()
			}
			ok := len(got) == nodes
			for _, n := range ns {
				if got[n.name] != float64(final[n.name].PagesFetched) {
					ok = false
				}
			}
			return ok, fmt.Sprintf("prometheus %v, status %v", got, final)
		})
	})

	// Each scrape started at its timestamp and read the counter within its
	// scrape_duration_seconds: a status poll that ended before the scrape
	// started saw no more pages, one that started after the scrape ended saw
	// no fewer.
	t.Run("every scrape lies between the status polls around it", func(t *testing.T) {
		rangeOf := func(q string) map[time.Time]float64 {
			res, typ, err := prom.query(ctx, q, time.Time{})
			if err != nil || typ != "matrix" {
				t.Fatalf("%s: %v (%s)", q, err, typ)
			}
			out := map[time.Time]float64{}
			for _, s := range res {
				for _, v := range s.Values {
					ts, err := sampleTime(v)
					if err != nil {
						t.Fatal(err)
					}
					f, err := sampleValue(v)
					if err != nil {
						t.Fatal(err)
					}
					out[ts] += f // summed over codes: a code's series appears with its first page, 0 before
				}
			}
			return out
		}
		for _, n := range ns {
			pages := rangeOf(fmt.Sprintf(`phasecrawl_pages_fetched_total{job="phasecrawl",instance=%q}[10m]`, n.name))
			durs := rangeOf(fmt.Sprintf(`scrape_duration_seconds{job="phasecrawl",instance=%q}[10m]`, n.name))
			checked := 0
			for ts, v := range pages {
				dur, ok := durs[ts]
				if !ok {
					t.Fatalf("%s: no scrape_duration_seconds at %s", n.name, ts.Format(time.StampMilli))
				}
				readBy := ts.Add(time.Duration(dur*float64(time.Second)) + 10*time.Millisecond) // + the ms rounding of timestamps
				lo, hi := int64(-1), int64(math.MaxInt64)
				for _, p := range polls[n.name] {
					if !p.end.After(ts) && p.pages > lo {
						lo = p.pages
					}
					if p.start.After(readBy) && p.pages < hi {
						hi = p.pages
					}
				}
				if lo < 0 || hi == math.MaxInt64 {
					continue // before the first or after the last poll
				}
				checked++
				if v < float64(lo) || v > float64(hi) {
					t.Errorf("%s: scrape at %s says %v pages; /v1/status said %d before and %d after", n.name, ts.Format(time.StampMilli), v, lo, hi)
				}
			}
			if checked < 3 {
				t.Errorf("%s: only %d scrapes during the crawl to check", n.name, checked)
			}
		}
	})

	// The throughput Prometheus computes over a window of the crawl against
	// the pages /v1/status counted in it. increase() sees the samples inside
	// the window (one a second) and extrapolates to its edges by at most
	// 1.1 intervals, so it can only be off by the pages fetched near either
	// edge (2s each side allows for late scrapes on a loaded machine); a
	// code's series born inside the window loses its first sample: allow 10
	// pages for those.
	t.Run("throughput matches /v1/status", func(t *testing.T) {
		w := min(10*time.Second, (crawl / 2).Truncate(time.Second))
		if w < 2*time.Second {
			t.Fatalf("crawl took %s: too short to measure a rate over whole seconds", crawl)
		}
		at := seeded.Add(crawl/2 + w/2).Truncate(time.Second)
		got, err := prom.byInstance(ctx, fmt.Sprintf(`sum by (instance) (increase(phasecrawl_pages_fetched_total{job="phasecrawl"}[%ds]))`, int(w/time.Second)), at)
		if err != nil {
			t.Fatal(err)
		}
		pagesAt := func(ps []statusPoll, ts time.Time) int64 {
			best := ps[0]
			for _, p := range ps {
				if p.end.Sub(ts).Abs() < best.end.Sub(ts).Abs() {
					best = p
				}
			}
			return best.pages
		}
		var sumGot, sumWant, sumTol float64
		for _, n := range ns {
			ps := polls[n.name]
			want := float64(pagesAt(ps, at) - pagesAt(ps, at.Add(-w)))
			edge := func(ts time.Time) float64 {
				return float64(pagesAt(ps, ts.Add(2*time.Second)) - pagesAt(ps, ts.Add(-2*time.Second)))
			}
			tol := edge(at.Add(-w)) + edge(at) + 10
			t.Logf("%s: increase over %s at %s: prometheus %.1f, status %v (tolerance ±%.0f)", n.name, w, at.Format(time.StampMilli), got[n.name], want, tol)
			if math.Abs(got[n.name]-want) > tol {
				t.Errorf("%s: Prometheus counts %.1f pages in %s, /v1/status %v (tolerance %.0f)", n.name, got[n.name], w, want, tol)
			}
			sumGot, sumWant, sumTol = sumGot+got[n.name], sumWant+want, sumTol+tol
		}
		if sumWant <= 0 {
			t.Errorf("no page fetched in the window: cannot compare throughput")
		}
		rate, _, err := prom.query(ctx, `phasecrawl_cluster:pages_fetched:rate1m{job="phasecrawl"}`, at)
		if err != nil || len(rate) != 1 {
			t.Fatalf("recording rule phasecrawl_cluster:pages_fetched:rate1m at %s: %v %v", at, rate, err)
		}
		if v, _ := sampleValue(rate[0].Value); v <= 0 {
			t.Errorf("phasecrawl_cluster:pages_fetched:rate1m = %v during the crawl", v)
		}
		t.Logf("cluster: prometheus %.1f pages in %s, status %.0f (tolerance %.0f)", sumGot, w, sumWant, sumTol)
	})

	t.Run("members match /v1/status", func(t *testing.T) {
		got, err := prom.byInstance(ctx, `phasecrawl_cluster_members{job="phasecrawl"}`, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			st := final[n.name]
			if got[n.name] != nodes {
				t.Errorf("%s: phasecrawl_cluster_members %v, want %d", n.name, got[n.name], nodes)
			}
			if len(st.Members) == 0 {
				t.Errorf("%s: /v1/status lists no members", n.name)
				continue
			}
			if float64(st.aliveMembers()) != got[n.name] {
				t.Errorf("%s: /v1/status lists %d alive members %+v, Prometheus %v", n.name, st.aliveMembers(), st.Members, got[n.name])
			}
		}
	})

	t.Run("rules load and evaluate", func(t *testing.T) {
		var res struct {
			Data struct {
				Groups []struct {
					Name  string `json:"name"`
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := getJSON(ctx, prom.base+"/api/v1/rules", &res); err != nil {
			t.Fatal(err)
		}
		rf := loadRules(t)
		want, got := 0, 0
		for _, g := range rf.Groups {
			want += len(g.Rules)
		}
		for _, g := range res.Data.Groups {
			for _, r := range g.Rules {
				got++
				if r.Health != "ok" {
					t.Errorf("rule %s/%s: health %q: %s", g.Name, r.Name, r.Health, r.LastError)
				}
			}
		}
		if got != want {
			t.Errorf("Prometheus loaded %d rules, rules.yml has %d", got, want)
		}
	})

	// Every dashboard query runs in the real server at a moment of the
	// crawl; those of panels that always have data during a crawl must
	// return some.
	t.Run("dashboard queries run", func(t *testing.T) {
		mayBeEmpty := map[string]string{
			"Fetch errors by kind": "the synthetic web answers every request",
			"Fetch error ratio":    "the synthetic web answers every request",
		}
		at := seeded.Add(crawl / 2).Truncate(time.Second)
		for _, p := range loadDashboard(t).Panels {
			for _, tg := range p.Targets {
				q := grafanaToPromQL(tg.Expr)
				res, _, err := prom.query(ctx, q, at)
				if err != nil {
					t.Errorf("panel %q: %v", p.Title, err)
					continue
				}
				if len(res) == 0 && mayBeEmpty[p.Title] == "" {
					t.Errorf("panel %q: query %s returned nothing during the crawl", p.Title, q)
				}
			}
		}
	})

	// Stop the nodes one after the other, as a rolling shutdown does: each
	// hands its records to the others and leaves the cluster.
	for _, n := range ns {
		start := time.Now()
		if err := n.p.stop(40 * time.Second); err != nil {
			out := n.p.out.String()
			t.Errorf("%s: exit after SIGTERM: %v\n%s", n.name, err, out[max(0, len(out)-4000):])
		}
		if !strings.Contains(n.p.out.String(), `"msg":"node stopped"`) {
			t.Errorf("%s: no \"node stopped\" record in its log", n.name)
		}
		t.Logf("%s stopped in %s", n.name, time.Since(start).Round(time.Millisecond))
	}
}
