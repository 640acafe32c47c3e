package deploy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// k8sManifests is deploy/k8s decoded into the official API types.
type k8sManifests struct {
	sts      *appsv1.StatefulSet
	services map[string]*corev1.Service
	pdb      *policyv1.PodDisruptionBudget
	monitor  *serviceMonitor
	kustom   kustomization
	files    []string // *.yaml in deploy/k8s
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) the manifest uses; decoding is strict, so an
// unknown or misspelt field fails.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Interval    string `json:"interval"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources []string `json:"resources"`
}

// splitYAML splits a multi-document YAML file.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func loadK8s(t *testing.T) k8sManifests {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "k8s")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	m := k8sManifests{services: map[string]*corev1.Service{}}
	for _, f := range files {
		m.files = append(m.files, filepath.Base(f))
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitYAML(data) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s doc %d: %v", f, i, err)
			}
			strict := func(v any) {
				if err := yaml.UnmarshalStrict(doc, v); err != nil {
					t.Fatalf("%s doc %d (%s): %v", filepath.Base(f), i, tm.Kind, err)
				}
			}
			switch tm.APIVersion + "/" + tm.Kind {
			case "apps/v1/StatefulSet":
				if m.sts != nil {
					t.Fatalf("%s: a second StatefulSet", f)
				}
				m.sts = &appsv1.StatefulSet{}
				strict(m.sts)
			case "v1/Service":
				s := &corev1.Service{}
				strict(s)
				m.services[s.Name] = s
			case "policy/v1/PodDisruptionBudget":
				m.pdb = &policyv1.PodDisruptionBudget{}
				strict(m.pdb)
			case "monitoring.coreos.com/v1/ServiceMonitor":
				m.monitor = &serviceMonitor{}
				strict(m.monitor)
			case "kustomize.config.k8s.io/v1beta1/Kustomization":
				strict(&m.kustom)
			default:
				t.Fatalf("%s doc %d: unexpected %s %s", f, i, tm.APIVersion, tm.Kind)
			}
		}
	}
	if m.sts == nil || m.pdb == nil || m.monitor == nil || len(m.services) == 0 || m.kustom.Kind == "" {
		t.Fatalf("deploy/k8s must hold a StatefulSet, Services, a PodDisruptionBudget, a ServiceMonitor and a kustomization; files %v", m.files)
	}
	return m
}

// container returns the phasecrawl container of the StatefulSet.
func (m k8sManifests) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := m.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("StatefulSet has %d containers, want 1", len(cs))
	}
	return cs[0]
}

// fakeFieldRefs are the values the kubelet would give the downward-API
// variables of pod ordinal 0.
var fakeFieldRefs = map[string]string{
	"metadata.name":      "phasecrawl-0",
	"metadata.namespace": "crawl",
	"status.podIP":       "10.42.0.7",
}

// containerEnv resolves the container's environment the way the kubelet
// does for pod phasecrawl-0 (downward API fields faked, resource fields as
// numbers).
func containerEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			v, ok := fakeFieldRefs[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("env %s: fieldRef %s not faked by the test", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		case e.ValueFrom.ResourceFieldRef != nil:
			q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits."))]
			if !ok {
				t.Fatalf("env %s: %s has no limit set", e.Name, e.ValueFrom.ResourceFieldRef.Resource)
			}
			env[e.Name] = strconv.FormatInt(q.Value(), 10)
		default:
			t.Fatalf("env %s: unsupported valueFrom", e.Name)
		}
	}
	return env
}

// expandK8s expands $(VAR) references in args as the kubelet does.
func expandK8s(args []string, env map[string]string) []string {
	re := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = re.ReplaceAllStringFunc(a, func(s string) string {
			if v, ok := env[s[2:len(s)-1]]; ok {
				return v
			}
			return s
		})
	}
	return out
}

// loadNodeConfig parses a container's command line and PHASECRAWL_*
// environment with the binary's own configuration loader.
func loadNodeConfig(t *testing.T, args []string, env map[string]string) config.Config {
	t.Helper()
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("command %q: want phasecrawl run ...", args)
	}
	known := map[string]bool{}
	for _, k := range config.Keys() {
		known[config.EnvName(k)] = true
	}
	for k := range env {
		if strings.HasPrefix(k, config.EnvPrefix) && !known[k] {
			t.Errorf("environment variable %s sets no configuration key", k)
		}
	}
	cfg, err := config.Load(args[1:], func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}, io.Discard)
	if err != nil {
		t.Fatalf("phasecrawl %s: %v", strings.Join(args, " "), err)
	}
	return cfg
}

