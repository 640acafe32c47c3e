package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// ruleFile is deploy/prometheus/rules.yml.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTestFile is deploy/prometheus/rules_test.yml (the parts checked here).
type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			AlertName string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromQLExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

func promDir(t testing.TB) string { return filepath.Join(repoRoot(t), "deploy", "prometheus") }

func decodeYAMLFile(t testing.TB, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadRules(t testing.TB) ruleFile {
	t.Helper()
	var rf ruleFile
	decodeYAMLFile(t, filepath.Join(promDir(t), "rules.yml"), &rf)
	return rf
}

// metricNames returns the phasecrawl series names (and recording rule
// names) an expression refers to.
func metricNames(expr string) []string {
	var out []string
	expr = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(expr, `""`) // label values are not names
	for _, m := range regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`).FindAllString(expr, -1) {
		if strings.HasPrefix(m, "phasecrawl") && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// definedMetrics collects the "phasecrawl_..." string literals of the
// module's non-test Go files: the names the binary can export.
func definedMetrics(t testing.TB) map[string]bool {
	t.Helper()
	root := repoRoot(t)
	names := map[string]bool{}
	re := regexp.MustCompile(`"(phasecrawl_[a-z0-9_]+)"`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "deploy" || strings.HasPrefix(d.Name(), "phasecrawl-data")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(data, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan Go sources: %v", err)
	}
	return names
}

// checkMetricRefs reports names in expr that are neither defined by the
// code nor recorded by rules.yml.
func checkMetricRefs(t *testing.T, where, expr string, defined, recorded map[string]bool) {
	t.Helper()
	for _, n := range metricNames(expr) {
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suf); ok && defined[b] {
				base = b
			}
		}
		if !defined[base] && !recorded[n] {
			t.Errorf("%s refers to %s, which no Go source defines and no rule records", where, n)
		}
	}
}

// TestPromtool has promtool check both Prometheus configurations and the
// rules, and run the rules' unit tests.
func TestPromtool(t *testing.T) {
	promtool := requireTool(t, "promtool", "checks deploy/prometheus (Debian package prometheus)")
	dir := promDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{
		{"check", "rules", "rules.yml"},
		{"test", "rules", "rules_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		if out, err := run(args...); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// The Kubernetes configuration: as it is where promtool has Kubernetes
	// service discovery; Debian builds it without, so there the discovery is
	// swapped for files (the relabelling, rule files and the rest are still
	// checked, and TestPrometheusScrapesCluster runs them in a real server)
	// and the kubernetes_sd_configs block is decoded strictly below.
	out, err := run("check", "config", "prometheus-kubernetes.yml")
	if err != nil && strings.Contains(out, "field kubernetes_sd_configs not found") {
		tmp := t.TempDir()
		cfgPath := writeKubernetesConfigForFileSD(t, tmp, filepath.Join(tmp, "targets.json"), 0)
		if err := os.WriteFile(filepath.Join(tmp, "targets.json"), []byte("[]"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err = run("check", "config", cfgPath)
		t.Logf("this promtool has no Kubernetes service discovery: checked prometheus-kubernetes.yml with file_sd_configs in its place")
	}
	if err != nil {
		t.Errorf("promtool check config prometheus-kubernetes.yml: %v\n%s", err, out)
	}
}

// kubernetesSD mirrors Prometheus' kubernetes_sd_config; decoding is strict.
type kubernetesSD struct {
	Role       string `yaml:"role"`
	APIServer  string `yaml:"api_server"`
	Kubeconfig string `yaml:"kubeconfig_file"`
	Namespaces *struct {
		Names        []string `yaml:"names"`
		OwnNamespace bool     `yaml:"own_namespace"`
	} `yaml:"namespaces"`
	Selectors []struct {
		Role  string `yaml:"role"`
		Label string `yaml:"label"`
		Field string `yaml:"field"`
	} `yaml:"selectors"`
	AttachMetadata *struct {
		Node bool `yaml:"node"`
	} `yaml:"attach_metadata"`
}

// relabelConfig is one Prometheus relabel_config.
type relabelConfig struct {
	SourceLabels []string `yaml:"source_labels"`
	Separator    string   `yaml:"separator"`
	Regex        string   `yaml:"regex"`
	Modulus      int      `yaml:"modulus"`
	TargetLabel  string   `yaml:"target_label"`
	Replacement  string   `yaml:"replacement"`
	Action       string   `yaml:"action"`
}

// TestPrometheusConfigs checks what promtool cannot: the job name the alerts
// select, the Kubernetes discovery block (strictly), and that the relabelling
// only reads meta labels the pod role provides.
func TestPrometheusConfigs(t *testing.T) {
	dir := promDir(t)
	for _, file := range []string{"prometheus.yml", "prometheus-kubernetes.yml"} {
		var cfg struct {
			RuleFiles     []string `yaml:"rule_files"`
			ScrapeConfigs []struct {
				JobName             string           `yaml:"job_name"`
				MetricsPath         string           `yaml:"metrics_path"`
				KubernetesSDConfigs []yaml.Node      `yaml:"kubernetes_sd_configs"`
				StaticConfigs       []map[string]any `yaml:"static_configs"`
				RelabelConfigs      []relabelConfig  `yaml:"relabel_configs"`
			} `yaml:"scrape_configs"`
			Global map[string]any `yaml:"global"`
		}
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !slices.Equal(cfg.RuleFiles, []string{"rules.yml"}) {
			t.Errorf("%s: rule_files %v, want [rules.yml]", file, cfg.RuleFiles)
		}
		if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].JobName != "phasecrawl" {
			t.Fatalf("%s: want one scrape job named phasecrawl (the alerts select job=\"phasecrawl\")", file)
		}
		sc := cfg.ScrapeConfigs[0]
		if file == "prometheus.yml" {
			if len(sc.StaticConfigs) == 0 {
				t.Errorf("%s: no static_configs", file)
			}
			continue
		}
		if len(sc.KubernetesSDConfigs) != 1 {
			t.Fatalf("%s: want one kubernetes_sd_configs entry", file)
		}
		var sd kubernetesSD
		b, _ := yaml.Marshal(&sc.KubernetesSDConfigs[0])
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&sd); err != nil {
			t.Fatalf("%s: kubernetes_sd_configs: %v", file, err)
		}
		if sd.Role != "pod" {
			t.Errorf("%s: role %q, want pod (pods that are not ready must be scraped too)", file, sd.Role)
		}
		for i, rc := range sc.RelabelConfigs {
			for _, l := range rc.SourceLabels {
				if strings.HasPrefix(l, "__meta_") && !strings.HasPrefix(l, "__meta_kubernetes_pod_") && l != "__meta_kubernetes_namespace" {
					t.Errorf("%s: relabel_configs[%d] reads %s, which role pod does not set", file, i, l)
				}
			}
			if _, err := regexp.Compile("^(?:" + rc.Regex + ")$"); err != nil {
				t.Errorf("%s: relabel_configs[%d] regex %q: %v", file, i, rc.Regex, err)
			}
		}
	}
}

// writeKubernetesConfigForFileSD writes prometheus-kubernetes.yml into dir
// with kubernetes_sd_configs replaced by file_sd_configs reading targets,
// rule_files made absolute and, when interval > 0, the scrape and
// evaluation intervals set to it. It returns the file's path.
func writeKubernetesConfigForFileSD(t testing.TB, dir, targets string, interval time.Duration) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(promDir(t), "prometheus-kubernetes.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["rule_files"] = []string{filepath.Join(promDir(t), "rules.yml")}
	if interval > 0 {
		g, _ := cfg["global"].(map[string]any)
		g["scrape_interval"], g["evaluation_interval"] = interval.String(), interval.String()
	}
	scs, _ := cfg["scrape_configs"].([]any)
	if len(scs) != 1 {
		t.Fatalf("prometheus-kubernetes.yml: want one scrape config, have %d", len(scs))
	}
	sc := scs[0].(map[string]any)
	if _, ok := sc["kubernetes_sd_configs"]; !ok {
		t.Fatal("prometheus-kubernetes.yml: no kubernetes_sd_configs")
	}
	delete(sc, "kubernetes_sd_configs")
	sc["file_sd_configs"] = []any{map[string]any{"files": []string{targets}, "refresh_interval": "1s"}}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "prometheus-kubernetes-filesd.yml")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRulesAndDashboardReferences checks that every alert is documented,
// labelled and unit-tested both firing and quiet, and that the rules and
// the dashboard only use series the binary defines or the rules record.
func TestRulesAndDashboardReferences(t *testing.T) {
	rf := loadRules(t)
	var tf ruleTestFile
	data, err := os.ReadFile(filepath.Join(promDir(t), "rules_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &tf); err != nil {
		t.Fatalf("rules_test.yml: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	alertsDoc := string(doc)
	defined := definedMetrics(t)
	recorded := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	tested := map[string]bool{}
	for _, tc := range tf.Tests {
		for _, e := range tc.PromQLExprTest {
			for _, n := range metricNames(e.Expr) {
				tested[n] = true
			}
		}
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			where := "rule " + r.Record + r.Alert
			checkMetricRefs(t, where, r.Expr, defined, recorded)
			if r.Record != "" {
				if !strings.Contains(r.Record, ":") {
					t.Errorf("recording rule %s: name it level:metric:operations", r.Record)
				}
				continue
			}
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: rules_test.yml must have a case where it fires (%v) and one where it stays quiet (%v)", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, s)
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[k] == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, k)
				}
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v (every alert waits before firing)", r.Alert, r.For, err)
			}
			if !strings.Contains(alertsDoc, "\n## "+r.Alert+"\n") {
				t.Errorf("alert %s has no \"## %s\" entry in docs/alerts.md", r.Alert, r.Alert)
			}
			if want := "docs/alerts.md"; !strings.Contains(r.Annotations["runbook_url"], want) {
				t.Errorf("alert %s: runbook_url %q does not point at %s", r.Alert, r.Annotations["runbook_url"], want)
			}
		}
	}
	for _, want := range []string{"NodeDown", "NoProgress", "NTPOffsetNearGuard", "OutboxGrowing", "FetchErrorRateHigh", "FrontierNotDraining", "PhaseSwapsStopped"} {
		if !slices.Contains(alerts, "Phasecrawl"+want) {
			t.Errorf("no alert Phasecrawl%s", want)
		}
	}
	for r := range recorded {
		if !tested[r] && !usedByAlert(rf, r) {
			t.Errorf("recording rule %s is neither unit-tested nor used by an alert", r)
		}
	}

	d := loadDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			checkMetricRefs(t, fmt.Sprintf("dashboard panel %q", p.Title), tg.Expr, defined, recorded)
		}
	}
}

func usedByAlert(rf ruleFile, name string) bool {
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && slices.Contains(metricNames(r.Expr), name) {
				return true
			}
		}
	}
	return false
}

// dashboard is the part of the Grafana dashboard JSON the tests read.
type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashPanel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource map[string]any           `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

func loadDashboard(t testing.TB) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(promDir(t), "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	return d
}

// grafanaToPromQL replaces the dashboard's variables by what Grafana would
// send for "all nodes of job phasecrawl".
func grafanaToPromQL(expr string) string {
	return strings.NewReplacer(`$__rate_interval`, "1m", `$__interval`, "15s", `$job`, "phasecrawl", `$instance`, ".*").Replace(expr)
}

// TestGrafanaDashboard checks the dashboard's structure: variables, unique
// ids, a non-overlapping grid, every query filtered by $job and $instance,
// and a panel for each thing an operator watches.
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 30 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Equal(vars, []string{"datasource", "job", "instance"}) {
		t.Errorf("template variables %v, want [datasource job instance]", vars)
	}
	ids := map[int]bool{}
	type rect struct{ x0, y0, x1, y1 int }
	var rects []rect
	var rects4 []string
	covered := map[string]bool{}
	selRe := regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		r := rect{g.X, g.Y, g.X + g.W, g.Y + g.H}
		for i, o := range rects {
			if r.x0 < o.x1 && o.x0 < r.x1 && r.y0 < o.y1 && o.y0 < r.y1 {
				t.Errorf("panel %q overlaps panel %q", p.Title, rects4[i])
			}
		}
		rects, rects4 = append(rects, r), append(rects4, p.Title)
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d: title %q, %d queries", p.ID, p.Title, len(p.Targets))
		}
		if p.Datasource["uid"] != "${datasource}" {
			t.Errorf("panel %q: datasource %v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] || strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: query %q with refId %q", p.Title, tg.Expr, tg.RefID)
			}
			refs[tg.RefID] = true
			for _, m := range selRe.FindAllStringSubmatch(tg.Expr, -1) {
				if !strings.Contains(m[2], `job="$job"`) || !strings.Contains(m[2], `instance=~"$instance"`) {
					t.Errorf("panel %q: selector %s does not filter by $job and $instance", p.Title, m[0])
				}
			}
			for _, n := range metricNames(tg.Expr) {
				covered[n] = true
			}
		}
	}
	for _, want := range []string{
		"phasecrawl_pages_fetched_total", "phasecrawl_fetch_errors_total", "phasecrawl_frontier_urls",
		"phasecrawl_bucket_elements", "phasecrawl_phase_current", "phasecrawl_ntp_offset_seconds", "phasecrawl_outbox_urls",
	} {
		if !covered[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}
