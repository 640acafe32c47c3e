package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/phasecrawl/phasecrawl/config"
	"github.com/phasecrawl/phasecrawl/demo/synthweb"
	"github.com/phasecrawl/phasecrawl/demo/webnode"
	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// interpolate applies compose's ${VAR} and ${VAR:-default} substitution.
func interpolate(s string, env map[string]string) string {
	return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`).ReplaceAllStringFunc(s, func(m string) string {
		sub := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`).FindStringSubmatch(m)
		if v, ok := env[sub[1]]; ok && v != "" {
			return v
		}
		return sub[2]
	})
}

// composeService is the part of a compose service the tests read.
type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Secrets     []string          `yaml:"secrets"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Profiles    []string          `yaml:"profiles"`
	ReadOnly    bool              `yaml:"read_only"`
	StopGrace   string            `yaml:"stop_grace_period"`
	Networks    yaml.Node         `yaml:"networks"`
	DependsOn   yaml.Node         `yaml:"depends_on"`
	Healthcheck struct {
		Test    []string `yaml:"test"`
		Disable bool     `yaml:"disable"`
	} `yaml:"healthcheck"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
	Volumes  map[string]any `yaml:"volumes"`
	Networks map[string]any `yaml:"networks"`
}

func loadCompose(t *testing.T, env map[string]string) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal([]byte(interpolate(string(data), env)), &cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return cf
}

// aliases returns a service's network aliases by network.
func (s composeService) aliases(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	switch s.Networks.Kind {
	case yaml.SequenceNode:
		var names []string
		if err := s.Networks.Decode(&names); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			out[n] = nil
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Aliases []string `yaml:"aliases"`
		}
		if err := s.Networks.Decode(&m); err != nil {
			t.Fatal(err)
		}
		for n, v := range m {
			out[n] = v.Aliases
		}
	}
	return out
}

// dependsOn returns a service's dependencies and their conditions.
func (s composeService) dependsOn(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch s.DependsOn.Kind {
	case yaml.SequenceNode:
		var names []string
		if err := s.DependsOn.Decode(&names); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			out[n] = "service_started"
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := s.DependsOn.Decode(&m); err != nil {
			t.Fatal(err)
		}
		for n, v := range m {
			out[n] = v.Condition
		}
	}
	return out
}

