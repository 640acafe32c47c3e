package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Report is the three reports of a node or a cluster (phasecrawl report
// --json): hosts, MIME types and status codes.
type Report struct {
	Hosts       []Host  `json:"hosts"`
	MIMETypes   []Count `json:"mimetypes"`
	StatusCodes []Count `json:"statuscodes"`
}

// Merge adds b's figures to a's: hosts by name (a host several members
// report, as after a rebalance, sums), MIME types and codes by key. The
// result is unsorted.
func Merge(a, b Report) Report {
	hosts := map[string]int{}
	for i, h := range a.Hosts {
		hosts[h.Host] = i
	}
	for _, h := range b.Hosts {
		i, ok := hosts[h.Host]
		if !ok {
			hosts[h.Host] = len(a.Hosts)
			a.Hosts = append(a.Hosts, h)
			continue
		}
		x := &a.Hosts[i]
		x.Requests += h.Requests
		x.Pages += h.Pages
		x.Bytes += h.Bytes
		x.Errors += h.Errors
		x.Queued += h.Queued
		x.Refused += h.Refused
		x.ErrorsByKind = mergeKinds(x.ErrorsByKind, h.ErrorsByKind)
		x.RefusedByReason = mergeKinds(x.RefusedByReason, h.RefusedByReason)
		if h.FirstFetch != nil && (x.FirstFetch == nil || h.FirstFetch.Before(*x.FirstFetch)) {
			x.FirstFetch = h.FirstFetch
		}
		if h.LastFetch != nil && (x.LastFetch == nil || h.LastFetch.After(*x.LastFetch)) {
			x.LastFetch = h.LastFetch
		}
	}
	a.MIMETypes = mergeCounts(a.MIMETypes, b.MIMETypes)
	a.StatusCodes = mergeCounts(a.StatusCodes, b.StatusCodes)
	return a
}

func mergeKinds(a, b map[string]int64) map[string]int64 {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]int64, len(a)+len(b))
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

func mergeCounts(a, b []Count) []Count {
	idx := map[string]int{}
	out := append([]Count(nil), a...)
	for i, c := range out {
		idx[c.Key] = i
	}
	for _, c := range b {
		if i, ok := idx[c.Key]; ok {
			out[i].Pages += c.Pages
			out[i].Bytes += c.Bytes
			continue
		}
		idx[c.Key] = len(out)
		out = append(out, c)
	}
	return out
}

// kindList renders a map of counts as "a=3 b=1" (largest first).
func kindList(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if m[ks[i]] != m[ks[j]] {
			return m[ks[i]] > m[ks[j]]
		}
		return ks[i] < ks[j]
	})
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// table writes rows as columns two spaces apart, the first numeric ones
// right-aligned, the others left-aligned (the last one not padded).
func table(w io.Writer, numeric int, rows [][]string) error {
	if len(rows) == 0 {
		return nil
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len(c))
			switch {
			case i < numeric:
				b.WriteString(pad + c)
			case i == len(r)-1:
				b.WriteString(c)
			default:
				b.WriteString(c + pad)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteHosts writes the hosts report as a text table.
func WriteHosts(w io.Writer, hs []Host) error {
	rows := [][]string{{"queued", "requests", "pages", "bytes", "errors", "refused", "host", "first fetch", "last fetch", "errors by kind", "refused by reason"}}
	for _, h := range hs {
		rows = append(rows, []string{fmt.Sprint(h.Queued), fmt.Sprint(h.Requests), fmt.Sprint(h.Pages), fmt.Sprint(h.Bytes), fmt.Sprint(h.Errors),
			fmt.Sprint(h.Refused), h.Host, when(h.FirstFetch), when(h.LastFetch), kindList(h.ErrorsByKind), kindList(h.RefusedByReason)})
	}
	return table(w, 6, rows)
}

// WriteCounts writes a MIME-type or status-code report as a text table
// whose key column is named name.
func WriteCounts(w io.Writer, name string, cs []Count) error {
	rows := [][]string{{"pages", "bytes", name}}
	for _, c := range cs {
		rows = append(rows, []string{fmt.Sprint(c.Pages), fmt.Sprint(c.Bytes), c.Key})
	}
	return table(w, 2, rows)
}

// WriteText writes the three reports as text tables, each under a title.
func WriteText(w io.Writer, r Report) error {
	fmt.Fprintf(w, "== hosts (%d)\n", len(r.Hosts))
	if err := WriteHosts(w, r.Hosts); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== MIME types (%d)\n", len(r.MIMETypes))
	if err := WriteCounts(w, "mime type", r.MIMETypes); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== status codes (%d)\n", len(r.StatusCodes))
	return WriteCounts(w, "status", r.StatusCodes)
}
