package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phasecrawl/phasecrawl/frontier"
	"github.com/phasecrawl/phasecrawl/salvage"
)

// TestSalvageFlags: phasecrawl salvage validates its flags before it opens
// or sends anything, with errors that name the flag.
func TestSalvageFlags(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := frontier.Open(frontier.Options{Path: filepath.Join(data, salvage.FrontierFile), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Add(context.Background(), []frontier.NewURL{{URL: "http://a.test/x", Depth: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(keyFileEnv, "")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no data", []string{"--node", "127.0.0.1:1", "--cluster-key-file", key}, 1, "--data: required"},
		{"no node", []string{"--data", data, "--cluster-key-file", key}, 1, `--node="": required`},
		{"node without port", []string{"--data", data, "--node", "127.0.0.1", "--cluster-key-file", key}, 1, "--node=\"127.0.0.1\": want HOST:PORT"},
		{"node bad port", []string{"--data", data, "--node", "127.0.0.1:99999", "--cluster-key-file", key}, 1, "port \"99999\" must be 1..65535"},
		{"node no host", []string{"--data", data, "--node", ":7947", "--cluster-key-file", key}, 1, "empty host"},
		{"no key", []string{"--data", data, "--node", "127.0.0.1:1"}, 1, "--cluster-key-file: required"},
		{"missing key file", []string{"--data", data, "--node", "127.0.0.1:1", "--cluster-key-file", filepath.Join(dir, "none")}, 1, "--cluster-key-file"},
		{"bad batch", []string{"--data", data, "--node", "127.0.0.1:1", "--cluster-key-file", key, "--batch", "0"}, 1, "--batch=0: must be 1..100000"},
		{"bad attempts", []string{"--data", data, "--node", "127.0.0.1:1", "--cluster-key-file", key, "--attempts", "101"}, 1, "--attempts=101: must be 1..100"},
		{"stray argument", []string{"--data", data, "extra"}, 1, "unexpected arguments"},
		{"not a data dir", []string{"--data", dir, "--node", "127.0.0.1:1", "--cluster-key-file", key}, 1, "not a phasecrawl data directory"},
		{"unknown flag", []string{"--nope"}, 1, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Run(append([]string{"salvage"}, tc.args...), nil, &out, &errOut)
			if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut.String(), tc.code, tc.want)
			}
		})
	}

	// A dry run reads the directory and needs neither --node nor a key.
	var out, errOut bytes.Buffer
	if code := Run([]string{"salvage", "--data", data, "--dry-run", "--json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut.String())
	}
	var sum salvage.Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.Frontier.InList != 1 || sum.Kinds["moved"] != 1 || !sum.DryRun {
		t.Errorf("dry run summary %s (%v)", out.String(), err)
	}
}