// flagValue returns the value of --name=V or --name V in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestComposeFile checks deploy/compose.yaml against the binary's flags:
// every node's command and environment load, the nodes join through the
// gossip alias, the secrets, volumes and ports line up, and the synthetic
// web is the one the nodes resolve and scope.
func TestComposeFile(t *testing.T) {
	cf := loadCompose(t, nil)
	nodes := map[string]config.Config{}
	var nodeNames []string
	for name, s := range cf.Services {
		if len(s.Command) > 0 && s.Command[0] == "run" {
			nodes[name] = loadNodeConfig(t, s.Command, s.Environment)
			nodeNames = append(nodeNames, name)
		}
	}
	slices.Sort(nodeNames)
	if !slices.Equal(nodeNames, []string{"node1", "node2", "node3", "node4"}) {
		t.Fatalf("node services %v, want node1..node4", nodeNames)
	}
	web, ok := cf.Services["synthweb"]
	if !ok || len(web.Command) == 0 || web.Command[0] != "synthweb" {
		t.Fatalf("no synthweb service running phasecrawl synthweb")
	}
	for _, name := range nodeNames {
		s, cfg := cf.Services[name], nodes[name]
		t.Run(name, func(t *testing.T) {
			if cfg.Name != name {
				t.Errorf("member name %q, want the service name", cfg.Name)
			}
			if s.Image != web.Image || s.Image == "" {
				t.Errorf("image %q, synthweb's %q: one image for both", s.Image, web.Image)
			}
			if !s.ReadOnly {
				t.Errorf("read_only: the node must run with a read-only root (only /data is written)")
			}
			// Join through the alias every node carries.
			gossipPort := portOf(t, "cluster.gossip", cfg.Cluster.Gossip)
			al := s.aliases(t)
			if len(cfg.Cluster.Join) != 1 {
				t.Fatalf("--join %v: want the gossip alias", cfg.Cluster.Join)
			}
			jh, jp := hostOf(cfg.Cluster.Join[0]), portOf(t, "cluster.join", cfg.Cluster.Join[0])
			found := false
			for _, as := range al {
				found = found || slices.Contains(as, jh)
			}
			if !found || jp != gossipPort {
				t.Errorf("--join %s: not this node's own gossip alias %v on port %d", cfg.Cluster.Join[0], al, gossipPort)
			}
			// Secrets: compose mounts them at /run/secrets/NAME.
			for key, file := range map[string]string{"cluster.key_file": cfg.Cluster.KeyFile, "api_token_file": cfg.APITokenFile} {
				sec, ok := strings.CutPrefix(file, "/run/secrets/")
				if !ok || !slices.Contains(s.Secrets, sec) || cf.Secrets[sec].File == "" {
					t.Errorf("%s=%q is not a secret of the service (%v) defined with a file", key, file, s.Secrets)
				}
			}
			// Data on the node's own named volume.
			var dataVol string
			for _, v := range s.Volumes {
				src, dst, _ := strings.Cut(v, ":")
				if strings.TrimSuffix(dst, ":rw") == cfg.Data {
					dataVol = src
				}
			}
			if _, ok := cf.Volumes[dataVol]; !ok || dataVol != name+"-data" {
				t.Errorf("--data %s is not on the named volume %s-data (volumes %v)", cfg.Data, name, s.Volumes)
			}
			// The API published on loopback, probed by the image's health command.
			if len(s.Ports) != 1 {
				t.Fatalf("ports %v: want the API only", s.Ports)
			}
			parts := strings.Split(s.Ports[0], ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" || parts[2] != strconv.Itoa(int(portOf(t, "http", cfg.HTTP))) {
				t.Errorf("port %q: want 127.0.0.1:HOSTPORT:%d", s.Ports[0], portOf(t, "http", cfg.HTTP))
			}
			if hc := s.Healthcheck.Test; len(hc) < 3 || hc[1] != "/phasecrawl" || hc[2] != "health" {
				t.Errorf("healthcheck %v: want /phasecrawl health", hc)
			} else if flagValue(hc, "node") == "" && portOf(t, "http", cfg.HTTP) != 7070 {
				t.Errorf("healthcheck asks 127.0.0.1:7070 but the API listens on %s", cfg.HTTP)
			}
			grace, err := time.ParseDuration(s.StopGrace)
			if err != nil || grace < cfg.ShutdownTimeout+15*time.Second {
				t.Errorf("stop_grace_period %q: want at least shutdown_timeout %s + 15s", s.StopGrace, cfg.ShutdownTimeout)
			}
			// node1 starts the cluster; the others wait until it is healthy.
			deps := s.dependsOn(t)
			if name == "node1" {
				for d := range deps {
					if _, isNode := nodes[d]; isNode {
						t.Errorf("node1 depends on %s: it must start alone", d)
					}
				}
			} else if deps["node1"] != "service_healthy" {
				t.Errorf("depends_on %v: want node1 with condition service_healthy", deps)
			}
			if (name == "node4") != slices.Contains(s.Profiles, "scale-out") {
				t.Errorf("profiles %v: only node4 is in the scale-out profile", s.Profiles)
			}
			// The synthetic web the node resolves and may crawl.
			if len(cfg.Resolve) != 1 {
				t.Fatalf("resolve %v", cfg.Resolve)
			}
			pat, target, _ := strings.Cut(cfg.Resolve[0], "=")
			domain := flagValue(web.Command, "domain")
			if domain == "" {
				domain = synthweb.DefaultConfig().Domain
			}
			if pat != "*."+domain || !slices.Equal(cfg.Scope.AllowDomains, []string{domain}) {
				t.Errorf("resolve %q, allow_domains %v: want *.%s and [%s]", cfg.Resolve[0], cfg.Scope.AllowDomains, domain, domain)
			}
			if want := "synthweb:" + strconv.Itoa(int(portOf(t, "listen", flagValue(web.Command, "listen")))); target != want {
				t.Errorf("resolve target %s, want %s (the synthweb service)", target, want)
			}
			if _, ok := al[firstKey(web.aliases(t))]; !ok {
				t.Errorf("node and synthweb share no network")
			}
		})
	}

	t.Run("docker-compose config", func(t *testing.T) {
		cmd := composeCommand()
		if cmd == nil {
			noDocker(t, "neither docker-compose nor docker compose is installed")
		}
		dir := t.TempDir()
		env := composeEnv(t, dir, "phasecrawl:check", []int{7071, 7072, 7073, 7074})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], "-f", filepath.Join(repoRoot(t), "deploy", "compose.yaml"), "config", "-q")...)
		c.Env = append(os.Environ(), env...)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("%s config -q: %v\n%s", strings.Join(cmd, " "), err, out)
		}
	})
}

