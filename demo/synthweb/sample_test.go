package synthweb

import (
	"slices"
	"testing"
)

// TestSample: breadth-first from the seeds, each URL once, plain pages and
// gzip bodies as asked, and the web's 404s and redirects among them.
func TestSample(t *testing.T) {
	for _, gz := range []bool{false, true} {
		rs, err := SampleDefault(1500, gz)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1500 {
			t.Fatalf("gzip %v: %d responses, want 1500", gz, len(rs))
		}
		c := DefaultConfig()
		c.SlowHosts = 0
		w, _ := New(c)
		seeds := w.Seeds()
		seen := map[string]bool{}
		codes := map[int]int{}
		gzipped := 0
		for i, r := range rs {
			if seen[r.URL] {
				t.Fatalf("%s sampled twice", r.URL)
			}
			seen[r.URL] = true
			if i < len(seeds) && !slices.Contains(seeds, r.URL) {
				t.Fatalf("response %d is %s, not a seed", i, r.URL)
			}
			codes[r.Code]++
			if r.Header.Get("Content-Encoding") == "gzip" {
				gzipped++
			}
		}
		if codes[200] == 0 || codes[404] == 0 || codes[301]+codes[302] == 0 {
			t.Errorf("gzip %v: status codes %v, want 200s, 404s and redirects", gz, codes)
		}
		if (gzipped > 0) != gz {
			t.Errorf("gzip %v: %d gzip bodies", gz, gzipped)
		}
	}
}
