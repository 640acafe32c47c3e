package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/phasecrawl/phasecrawl/api"
)

// seedTimeout bounds a seed post: a large file streams for as long as the
// node takes to add it.
const seedTimeout = 30 * time.Minute

// cmdSeed posts seed URLs (the arguments, then -f FILE or standard input)
// to a running node, and prints how many it took and the lines it refused.
func cmdSeed(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := nodeFlag(fs)
	file := fs.String("f", "", "file with one URL a line (- for standard input)")
	tokenFile := tokenFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var argBody bytes.Buffer
	for _, u := range fs.Args() {
		argBody.WriteString(u + "\n")
	}
	var body io.Reader = &argBody
	if *file != "" {
		r := stdin
		if *file != "-" {
			f, err := os.Open(*file)
			if err != nil {
				return fmt.Errorf("seeds file: %w", err)
			}
			defer f.Close()
			r = f
		}
		body = io.MultiReader(&argBody, r) // streamed: the node adds the URLs as they arrive
	} else if argBody.Len() == 0 {
		return fmt.Errorf("no URLs: give them as arguments or with -f FILE")
	}
	c, err := writeClient(*addr, *tokenFile, seedTimeout)
	if err != nil {
		return err
	}
	res, err := c.Seeds(context.Background(), body)
	if errors.Is(err, api.ErrUnauthorized) {
		return fmt.Errorf("node %s refused the seeds (401): %s", *addr, tokenHint)
	}
	var se *api.StatusError
	if err != nil && (!errors.As(err, &se) || res.Error == "") {
		return fmt.Errorf("post seeds to %s: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "%d given, %d new\n", res.Given, res.Added)
	for _, b := range res.Bad {
		fmt.Fprintf(stdout, "line %d: %s: %s\n", b.Line, b.URL, b.Error)
	}
	if more := res.BadTotal - len(res.Bad); more > 0 {
		fmt.Fprintf(stdout, "... and %d more bad lines\n", more)
	}
	if err != nil {
		return fmt.Errorf("node %s %w", *addr, err)
	}
	if bad := max(res.BadTotal, len(res.Bad)); bad > 0 {
		return fmt.Errorf("%d seeds refused", bad)
	}
	return nil
}
