package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// TestLogFlags runs the binary with each log format and level (flags and
// PHASECRAWL_* variables) and reads what it writes: a collector must be able
// to parse every line, and the level must filter.
func TestLogFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := phasecrawlBinary(t)
	textLine := regexp.MustCompile(`^time=\S+ level=(DEBUG|INFO|WARN|ERROR) msg=`)
	for _, tc := range []struct {
		name     string
		args     []string
		env      []string
		format   string // json or text
		wantInfo bool   // INFO records ("config loaded", "node stopped") expected
	}{
		{"json flag", []string{"--log-format", "json"}, nil, "json", true},
		{"text flag", []string{"--log-format", "text"}, nil, "text", true},
		{"default is text", nil, nil, "text", true},
		{"json from the environment", nil, []string{"PHASECRAWL_LOG_FORMAT=json"}, "json", true},
		{"environment beats the flag", []string{"--log-format", "text"}, []string{"PHASECRAWL_LOG_FORMAT=json"}, "json", true},
		{"warn level hides info", []string{"--log-format", "json", "--log-level", "warn"}, nil, "json", false},
		{"error level from the environment", []string{"--log-format", "json"}, []string{"PHASECRAWL_LOG_LEVEL=error"}, "json", false},
		{"debug level", []string{"--log-format", "json", "--log-level", "debug"}, nil, "json", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			api := fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
			args := append([]string{"run", "--name", "logcheck", "--data", filepath.Join(dir, "data"), "--http", api}, tc.args...)
			p := startProc(t, "node", bin, tc.env, args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			wait.For(t, 20*time.Second, "node ready", func() (bool, string) {
				if p.exited() {
					t.Fatalf("node exited: %v\n%s", p.err, p.out.String())
				}
				code, _, err := getStatus(ctx, "http://"+api+"/readyz")
				return err == nil && code == 200, fmt.Sprintf("%d %v", code, err)
			})
			if err := p.stop(30 * time.Second); err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out.String())
			}
			out := strings.TrimSpace(p.out.String())
			var lines []string
			if out != "" {
				lines = strings.Split(out, "\n")
			}
			var msgs []string
			for _, line := range lines {
				switch tc.format {
				case "json":
					var rec map[string]any
					if err := json.Unmarshal([]byte(line), &rec); err != nil {
						t.Fatalf("not a JSON line: %q: %v", line, err)
					}
					for _, k := range []string{"time", "level", "msg"} {
						if _, ok := rec[k]; !ok {
							t.Errorf("JSON record without %q: %s", k, line)
						}
					}
					level, _ := rec["level"].(string)
					msg, _ := rec["msg"].(string)
					if !tc.wantInfo && (level == "INFO" || level == "DEBUG") {
						t.Errorf("%s record at a higher level: %s", level, line)
					}
					msgs = append(msgs, msg)
					if msg == "config loaded" && (rec["name"] != "logcheck" || rec["http"] != api) {
						t.Errorf("config loaded record does not show the configuration: %s", line)
					}
				case "text":
					if !textLine.MatchString(line) {
						t.Fatalf("not a text (logfmt) record: %q", line)
					}
					if m := regexp.MustCompile(`msg="([^"]*)"|msg=(\S+)`).FindStringSubmatch(line); m != nil {
						msgs = append(msgs, m[1]+m[2])
					}
				}
			}
			has := func(msg string) bool {
				for _, m := range msgs {
					if m == msg {
						return true
					}
				}
				return false
			}
			if tc.wantInfo {
				for _, want := range []string{"config loaded", "node running", "node stopped"} {
					if !has(want) {
						t.Errorf("no %q record in:\n%s", want, out)
					}
				}
			} else if has("config loaded") {
				t.Errorf("\"config loaded\" (INFO) logged above info level:\n%s", out)
			}
		})
	}

	t.Run("bad values are refused", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--log-format", "xml"}, `log.format="xml": must be text or json`},
			{[]string{"--log-level", "loud"}, `log.level="loud": must be debug, info, warn or error`},
		} {
			p := startProc(t, "node", bin, nil, append([]string{"run", "--data", t.TempDir(), "--http", "127.0.0.1:0"}, tc.args...)...)
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%v: node did not refuse to start", tc.args)
			}
			if p.err == nil || !strings.Contains(p.out.String(), tc.want) {
				t.Errorf("%v: exit %v, output %q; want an error naming %q", tc.args, p.err, p.out.String(), tc.want)
			}
		}
	})
}