func firstKey(m map[string][]string) string {
	for k := range m {
		return k
	}
	return ""
}

// composeCommand returns docker-compose, or docker compose, or nil.
func composeCommand() []string {
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	if p, err := exec.LookPath("docker"); err == nil {
		if exec.Command(p, "compose", "version").Run() == nil {
			return []string{p, "compose"}
		}
	}
	return nil
}

// composeEnv writes a cluster key and an API token (readable by the
// image's user) into dir and returns the variables compose.yaml reads.
func composeEnv(t *testing.T, dir, image string, apiPorts []int) []string {
	t.Helper()
	key, tok := make([]byte, 32), make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(tok); err != nil {
		t.Fatal(err)
	}
	keyFile, tokFile := filepath.Join(dir, "cluster.key"), filepath.Join(dir, "api.token")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokFile, []byte(hex.EncodeToString(tok)+"\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	env := []string{"PHASECRAWL_COMPOSE_IMAGE=" + image, "PHASECRAWL_COMPOSE_CLUSTER_KEY=" + keyFile, "PHASECRAWL_COMPOSE_API_TOKEN=" + tokFile}
	for i, p := range apiPorts {
		env = append(env, fmt.Sprintf("PHASECRAWL_COMPOSE_NODE%d_API=%d", i+1, p))
	}
	return env
}

// requireDockerEnv names the variable that makes a missing Docker engine
// or compose tool a failure instead of a skip; .ci/run sets it (the CI
// machine has both), as does CI=true.
const requireDockerEnv = "PHASECRAWL_REQUIRE_DOCKER"

// dockerRequired reports whether the Docker tests must run here.
func dockerRequired() bool {
	return os.Getenv(requireDockerEnv) == "1" || os.Getenv("CI") == "true"
}

// noDocker fails the test when Docker is required here and skips it
// otherwise, saying why and how to run it.
func noDocker(t *testing.T, why string) {
	t.Helper()
	if dockerRequired() {
		t.Fatalf("%s (%s=1 or CI=true: this machine must run the Docker tests; .ci/run starts dockerd)", why, requireDockerEnv)
	}
	t.Skipf("skipped (start a Docker engine with docker-compose to run it; %s=1 makes this a failure): %s", requireDockerEnv, why)
}

// dockerAvailable returns unless a Docker engine answers; then noDocker.
func dockerAvailable(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		noDocker(t, "docker is not installed: the compose cluster test needs a Docker engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info").CombinedOutput(); err != nil {
		noDocker(t, fmt.Sprintf("no Docker engine answers (docker info: %v): the compose cluster test needs one\n%s", err, out))
	}
}

// TestComposeCluster builds the image, runs deploy/compose.yaml (three
// nodes and the synthetic web), crawls the web to the last page, stops a
// node, starts a fourth and crawls a second web posted afterwards.
func TestComposeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs containers")
	}
	dockerAvailable(t)
	compose := composeCommand()
	if compose == nil {
		noDocker(t, "neither docker-compose nor docker compose is installed")
	}
	root := repoRoot(t)
	rnd := make([]byte, 4)
	if _, err := rand.Read(rnd); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(rnd)
	project, image := "phasecrawl-e2e-"+id, "phasecrawl-e2e:"+id
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	docker := func(timeout time.Duration, args ...string) (string, error) {
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		out, err := exec.CommandContext(c, "docker", args...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("docker %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	start := time.Now()
	build := exec.CommandContext(ctx, filepath.Join(root, "deploy", "build-image.sh"), image)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("deploy/build-image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "rmi", "-f", image).CombinedOutput(); err != nil {
			t.Logf("docker rmi %s: %v\n%s", image, err, out)
		}
	})
	t.Logf("image %s built in %s", image, time.Since(start).Round(time.Millisecond))

	dir := t.TempDir()
	apiPorts := []int{freePort(t, false), freePort(t, false), freePort(t, false), freePort(t, false)}
	env := composeEnv(t, dir, image, apiPorts)
	tokData, err := os.ReadFile(filepath.Join(dir, "api.token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokData))
	// The test's settings: a short phase and delay, and a second web
	// (fresh.test) for after the membership change. PHASECRAWL_* variables
	// override the command's flags.
	override := `services:
  synthweb2:
    image: ${PHASECRAWL_COMPOSE_IMAGE}
    command: ["synthweb", "--listen=0.0.0.0:8080", "--domain=fresh.test", "--seed=2", "--hosts=20", "--pages=400", "--trap-hosts=0"]
    healthcheck:
      disable: true
    read_only: true
    networks: [crawl]
`
	for i := 1; i <= 4; i++ {
		override += fmt.Sprintf(`  node%d:
    environment:
      PHASECRAWL_DELAY: 5ms
      PHASECRAWL_CLUSTER_PHASE_DURATION: 1s
      PHASECRAWL_FETCH_RETRY_BACKOFF: 1s
      PHASECRAWL_SCOPE_ALLOW_DOMAINS: synth.test,fresh.test
      PHASECRAWL_RESOLVE: "*.synth.test=synthweb:8080,*.fresh.test=synthweb2:8080"
`, i)
	}
	overridePath := filepath.Join(dir, "compose.test.yaml")
	if err := os.WriteFile(overridePath, []byte(override), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each compose command has its own bound (not ctx: the cleanup runs after it ended).
	dc := func(timeout time.Duration, args ...string) (string, error) {
		c, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		full := append(append([]string{}, compose[1:]...), "--project-name", project, "--profile", "scale-out",
			"-f", filepath.Join(root, "deploy", "compose.yaml"), "-f", overridePath)
		cmd := exec.CommandContext(c, compose[0], append(full, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("%s %s: %w\n%s", strings.Join(compose, " "), strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	t.Cleanup(func() {
		if _, err := dc(2*time.Minute, "down", "--volumes", "--remove-orphans", "--timeout", "10"); err != nil {
			t.Logf("compose down: %v", err)
		}
		// Whatever down missed: containers, networks and volumes of the project.
		label := "label=com.docker.compose.project=" + project
		for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
			ids, _ := exec.Command("docker", append(kind, "--filter", label)...).Output()
			for _, id := range strings.Fields(string(ids)) {
				rm := map[string][]string{"ps": {"rm", "-fv"}, "network": {"network", "rm"}, "volume": {"volume", "rm", "-f"}}[kind[0]]
				if out, err := exec.Command("docker", append(rm, id)...).CombinedOutput(); err != nil {
					t.Logf("docker %v %s: %v %s", rm, id, err, out)
				}
			}
		}
	})
	dumpLogs := func() {
		out, _ := dc(time.Minute, "logs", "--no-color", "--tail", "40")
		t.Logf("compose logs:\n%s", out)
	}

	if _, err := dc(3*time.Minute, "up", "-d", "synthweb", "synthweb2", "node1", "node2", "node3"); err != nil {
		t.Fatal(err)
	}
	api := map[string]string{}
	for i := 1; i <= 4; i++ {
		api[fmt.Sprintf("node%d", i)] = fmt.Sprintf("127.0.0.1:%d", apiPorts[i-1])
	}
	statusOf := func(name string) (nodeStatus, error) {
		var st nodeStatus
		err := getJSON(ctx, "http://"+api[name]+"/v1/status", &st)
		return st, err
	}
	waitCluster := func(members []string) {
		t.Helper()
		wait.For(t, 90*time.Second, fmt.Sprintf("cluster of %v", members), func() (bool, string) {
			var state []string
			ok := true
			for _, n := range members {
				st, err := statusOf(n)
				if err != nil {
					return false, err.Error()
				}
				var names []string
				for _, m := range st.Members {
					if m.State == "alive" {
						names = append(names, m.Name)
					}
				}
				slices.Sort(names)
				state = append(state, fmt.Sprintf("%s sees %v, nphase %d", n, names, st.Phase.NPhase))
				if !slices.Equal(names, members) || st.Phase.NPhase < len(members) {
					ok = false
				}
			}
			return ok, strings.Join(state, "; ")
		})
	}
	crawl := func(members []string, before map[string]int64, want int) map[string]int64 {
		t.Helper()
		got := map[string]int64{}
		waited := false
		defer func() {
			if !waited { // the wait failed
				dumpLogs()
			}
		}()
		wait.Steady(t, 2*time.Minute, 600*time.Millisecond, fmt.Sprintf("crawl on %v done", members), func() (bool, string) {
			all := true
			var total int64
			for _, n := range members {
				st, err := statusOf(n)
				if err != nil {
					t.Fatal(err)
				}
				got[n] = st.PagesFetched - before[n]
				total += got[n]
				if !st.Done || st.outboxLen() > 0 {
					all = false
				}
			}
			return all && total >= int64(want), fmt.Sprintf("%v (want %d new pages)", got, want)
		})
		waited = true
		var total int64
		for _, v := range got {
			total += v
		}
		if total != int64(want) {
			t.Errorf("nodes %v fetched %d pages %v, the synthetic web expects %d", members, total, got, want)
		}
		return got
	}

	three := []string{"node1", "node2", "node3"}
	waitCluster(three)
	t.Logf("cluster of three up after %s", time.Since(start).Round(time.Millisecond))

	t.Run("containers run as the image's user, read-only, healthy", func(t *testing.T) {
		for _, n := range three {
			cid, err := dc(time.Minute, "ps", "-q", n)
			if err != nil {
				t.Fatal(err)
			}
			cid = strings.TrimSpace(cid)
			wait.For(t, 60*time.Second, n+" healthy", func() (bool, string) {
				out, err := docker(30*time.Second, "inspect", "-f", "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.State.Health.Status}}", cid)
				return err == nil && out == fmt.Sprintf("%d:%d true healthy", imageUID, imageUID), out
			})
		}
	})

	uaScope := func(domain string) synthweb.Scope {
		return synthweb.Scope{Domains: []string{domain}, MaxPagesPerHost: webnode.MaxPagesPerHost, UserAgent: config.Default().UserAgent}
	}
	wc := synthweb.DefaultConfig()
	wc.Hosts, wc.Pages, wc.TrapHosts = 60, 2000, 0 // compose.yaml's synthweb
	web, err := synthweb.New(wc)
	if err != nil {
		t.Fatal(err)
	}
	exp := web.Expected(uaScope(wc.Domain))
	if _, err := postSeeds(ctx, api["node1"], web.Seeds(), ""); err == nil {
		t.Errorf("seeds posted without the bearer token were accepted")
	}
	if _, err := postSeeds(ctx, api["node1"], web.Seeds(), token); err != nil {
		t.Fatal(err)
	}
	crawlStart := time.Now()
	first := crawl(three, nil, exp.Fetches)
	t.Logf("first crawl: %d pages %v in %s", exp.Fetches, first, time.Since(crawlStart).Round(time.Millisecond))

	// node3 leaves (docker stop: SIGTERM), node4 joins.
	if _, err := dc(2*time.Minute, "stop", "--timeout", "45", "node3"); err != nil {
		t.Fatal(err)
	}
	cid3, err := dc(time.Minute, "ps", "-q", "node3")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := docker(30*time.Second, "inspect", "-f", "{{.State.ExitCode}}", strings.TrimSpace(cid3)); err != nil || out != "0" {
		t.Errorf("node3 exit code %q after docker stop (%v), want 0", out, err)
	}
	logs3, _ := dc(time.Minute, "logs", "--no-color", "node3")
	if !strings.Contains(logs3, `"msg":"node stopped"`) {
		t.Errorf("node3's log has no \"node stopped\" record:\n%s", logs3[max(0, len(logs3)-3000):])
	}
	waitCluster([]string{"node1", "node2"})
	if _, err := dc(3*time.Minute, "up", "-d", "node4"); err != nil {
		t.Fatal(err)
	}
	after := []string{"node1", "node2", "node4"}
	waitCluster(after)

	before := map[string]int64{}
	for _, n := range after {
		st, err := statusOf(n)
		if err != nil {
			t.Fatal(err)
		}
		before[n] = st.PagesFetched
	}
	wc2 := synthweb.DefaultConfig()
	wc2.Hosts, wc2.Pages, wc2.Seed, wc2.Domain, wc2.TrapHosts = 20, 400, 2, "fresh.test", 0 // the override's synthweb2
	web2, err := synthweb.New(wc2)
	if err != nil {
		t.Fatal(err)
	}
	exp2 := web2.Expected(uaScope(wc2.Domain))
	if _, err := postSeeds(ctx, api["node2"], web2.Seeds(), token); err != nil {
		t.Fatal(err)
	}
	crawlStart = time.Now()
	second := crawl(after, before, exp2.Fetches)
	t.Logf("second crawl after the change: %d pages %v in %s", exp2.Fetches, second, time.Since(crawlStart).Round(time.Millisecond))
	if second["node4"] == 0 {
		t.Errorf("node4 fetched nothing of the fresh web: it does not take part in the crawl")
	}
}
