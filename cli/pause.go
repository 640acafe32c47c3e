package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/phasecrawl/phasecrawl/api"
)

// cmdPause pauses (name "pause") or resumes (name "resume") a node through its API.
func cmdPause(name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := nodeFlag(fs)
	tokenFile := tokenFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	c, err := writeClient(*addr, *tokenFile, 0)
	if err != nil {
		return err
	}
	res, err := c.SetPaused(context.Background(), name == "pause")
	switch {
	case errors.Is(err, api.ErrUnauthorized):
		return fmt.Errorf("node %s refused (401): %s", *addr, tokenHint)
	case err != nil:
		return fmt.Errorf("%s %s: %w", name, *addr, err)
	}
	state := map[bool]string{true: "paused", false: "running"}[res.Paused]
	if !res.Changed {
		state += " (it was already)"
	}
	fmt.Fprintf(stdout, "%s: %s\n", *addr, state)
	return nil
}
