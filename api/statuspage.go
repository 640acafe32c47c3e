package api

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"regexp"
	"time"
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