func portOf(t *testing.T, key, hostPort string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatalf("%s=%q: %v", key, hostPort, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s=%q: port: %v", key, hostPort, err)
	}
	return int32(n)
}

func hostOf(hostPort string) string {
	h, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return hostPort
	}
	return h
}

// namedPort finds a container port by name.
func namedPort(c corev1.Container, name string) (corev1.ContainerPort, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

// targetsPort reports whether a probe or service port refers to the
// container port p (by name or number).
func targetsPort(ref intstr.IntOrString, p corev1.ContainerPort) bool {
	if ref.Type == intstr.String {
		return ref.StrVal == p.Name
	}
	return ref.IntVal == p.ContainerPort
}

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

// TestKubernetesManifests decodes deploy/k8s into the official API types and
// checks that the pieces fit together and fit the binary.
func TestKubernetesManifests(t *testing.T) {
	m := loadK8s(t)
	c := m.container(t)
	env := containerEnv(t, c)
	args := expandK8s(c.Args, env)
	cfg := loadNodeConfig(t, args, env)
	pod := m.sts.Spec.Template
	podLabels := pod.Labels
	gossipSvc := m.services[m.sts.Spec.ServiceName]

	port := func(name string) corev1.ContainerPort {
		p, ok := namedPort(c, name)
		if !ok {
			t.Fatalf("container has no port named %q (ports %+v)", name, c.Ports)
		}
		return p
	}
	preStopSleep := func() int64 {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
			return 0
		}
		return c.Lifecycle.PreStop.Sleep.Seconds
	}

	for _, tc := range []struct {
		name  string
		check func(t *testing.T)
	}{
		{"kustomization lists every manifest but the ServiceMonitor", func(t *testing.T) {
			for _, f := range m.files {
				if f == "kustomization.yaml" || f == "servicemonitor.yaml" {
					continue
				}
				if !slices.Contains(m.kustom.Resources, f) {
					t.Errorf("%s is not in kustomization.yaml resources %v", f, m.kustom.Resources)
				}
			}
			for _, r := range m.kustom.Resources {
				if !slices.Contains(m.files, r) {
					t.Errorf("kustomization.yaml lists %s, which does not exist", r)
				}
			}
		}},
		{"member name is the pod name", func(t *testing.T) {
			if cfg.Name != fakeFieldRefs["metadata.name"] {
				t.Errorf("--name resolves to %q, want the pod name %q", cfg.Name, fakeFieldRefs["metadata.name"])
			}
		}},
		{"API port matches --http", func(t *testing.T) {
			p := port("api")
			if got := portOf(t, "http", cfg.HTTP); got != p.ContainerPort || p.Protocol != corev1.ProtocolTCP {
				t.Errorf("--http %s, container port api %d/%s", cfg.HTTP, p.ContainerPort, p.Protocol)
			}
			if h := hostOf(cfg.HTTP); h != "0.0.0.0" && h != "" {
				t.Errorf("--http host %q: probes and the Service reach the pod IP, listen on 0.0.0.0", h)
			}
		}},
		{"gossip ports match --gossip, TCP and UDP", func(t *testing.T) {
			g := portOf(t, "cluster.gossip", cfg.Cluster.Gossip)
			tcp, udp := port("gossip"), port("gossip-udp")
			if tcp.ContainerPort != g || tcp.Protocol != corev1.ProtocolTCP {
				t.Errorf("gossip port %d/%s, --gossip %s", tcp.ContainerPort, tcp.Protocol, cfg.Cluster.Gossip)
			}
			if udp.ContainerPort != g || udp.Protocol != corev1.ProtocolUDP {
				t.Errorf("gossip-udp port %d/%s, --gossip %s", udp.ContainerPort, udp.Protocol, cfg.Cluster.Gossip)
			}
			if hostOf(cfg.Cluster.Gossip) != fakeFieldRefs["status.podIP"] {
				t.Errorf("--gossip %s: advertise the pod IP ($(POD_IP))", cfg.Cluster.Gossip)
			}
		}},
		{"exchange port matches --exchange", func(t *testing.T) {
			x := port("exchange")
			if got := portOf(t, "cluster.exchange", cfg.Cluster.ExchangeAddr()); got != x.ContainerPort || x.Protocol != corev1.ProtocolTCP {
				t.Errorf("--exchange %s, container port exchange %d/%s", cfg.Cluster.ExchangeAddr(), x.ContainerPort, x.Protocol)
			}
		}},
		{"every container port is one the node listens on", func(t *testing.T) {
			for _, p := range c.Ports {
				switch p.Name {
				case "api", "gossip", "gossip-udp", "exchange":
				default:
					t.Errorf("container port %s (%d) matches no listener of the node", p.Name, p.ContainerPort)
				}
			}
		}},
		{"join goes through the headless Service", func(t *testing.T) {
			if gossipSvc == nil {
				t.Fatalf("serviceName %q names no Service", m.sts.Spec.ServiceName)
			}
			if gossipSvc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("Service %s: clusterIP %q, want None (headless)", gossipSvc.Name, gossipSvc.Spec.ClusterIP)
			}
			if !gossipSvc.Spec.PublishNotReadyAddresses {
				t.Errorf("Service %s: publishNotReadyAddresses must be true (a starting pod is not ready yet)", gossipSvc.Name)
			}
			if len(cfg.Cluster.Join) != 1 {
				t.Fatalf("--join %v: want the headless Service", cfg.Cluster.Join)
			}
			jh, jp := hostOf(cfg.Cluster.Join[0]), portOf(t, "cluster.join", cfg.Cluster.Join[0])
			if jh != gossipSvc.Name && !strings.HasPrefix(jh, gossipSvc.Name+".") {
				t.Errorf("--join host %q is not Service %s", jh, gossipSvc.Name)
			}
			found := false
			for _, sp := range gossipSvc.Spec.Ports {
				if sp.Port == jp && sp.Protocol == corev1.ProtocolTCP && targetsPort(sp.TargetPort, port("gossip")) {
					found = true
				}
			}
			if !found {
				t.Errorf("--join port %d is not a TCP port of Service %s reaching the gossip port", jp, gossipSvc.Name)
			}
		}},
		{"Services select the StatefulSet's pods and reach real ports", func(t *testing.T) {
			for name, s := range m.services {
				if !selects(t, &metav1.LabelSelector{MatchLabels: s.Spec.Selector}, podLabels) {
					t.Errorf("Service %s selector %v does not select pod labels %v", name, s.Spec.Selector, podLabels)
				}
				for _, sp := range s.Spec.Ports {
					ok := false
					for _, cp := range c.Ports {
						if targetsPort(sp.TargetPort, cp) && cp.Protocol == sp.Protocol && cp.ContainerPort == sp.Port {
							ok = true
						}
					}
					if !ok {
						t.Errorf("Service %s port %s (%d/%s -> %s) reaches no container port of the same protocol and number", name, sp.Name, sp.Port, sp.Protocol, sp.TargetPort.String())
					}
				}
			}
			api, ok := m.services["phasecrawl-api"]
			if !ok || api.Spec.ClusterIP == corev1.ClusterIPNone || api.Spec.PublishNotReadyAddresses {
				t.Errorf("phasecrawl-api must be a normal Service of ready pods: %+v", api)
			}
		}},
		{"StatefulSet and PDB select the pods", func(t *testing.T) {
			if !selects(t, m.sts.Spec.Selector, podLabels) {
				t.Errorf("StatefulSet selector does not select its template labels %v", podLabels)
			}
			if !selects(t, m.pdb.Spec.Selector, podLabels) {
				t.Errorf("PodDisruptionBudget selector does not select the pods")
			}
			if m.pdb.Spec.MaxUnavailable == nil || m.pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget: maxUnavailable %v, want 1 (one node leaves at a time)", m.pdb.Spec.MaxUnavailable)
			}
			if m.sts.Spec.Replicas == nil || *m.sts.Spec.Replicas < 3 {
				t.Errorf("replicas %v, want at least 3", m.sts.Spec.Replicas)
			}
			if m.sts.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
				t.Errorf("podManagementPolicy %q: OrderedReady, so that the first pod forms the cluster before the others join", m.sts.Spec.PodManagementPolicy)
			}
		}},
		{"data on a volumeClaimTemplate, key and token from a Secret", func(t *testing.T) {
			mounts := map[string]corev1.VolumeMount{}
			for _, vm := range c.VolumeMounts {
				mounts[vm.Name] = vm
			}
			if len(m.sts.Spec.VolumeClaimTemplates) != 1 {
				t.Fatalf("want one volumeClaimTemplate, have %d", len(m.sts.Spec.VolumeClaimTemplates))
			}
			pvc := m.sts.Spec.VolumeClaimTemplates[0]
			if vm, ok := mounts[pvc.Name]; !ok || vm.MountPath != cfg.Data || vm.ReadOnly {
				t.Errorf("--data %s is not the writable mount of volumeClaimTemplate %s (%+v)", cfg.Data, pvc.Name, vm)
			}
			if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.IsZero() {
				t.Errorf("volumeClaimTemplate %s requests no storage", pvc.Name)
			}
			for key, file := range map[string]string{"cluster.key_file": cfg.Cluster.KeyFile, "api_token_file": cfg.APITokenFile} {
				if file == "" {
					t.Errorf("%s is not set (the API listens on %s)", key, cfg.HTTP)
					continue
				}
				var mount *corev1.VolumeMount
				for i, vm := range c.VolumeMounts {
					if vm.MountPath == filepath.Dir(file) {
						mount = &c.VolumeMounts[i]
					}
				}
				if mount == nil || !mount.ReadOnly {
					t.Errorf("%s %s is not in a read-only mount", key, file)
					continue
				}
				found := false
				for _, v := range pod.Spec.Volumes {
					if v.Name == mount.Name {
						found = v.Secret != nil && v.Secret.SecretName != ""
					}
				}
				if !found {
					t.Errorf("%s: volume %s is not a Secret", key, mount.Name)
				}
			}
		}},
		{"probes hit /healthz and /readyz on the API port", func(t *testing.T) {
			api := port("api")
			for _, p := range []struct {
				name  string
				probe *corev1.Probe
				path  string
			}{
				{"startupProbe", c.StartupProbe, "/healthz"},
				{"livenessProbe", c.LivenessProbe, "/healthz"},
				{"readinessProbe", c.ReadinessProbe, "/readyz"},
			} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("%s: want an httpGet probe", p.name)
					continue
				}
				if p.probe.HTTPGet.Path != p.path || !targetsPort(p.probe.HTTPGet.Port, api) {
					t.Errorf("%s: GET %s on port %s, want %s on the API port", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
				}
			}
		}},
		{"grace period covers preStop and a graceful stop", func(t *testing.T) {
			grace := m.sts.Spec.Template.Spec.TerminationGracePeriodSeconds
			if preStopSleep() < 1 {
				t.Errorf("preStop: want a sleep so the pod leaves the Service endpoints before SIGTERM")
			}
			// After SIGTERM: shutdown_timeout for in-flight fetches, then up to
			// 5s API shutdown, a 5s leave broadcast, 1s propagation, the frontier close.
			need := preStopSleep() + int64(cfg.ShutdownTimeout/time.Second) + 15
			if grace == nil {
				t.Fatalf("terminationGracePeriodSeconds not set (default 30s < %ds)", need)
			}
			if *grace < need {
				t.Errorf("terminationGracePeriodSeconds %d < preStop %ds + shutdown_timeout %s + 15s", *grace, preStopSleep(), cfg.ShutdownTimeout)
			}
		}},
		{"Prometheus scrape annotations name the API port and /metrics", func(t *testing.T) {
			a := pod.Annotations
			if a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" {
				t.Errorf("annotations %v", a)
			}
			if a["prometheus.io/port"] != strconv.Itoa(int(port("api").ContainerPort)) {
				t.Errorf("prometheus.io/port %q, API port %d", a["prometheus.io/port"], port("api").ContainerPort)
			}
		}},
		{"ServiceMonitor scrapes every pod's API", func(t *testing.T) {
			sm := m.monitor
			var svc *corev1.Service
			for _, s := range m.services {
				if selects(t, &sm.Spec.Selector, s.Labels) {
					if svc != nil {
						t.Errorf("ServiceMonitor selects Services %s and %s: pods would be scraped twice", svc.Name, s.Name)
					}
					svc = s
				}
			}
			if svc == nil {
				t.Fatalf("ServiceMonitor selector %v selects no Service", sm.Spec.Selector)
			}
			if !svc.Spec.PublishNotReadyAddresses {
				t.Errorf("ServiceMonitor goes through %s, which hides pods that are not ready (up == 0 would never be seen)", svc.Name)
			}
			if len(sm.Spec.Endpoints) != 1 {
				t.Fatalf("ServiceMonitor endpoints %d, want 1", len(sm.Spec.Endpoints))
			}
			ep := sm.Spec.Endpoints[0]
			ok := false
			for _, sp := range svc.Spec.Ports {
				if sp.Name == ep.Port && targetsPort(sp.TargetPort, port("api")) {
					ok = true
				}
			}
			if !ok || ep.Path != pod.Annotations["prometheus.io/path"] {
				t.Errorf("ServiceMonitor endpoint %+v does not reach the API port's /metrics through %s", ep, svc.Name)
			}
		}},
		{"runs as the image's non-root user, read-only root", func(t *testing.T) {
			psc := pod.Spec.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != imageUID {
				t.Errorf("pod securityContext %+v: want runAsNonRoot and runAsUser %d (the image's USER)", psc, imageUID)
			}
			if psc == nil || psc.FSGroup == nil || *psc.FSGroup != imageUID {
				t.Errorf("pod securityContext: fsGroup %d makes the data volume writable", imageUID)
			}
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("container securityContext %+v: want readOnlyRootFilesystem and no privilege escalation", sc)
			}
		}},
		{"every object carries the app label", func(t *testing.T) {
			objs := map[string]map[string]string{"StatefulSet": m.sts.Labels, "PodDisruptionBudget": m.pdb.Labels, "ServiceMonitor": m.monitor.Metadata.Labels}
			for n, s := range m.services {
				objs["Service "+n] = s.Labels
			}
			for n, l := range objs {
				if l["app.kubernetes.io/name"] != "phasecrawl" {
					t.Errorf("%s: labels %v lack app.kubernetes.io/name=phasecrawl", n, l)
				}
			}
		}},
	} {
		t.Run(tc.name, tc.check)
	}
}

