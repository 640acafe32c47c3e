package node

import (
	"fmt"
	"testing"
	"time"
)

func TestLatencies(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		observe []time.Duration
		want    time.Duration
	}{
		{"unknown", nil, 0},
		{"one", []time.Duration{40 * ms}, 40 * ms},
		{"a fast answer after a slow one decays slowly", []time.Duration{40 * ms, ms}, 30 * ms},
		{"a slower answer wins at once", []time.Duration{ms, 40 * ms}, 40 * ms},
		{"fast again after a few", []time.Duration{40 * ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms, ms}, 1267053 * time.Nanosecond}, // 40ms·(3/4)^11
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLatencies()
			for _, d := range tt.observe {
				l.observe("h.test", d)
			}
			if got := l.get("h.test"); got != tt.want {
				t.Errorf("get = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLatenciesExpectUnknownHost: a host never fetched is expected to take
// what the recent answers of all hosts took (a decaying maximum); a known
// host its own time.
func TestLatenciesExpectUnknownHost(t *testing.T) {
	ms := time.Millisecond
	l := newLatencies()
	if got := l.expect("new.test"); got != 0 {
		t.Fatalf("nothing observed: expect = %v, want 0", got)
	}
	l.observe("slow.test", 80*ms)
	l.observe("fast.test", 2*ms)
	for _, tt := range []struct {
		host string
		want time.Duration
	}{
		{"slow.test", 80 * ms},
		{"fast.test", 2 * ms},
		{"new.test", 60 * ms}, // 80ms, then 3/4 of it at the fast answer
	} {
		if got := l.expect(tt.host); got != tt.want {
			t.Errorf("expect(%s) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestLatenciesBounded(t *testing.T) {
	l := newLatencies()
	for i := 0; i < maxLatencyHosts+10; i++ {
		l.observe(fmt.Sprintf("h%d.test", i), time.Millisecond)
	}
	if n := len(l.m); n > maxLatencyHosts {
		t.Fatalf("%d hosts remembered, bound %d", n, maxLatencyHosts)
	}
	if l.get(fmt.Sprintf("h%d.test", maxLatencyHosts+9)) != time.Millisecond {
		t.Fatal("the latest host was not remembered")
	}
}

func TestPrecompressed(t *testing.T) {
	tests := []struct {
		enc, ct string
		want    bool
	}{
		{"", "text/html; charset=utf-8", false},
		{"identity", "text/html", false},
		{"gzip", "text/html", true},
		{" BR ", "text/css", true},
		{"", "image/jpeg", true},
		{"", "image/svg+xml", false},
		{"", "video/mp4", true},
		{"", "application/zip", true},
		{"", "application/pdf", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got := precompressed(tt.enc, tt.ct); got != tt.want {
			t.Errorf("precompressed(%q, %q) = %v, want %v", tt.enc, tt.ct, got, tt.want)
		}
	}
}
