package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// statusPage is GET /: one HTML page, no external asset, whose script polls
// /v1/status, /v1/crawl-log and /v1/members.
//
//go:embed statuspage.html
var statusPage []byte

// statusPageCSP allows the page's own inline script and style (by hash) and
// requests to this origin only.
var statusPageCSP = func() string {
	hash := func(tag string) string {
		m := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`).FindSubmatch(statusPage)
		if m == nil {
			return "'none'"
		}
		sum := sha256.Sum256(m[1])
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	return "default-src 'none'; script-src " + hash("script") + "; style-src " + hash("style") +
		"; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

func serveStatusPage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", statusPageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "status.html", time.Time{}, bytes.NewReader(statusPage))
}

// errorsByKind reads phasecrawl_fetch_errors_total by kind.
func (n *Node) errorsByKind() map[string]int64 {
	out := map[string]int64{}
	ch := make(chan prometheus.Metric, 16)
	go func() {
		n.m.FetchErrors.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil || d.Counter == nil {
			continue
		}
		for _, l := range d.Label {
			if l.GetName() == "kind" {
				out[l.GetValue()] = int64(d.Counter.GetValue())
			}
		}
	}
	return out
}

// Crawl-log tail limits (GET /v1/crawl-log).
const (
	crawlLogDefaultLines = 50
	crawlLogMaxLines     = 1000
	crawlLogMaxRead      = 4 << 20 // bytes read back from the end of the file at most
)

// CrawlLogTail answers GET /v1/crawl-log: the last lines of the crawl log
// (as written: JSON objects), oldest first.
type CrawlLogTail struct {
	Lines []json.RawMessage `json:"lines"`
}

// handleCrawlLog serves GET /v1/crawl-log?n=N: the last N (default 50, at
// most 1000) lines of the crawl log written to the file so far.
func (n *Node) handleCrawlLog(w http.ResponseWriter, r *http.Request) {
	k := crawlLogDefaultLines
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > crawlLogMaxLines {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("n=%q: must be a whole number in 1..%d", s, crawlLogMaxLines)})
			return
		}
		k = v
	}
	lines, err := TailCrawlLog(filepath.Join(n.cfg.Data, crawlLogName), k)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, CrawlLogTail{Lines: lines})
}

// TailCrawlLog returns the last k whole lines of the crawl log at path that
// are JSON objects, oldest first, reading at most 4 MiB back from its end.
// A missing file has no lines.
func TailCrawlLog(path string, k int) ([]json.RawMessage, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return []json.RawMessage{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("crawl log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("crawl log: %w", err)
	}
	const chunk = 64 << 10
	end := fi.Size()
	pos := end
	var data []byte
	for pos > 0 && end-pos < crawlLogMaxRead && bytes.Count(data, []byte{'\n'}) <= k {
		size := min(int64(chunk), pos)
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, pos-size); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("crawl log %s: %w", path, err)
		}
		pos -= size
		data = append(buf, data...)
	}
	// Whole lines only: drop a torn last line, and the first when the read
	// began inside it.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	} else {
		data = nil
	}
	if pos > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	out := []json.RawMessage{}
	for len(data) > 0 && len(out) < k {
		line := data
		i := bytes.LastIndexByte(data, '\n')
		if i >= 0 {
			line, data = data[i+1:], data[:i]
		} else {
			data = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] == '{' && json.Valid(line) {
			out = append(out, json.RawMessage(bytes.Clone(line)))
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// MemberView is one member in GET /v1/members: what gossip says of it and
// its own /v1/status (asked by this node), or why that failed.
type MemberView struct {
	MemberStatus
	Self   bool    `json:"self,omitempty"`
	Status *Status `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// membersTimeout bounds how long GET /v1/members waits for a member's status.
const membersTimeout = 2 * time.Second

// maxMemberStatus bounds a member's /v1/status answer.
const maxMemberStatus = 1 << 20

// handleMembers serves GET /v1/members: the members this node knows, each
// alive one with its own status (phase, pages, paused), asked at its API
// address. A node alone lists itself.
func (n *Node) handleMembers(w http.ResponseWriter, r *http.Request) {
	self := n.Status()
	members := self.Members
	if len(members) == 0 {
		api := ""
		if a := n.Addr(); a != nil {
			api = a.String()
		}
		members = []MemberStatus{{Name: n.cfg.Name, API: api, State: "alive"}}
	}
	views := make([]MemberView, len(members))
	ctx, cancel := context.WithTimeout(r.Context(), membersTimeout)
	defer cancel()
	client := &http.Client{Timeout: membersTimeout}
	var wg sync.WaitGroup
	for i, m := range members {
		views[i].MemberStatus = m
		switch {
		case m.Name == n.cfg.Name:
			views[i].Self = true
			st := self
			st.Members = nil // said once, at the top
			views[i].Status = &st
		case m.State != "alive" || m.API == "":
		default:
			wg.Add(1)
			go func(v *MemberView) {
				defer wg.Done()
				st, err := memberStatus(ctx, client, v.API)
				if err != nil {
					v.Error = err.Error()
					return
				}
				st.Members = nil
				v.Status = st
			}(&views[i])
		}
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, map[string]any{"members": views})
}

// memberStatus asks the member whose API listens at api for its status.
func memberStatus(ctx context.Context, client *http.Client, api string) (*Status, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+api+"/v1/status", nil)
	if err != nil {
		return nil, fmt.Errorf("member API %q: %w", api, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("member status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("member status: %s answered %s", api, resp.Status)
	}
	var st Status
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMemberStatus)).Decode(&st); err != nil {
		return nil, fmt.Errorf("member status from %s: %w", api, err)
	}
	return &st, nil
}
