package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/phasecrawl/phasecrawl/node"
)

// apiClient talks to a node's HTTP API.
var apiClient = &http.Client{Timeout: 60 * time.Second}

// seedClient posts seeds: a large file streams for as long as the node takes to add it.
var seedClient = &http.Client{Timeout: 30 * time.Minute}

// tokenEnv names the environment variable with the API token file (the node's
// api_token_file key has the same variable).
const tokenEnv = "PHASECRAWL_API_TOKEN_FILE"

// readToken returns the first line of the token file, trimmed. Errors never show the content.
func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", fmt.Errorf("token file %s: the first line is empty", path)
	}
	return tok, nil
}

func nodeURL(addr, path string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/") + path
}

func cmdSeed(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("node", "127.0.0.1:7070", "node API address")
	file := fs.String("f", "", "file with one URL a line (- for standard input)")
	tokenFile := fs.String("token-file", "", "file with the node's API bearer token (default: $"+tokenEnv+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tokenFile == "" {
		*tokenFile = os.Getenv(tokenEnv)
	}
	var argBody bytes.Buffer
	for _, u := range fs.Args() {
		argBody.WriteString(u + "\n")
	}
	var body io.Reader = &argBody
	if *file != "" {
		var r io.Reader = os.Stdin
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
	req, err := http.NewRequest(http.MethodPost, nodeURL(*addr, "/v1/seeds"), body)
	if err != nil {
		return fmt.Errorf("post seeds to %s: %w", *addr, err)
	}
	req.Header.Set("Content-Type", "text/plain")
	if *tokenFile != "" {
		tok, err := readToken(*tokenFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := seedClient.Do(req)
	if err != nil {
		return fmt.Errorf("post seeds to %s: %w", *addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("node %s refused the seeds (401): give its API token with --token-file or $%s", *addr, tokenEnv)
	}
	var res node.SeedResult
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("node answered %s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	fmt.Fprintf(stdout, "%d given, %d new\n", res.Given, res.Added)
	for _, b := range res.Bad {
		fmt.Fprintf(stdout, "line %d: %s: %s\n", b.Line, b.URL, b.Error)
	}
	if more := res.BadTotal - len(res.Bad); more > 0 {
		fmt.Fprintf(stdout, "... and %d more bad lines\n", more)
	}
	if res.Error != "" {
		return fmt.Errorf("node answered %s: %s", resp.Status, res.Error)
	}
	if bad := max(res.BadTotal, len(res.Bad)); bad > 0 {
		return fmt.Errorf("%d seeds refused", bad)
	}
	return nil
}

func cmdStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("node", "127.0.0.1:7070", "node API address")
	asJSON := fs.Bool("json", false, "print the raw JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	resp, err := apiClient.Get(nodeURL(*addr, "/v1/status"))
	if err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status of %s: %s: %s", *addr, resp.Status, strings.TrimSpace(string(data)))
	}
	if *asJSON {
		_, err := stdout.Write(data)
		return err
	}
	var s node.Status
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("status of %s: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "node      %s (up %.0fs, phase %d of %d)\n", s.Node, s.UptimeS, s.Phase.Current, s.Phase.NPhase)
	fmt.Fprintf(stdout, "fetched   %d pages, %d bytes\n", s.PagesFetched, s.BytesFetched)
	fmt.Fprintf(stdout, "frontier  in_list %d  in_progress %d  completed %d  stalled %d\n", s.Frontier.InList, s.Frontier.InProgress, s.Frontier.Completed, s.Frontier.Stalled)
	fmt.Fprintf(stdout, "bucket    free %d  queuing %d  fetching %d  timewait %d\n", s.Bucket.Free, s.Bucket.Queuing, s.Bucket.Fetching, s.Bucket.TimeWait)
	if s.Paused {
		fmt.Fprintf(stdout, "paused    no new request starts (phasecrawl resume)\n")
	}
	if s.Budget.Reached != "" {
		fmt.Fprintf(stdout, "budget    spent (%s): no new request starts\n", s.Budget.Reached)
	}
	return nil
}
