package config

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// TestExitWhenDone: exit_when_done refuses a recurring crawl, and
// done_grace is range-checked by key.
func TestExitWhenDone(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string // "" : valid
	}{
		{"default", func(*Config) {}, ""},
		{"exit once", func(c *Config) { c.ExitWhenDone = true }, ""},
		{"revisit without exit", func(c *Config) { c.Recrawl.Interval = time.Hour }, ""},
		{"exit and revisit", func(c *Config) { c.ExitWhenDone, c.Recrawl.Interval = true, time.Hour }, "exit_when_done: a recurring crawl"},
		{"exit and a site's revisit", func(c *Config) {
			c.ExitWhenDone = true
			c.Sites = []Site{{Match: "*.example.org", Revisit: time.Hour}}
		}, "exit_when_done: a recurring crawl"},
		{"grace too short", func(c *Config) { c.DoneGrace = 10 * time.Millisecond }, "done_grace=10ms: must be in 1s..1h0m0s"},
		{"grace too long", func(c *Config) { c.DoneGrace = 2 * time.Hour }, "done_grace=2h0m0s: must be in 1s..1h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.set(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
	if Default().DoneGrace != 5*time.Second {
		t.Errorf("done_grace default %s, want 5s", Default().DoneGrace)
	}
}

// TestLoadWithArgs: LoadWith takes arguments between flags, and the
// command's own flags.
func TestLoadWithArgs(t *testing.T) {
	var args []string
	var quiet bool
	cfg, err := LoadWith([]string{"http://a.test/", "--delay", "2s", "http://b.test/", "--quiet", "--", "--c"}, nil, nil, LoadOptions{
		Command: "crawl",
		Flags:   func(fs *flag.FlagSet) { fs.BoolVar(&quiet, "quiet", false, "") },
		Args:    &args,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Delay != 2*time.Second || !quiet || strings.Join(args, " ") != "http://a.test/ http://b.test/ --c" {
		t.Errorf("delay %s quiet %v args %q", cfg.Delay, quiet, args)
	}
	if _, err := Load([]string{"--delay", "2s", "x"}, nil, nil); err == nil || !strings.Contains(err.Error(), `unexpected argument "x"`) {
		t.Errorf("Load with an argument: %v", err)
	}
}
