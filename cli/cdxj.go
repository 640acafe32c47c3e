package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/phasecrawl/phasecrawl/fetch/archive"
)

// cmdCDXJ writes the CDXJ index of WARC files: those of a data directory
// that have none (or all of them with --all), or the files named.
func cmdCDXJ(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cdxj", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: phasecrawl cdxj --data DIR [--all] | FILE.warc.gz...

Writes the CDXJ index (FILE.warc.gz.cdxj: "SURT timestamp {json}" lines,
sorted, as pywb and OutbackCDX load them) of the WARC files of a data
directory that have none, of all of them with --all, or of the files named;
--check checks the indexes against their files instead. A node writes the
index of each file it finishes, and after a kill -9 of the file it repairs
on start; this rebuilds any other. Flags:
`)
		fs.PrintDefaults()
	}
	data := fs.String("data", "", "data directory (its --data): index the files of DATA/warc")
	all := fs.Bool("all", false, "with --data: rewrite every index, not only the missing ones")
	check := fs.Bool("check", false, "check the indexes against their WARC files (every line points at its response record), write nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if (*data == "") == (len(files) == 0) {
		fs.Usage()
		return errors.New("give --data DIR or WARC files, not both")
	}
	if *data != "" {
		dir := filepath.Join(*data, "warc")
		if !*all && !*check {
			done, err := archive.IndexMissing(dir)
			for _, f := range done {
				fmt.Fprintf(stdout, "indexed %s\n", f)
			}
			return err
		}
		var err error
		if files, err = filepath.Glob(filepath.Join(dir, "*.warc.gz")); err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
	}
	for _, f := range files {
		if *check {
			n, err := archive.CheckCDXJ(f)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "ok %s (%d lines)\n", f, n)
			continue
		}
		if err := archive.IndexWARC(f); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "indexed %s\n", f)
	}
	return nil
}
