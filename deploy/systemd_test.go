package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitFile is a systemd unit: section -> key -> values (in order; a key may repeat).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is not KEY=VALUE in a section", path, n, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u
}

func (u unitFile) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// parseEnvFile reads KEY=VALUE lines as systemd's EnvironmentFile= does
// (comments, blank lines, optional quotes).
func parseEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(k) {
			t.Fatalf("%s:%d: %q is not NAME=VALUE", path, n+1, line)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	return env
}

// TestSystemdUnit checks the unit and its environment file against the
// binary's configuration loader, then has systemd-analyze verify the unit
// and rate its sandboxing.
func TestSystemdUnit(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "systemd")
	unitPath := filepath.Join(dir, "phasecrawl.service")
	u := parseUnit(t, unitPath)
	env := parseEnvFile(t, filepath.Join(dir, "phasecrawl.env"))
	svc := u["Service"]
	credDir := "/run/credentials/phasecrawl.service"
	execStart := strings.Fields(strings.ReplaceAll(u.get("Service", "ExecStart"), "%d", credDir))
	if len(execStart) < 2 || execStart[0] != "/usr/local/bin/phasecrawl" {
		t.Fatalf("ExecStart %q: want /usr/local/bin/phasecrawl run ...", execStart)
	}
	cfg := loadNodeConfig(t, execStart[1:], env)

	for _, tc := range []struct {
		name  string
		check func(t *testing.T)
	}{
		{"hardening directives", func(t *testing.T) {
			for key, want := range map[string]string{
				"ProtectSystem": "strict", "NoNewPrivileges": "yes", "ProtectHome": "yes", "PrivateTmp": "yes",
				"StateDirectory": "phasecrawl", "EnvironmentFile": "/etc/phasecrawl/phasecrawl.env",
				"KillSignal": "SIGTERM", "Restart": "on-failure",
			} {
				if got := u.get("Service", key); got != want {
					t.Errorf("%s=%q, want %q", key, got, want)
				}
			}
			if u.get("Service", "DynamicUser") != "yes" && u.get("Service", "User") == "" {
				t.Errorf("neither DynamicUser=yes nor a dedicated User=")
			}
			if u.get("Install", "WantedBy") != "multi-user.target" {
				t.Errorf("[Install] WantedBy=%q", u.get("Install", "WantedBy"))
			}
		}},
		{"data in the state directory", func(t *testing.T) {
			want := "/var/lib/" + u.get("Service", "StateDirectory")
			if cfg.Data != want {
				t.Errorf("data %q, want the StateDirectory %s (ProtectSystem=strict leaves nothing else writable)", cfg.Data, want)
			}
		}},
		{"secrets arrive as credentials", func(t *testing.T) {
			creds := map[string]bool{}
			for _, c := range svc["LoadCredential"] {
				name, src, ok := strings.Cut(c, ":")
				if !ok || !strings.HasPrefix(src, "/etc/phasecrawl/") {
					t.Errorf("LoadCredential=%s: want NAME:/etc/phasecrawl/FILE", c)
				}
				creds[filepath.Join(credDir, name)] = true
			}
			for key, file := range map[string]string{"cluster.key_file": cfg.Cluster.KeyFile, "api_token_file": cfg.APITokenFile} {
				if !creds[file] {
					t.Errorf("%s=%q is not a LoadCredential= file (%v)", key, file, svc["LoadCredential"])
				}
			}
		}},
		{"stop timeout covers a graceful stop", func(t *testing.T) {
			d, err := time.ParseDuration(u.get("Service", "TimeoutStopSec"))
			if err != nil {
				t.Fatalf("TimeoutStopSec=%q: %v", u.get("Service", "TimeoutStopSec"), err)
			}
			if need := cfg.ShutdownTimeout + 15*time.Second; d < need {
				t.Errorf("TimeoutStopSec %s < shutdown_timeout %s + 15s (API shutdown, leave, frontier close)", d, cfg.ShutdownTimeout)
			}
		}},
		{"file descriptors for every worker's connection", func(t *testing.T) {
			n, err := strconv.Atoi(u.get("Service", "LimitNOFILE"))
			if err != nil {
				t.Fatalf("LimitNOFILE=%q: %v", u.get("Service", "LimitNOFILE"), err)
			}
			if n < 4*cfg.Workers+1024 {
				t.Errorf("LimitNOFILE=%d too low for %d workers", n, cfg.Workers)
			}
		}},
		{"a cluster member with NTP", func(t *testing.T) {
			if !cfg.Cluster.Enabled() || len(cfg.Cluster.Join) == 0 || len(cfg.Cluster.NTP) == 0 {
				t.Errorf("the example should show a cluster member (gossip, join, ntp): %+v", cfg.Cluster)
			}
			if u.get("Unit", "After") == "" || !strings.Contains(u.get("Unit", "After"), "time-sync.target") {
				t.Errorf("After=%q: start after time-sync.target (phases need the clock)", u.get("Unit", "After"))
			}
		}},
	} {
		t.Run(tc.name, tc.check)
	}

	t.Run("systemd-analyze", func(t *testing.T) {
		sa := requireTool(t, "systemd-analyze", "verifies deploy/systemd/phasecrawl.service")
		// verify checks that ExecStart's binary exists: point it at the one
		// built here, and the environment file at the repository's.
		tmp := t.TempDir()
		unit, err := os.ReadFile(unitPath)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(unit), "/usr/local/bin/phasecrawl", phasecrawlBinary(t))
		text = strings.ReplaceAll(text, "/etc/phasecrawl/phasecrawl.env", filepath.Join(dir, "phasecrawl.env"))
		copyPath := filepath.Join(tmp, "phasecrawl.service")
		if err := os.WriteFile(copyPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, sa, "verify", copyPath)
		cmd.Dir = tmp
		out, err := cmd.CombinedOutput()
		var complaints []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "phasecrawl.service") {
				complaints = append(complaints, line)
			}
		}
		if err != nil || len(complaints) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}

		out, err = exec.CommandContext(ctx, sa, "security", "--offline=true", copyPath).CombinedOutput()
		m := regexp.MustCompile(`Overall exposure level for phasecrawl\.service: ([0-9.]+)`).FindSubmatch(out)
		if m == nil {
			t.Logf("systemd-analyze security --offline=true is not supported here (%v): exposure not rated", err)
			return
		}
		level, perr := strconv.ParseFloat(string(m[1]), 64)
		if perr != nil || level > 2.5 {
			t.Errorf("exposure level %s, want at most 2.5 (\"OK\"); systemd-analyze security says:\n%s", m[1], out)
		}
		t.Logf("systemd-analyze security: exposure %s", m[1])
	})
}