// TestKubernetesProbesAgainstNode starts a node (the real binary) with the
// StatefulSet's arguments, adapted to loopback, and asks it every path the
// manifests probe or scrape.
func TestKubernetesProbesAgainstNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	m := loadK8s(t)
	c := m.container(t)
	env := containerEnv(t, c)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	env["POD_IP"] = "127.0.0.1"
	api := fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	var args []string
	for _, a := range expandK8s(c.Args, env) {
		switch {
		case strings.HasPrefix(a, "--data="):
			a = "--data=" + filepath.Join(dir, "data")
		case strings.HasPrefix(a, "--http="):
			a = "--http=" + api
		case strings.HasPrefix(a, "--gossip="):
			a = fmt.Sprintf("--gossip=127.0.0.1:%d", freePort(t, true))
		case strings.HasPrefix(a, "--exchange="):
			a = fmt.Sprintf("--exchange=127.0.0.1:%d", freePort(t, false))
		case strings.HasPrefix(a, "--join="):
			continue // the first pod: nobody to join
		case strings.HasPrefix(a, "--cluster-key-file="):
			a = "--cluster-key-file=" + keyFile
		case strings.HasPrefix(a, "--api-token-file="):
			a = "--api-token-file=" + keyFile // 32 characters: a valid token too
		}
		args = append(args, a)
	}
	var penv []string
	for k, v := range env {
		if strings.HasPrefix(k, config.EnvPrefix) {
			penv = append(penv, k+"="+v)
		}
	}
	p := startProc(t, "node", phasecrawlBinary(t), penv, args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	paths := []string{c.StartupProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path,
		m.sts.Spec.Template.Annotations["prometheus.io/path"]}
	for _, path := range paths {
		wait.For(t, 30*time.Second, "GET "+path, func() (bool, string) {
			if p.exited() {
				t.Fatalf("node exited: %v\n%s", p.err, p.out.String())
			}
			code, body, err := getStatus(ctx, "http://"+api+path)
			return err == nil && code == 200, fmt.Sprintf("%d %v %.200s", code, err, body)
		})
	}
	_, body, err := getStatus(ctx, "http://"+api+"/metrics")
	if err != nil || !strings.Contains(body, "phasecrawl_cluster_members") {
		t.Errorf("/metrics of the node has no phasecrawl_cluster_members: %v", err)
	}
	if err := p.stop(45 * time.Second); err != nil {
		t.Errorf("node stop: %v\n%s", err, p.out.String())
	}
}
