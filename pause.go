package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// cmdPause pauses (name "pause") or resumes (name "resume") a node through its API.
func cmdPause(name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("node", "127.0.0.1:7070", "node API address")
	tokenFile := fs.String("token-file", "", "file with the node's API bearer token (default: $"+tokenEnv+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	if *tokenFile == "" {
		*tokenFile = os.Getenv(tokenEnv)
	}
	req, err := http.NewRequest(http.MethodPost, nodeURL(*addr, "/v1/"+name), nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, *addr, err)
	}
	if *tokenFile != "" {
		tok, err := readToken(*tokenFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, *addr, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("node %s refused (401): give its API token with --token-file or $%s", *addr, tokenEnv)
	}
	var res struct{ Paused, Changed bool }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &res) != nil {
		return fmt.Errorf("node %s answered %s: %s", *addr, resp.Status, strings.TrimSpace(string(data)))
	}
	state := map[bool]string{true: "paused", false: "running"}[res.Paused]
	if !res.Changed {
		state += " (it was already)"
	}
	fmt.Fprintf(stdout, "%s: %s\n", *addr, state)
	return nil
}
