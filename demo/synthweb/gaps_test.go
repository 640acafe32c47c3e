package synthweb

import (
	"testing"
	"time"
)

func TestIdleGaps(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	v := func(start, end int) Visit { return Visit{Start: at(start), End: at(end)} }
	tests := []struct {
		name string
		vs   []Visit
		want GapStats
	}{
		{"none", nil, GapStats{}},
		{"one", []Visit{v(0, 5)}, GapStats{Requests: 1, First: at(0), Last: at(0), Busy: 5 * time.Millisecond}},
		{
			// out of order on purpose; gaps 5, 60 and 0 (an overlap counts 0)
			"gaps", []Visit{v(70, 80), v(0, 5), v(10, 10), v(78, 90)},
			GapStats{Requests: 4, First: at(0), Last: at(78), Busy: 27 * time.Millisecond,
				Idle: 65 * time.Millisecond, P50: 5 * time.Millisecond, P90: 60 * time.Millisecond,
				Long: 1, LongIdle: 60 * time.Millisecond},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IdleGaps(tc.vs); got != tc.want {
				t.Errorf("IdleGaps = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLastHosts(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	visits := map[string][]Visit{
		"a": {{Start: t0, End: t0.Add(time.Millisecond)}},
		"b": {{Start: t0.Add(3 * time.Second), End: t0.Add(3 * time.Second)}},
		"c": {{Start: t0.Add(2 * time.Second)}, {Start: t0.Add(time.Second)}},
	}
	hosts, stats := LastHosts(visits, 2)
	if len(hosts) != 2 || hosts[0] != "b" || hosts[1] != "c" || stats[1].Requests != 2 || !stats[1].Last.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("LastHosts = %v %+v, want b then c (2 requests, last at 2 s)", hosts, stats)
	}
	if hosts, _ := LastHosts(visits, 10); len(hosts) != 3 {
		t.Fatalf("LastHosts(10) gave %d hosts, want all 3", len(hosts))
	}
}
