package ops

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/internal/wait"
)

// chromium returns the headless browser to drive: Debian's chromium
// (.ci/run installs it). Missing, the test fails on CI (CI=true) and is
// skipped elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: .ci/run installs Debian's chromium")
	}
	t.Skip("chromium not found (apt-get install chromium); on CI this fails")
	return ""
}

// browse runs the headless browser on url with args (--dump-dom,
// --screenshot=FILE), letting the page's script run for 3 s of virtual
// time. The browser reaches nothing but loopback: every other name fails
// to resolve, and its background services are off.
func browse(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--disable-dev-shm-usage",
		"--no-proxy-server", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1100", "--virtual-time-budget=3000",
		// The page is the node's own: no sandbox, which needs root's
		// consent or user namespaces a CI container may not have.
		"--no-sandbox",
	}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// cell returns the text of the element with id in a dumped DOM.
func cell(t *testing.T, dom []byte, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("no element %q in the page:\n%s", id, dom)
	}
	return string(m[1])
}

// number parses a rendered count ("12,345").
func number(t *testing.T, dom []byte, id string) int64 {
	t.Helper()
	s := cell(t, dom, id)
	v, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	if err != nil {
		t.Fatalf("element %q shows %q, not a number", id, s)
	}
	return v
}

// TestStatusPageInBrowser loads GET / in headless chromium while a node
// crawls the synthetic web: the page renders the node's figures and the
// crawl log, they change between two loads, and a screenshot is taken.
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromium(t)
	srv := web(t, 30, 6000)
	// A slow crawl (200 ms between two requests to a host, ~200 pages a
	// host: 40 s at least) so that it is still running for both loads.
	cfg := srv.NodeConfig("status-page", t.TempDir(), 200*time.Millisecond)
	cfg.Workers = 16
	cfg.Recrawl.Interval = time.Hour // a recurring crawl: the page shows its plan
	n, _ := runNode(t, cfg, nil)
	url := "http://" + n.Addr().String() + "/"
	wait.For(t, time.Minute, "first pages", func() bool { return status(t, n).PagesFetched >= 20 })

	dom1 := browse(t, bin, url, "--dump-dom")
	pages1 := number(t, dom1, "pages")
	if pages1 < 20 {
		t.Fatalf("first load shows %d pages fetched, the node had fetched 20 or more", pages1)
	}
	if s := cell(t, dom1, "state"); s != "crawling" {
		t.Fatalf("state shows %q, want crawling", s)
	}
	if number(t, dom1, "f_completed") < 20 || number(t, dom1, "b_free") == 0 {
		t.Fatalf("frontier or bucket figures not rendered:\n%s", dom1)
	}
	if s := cell(t, dom1, "phase"); s != "0 of 1" {
		t.Fatalf("phase shows %q, want 0 of 1 (a node alone)", s)
	}
	if s := cell(t, dom1, "rate"); !regexp.MustCompile(`^\d+\.\d$`).MatchString(s) {
		t.Fatalf("pages/s shows %q", s)
	}
	if r, err := strconv.ParseFloat(cell(t, dom1, "rate"), 64); err != nil || r <= 0 {
		t.Fatalf("pages/s on the first load shows %q, want the node's rate (above 0)", cell(t, dom1, "rate"))
	}
	// The pages/s chart: an inline SVG line of the last 15 minutes' 90
	// intervals, the last ones above the axis (pages were fetched).
	line := regexp.MustCompile(`<polyline id="chartline" points="([^"]*)"`).FindSubmatch(dom1)
	if line == nil {
		t.Fatalf("no pages/s chart in the page:\n%s", dom1)
	}
	if pts := strings.Fields(string(line[1])); len(pts) != 90 || strings.HasSuffix(pts[89], ",112.0") && strings.HasSuffix(pts[88], ",112.0") {
		t.Fatalf("chart line has %d points, the last ones %v: want 90, the last above the axis (y 112)", len(pts), pts[max(0, len(pts)-2):])
	}
	hosts := regexp.MustCompile(`(?s)<table id="hosts">(.*?)</table>`).FindSubmatch(dom1)
	if hosts == nil || !bytes.Contains(hosts[1], []byte(".synth.test")) || !bytes.Contains(hosts[1], []byte("queued")) {
		t.Fatalf("the top hosts table is not rendered:\n%s", dom1)
	}
	if s := cell(t, dom1, "roundend"); !strings.Contains(s, "first round ends in about") {
		t.Fatalf("the revisit plan does not say when the first round ends: %q", s)
	}
	if s := cell(t, dom1, "node"); s != "status-page" {
		t.Fatalf("node name shows %q", s)
	}
	if !bytes.Contains(dom1, []byte(".synth.test/")) {
		t.Fatalf("no crawl log line rendered:\n%s", dom1)
	}
	if plan := regexp.MustCompile(`(?s)<table id="plan">(.*?)</table>`).FindSubmatch(dom1); plan == nil ||
		!bytes.Contains(plan[1], []byte(".synth.test")) || !bytes.Contains(plan[1], []byte("1h0m0s")) {
		t.Fatalf("the revisit plan (hosts revisited every 1h) is not rendered:\n%s", dom1)
	}

	wait.For(t, time.Minute, "more pages", func() bool { return status(t, n).PagesFetched >= pages1+50 })
	dom2 := browse(t, bin, url, "--dump-dom")
	pages2 := number(t, dom2, "pages")
	if pages2 < pages1+50 {
		t.Fatalf("second load shows %d pages fetched, first %d: the figures did not follow the crawl", pages2, pages1)
	}
	if st := status(t, n); st.Done {
		t.Fatalf("the crawl ended during the test (%d pages): make the web larger", st.PagesFetched)
	}

	shot := filepath.Join(t.TempDir(), "status.png")
	browse(t, bin, url, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", shot, err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
		t.Fatalf("screenshot is %dx%d", b.Dx(), b.Dy())
	}
	if c := colours(img); c < 16 {
		t.Fatalf("screenshot has %d colours: a blank page?", c)
	}
	fi, _ := f.Stat()
	t.Logf("pages shown: %d then %d; screenshot %s (%d bytes, %d colours)", pages1, pages2, shot, fi.Size(), colours(img))
}

// colours counts the distinct colours of img (up to 4096).
func colours(img image.Image) int {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y && len(seen) < 4096; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	return len(seen)
}
