package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/phasecrawl/phasecrawl/cluster/membership"
)

// TestAnnounceLeadFor: the lead a joiner allows grows with the members its
// news must reach, up to the full announce lead.
func TestAnnounceLeadFor(t *testing.T) {
	tests := []struct {
		others int
		fast   bool
		want   time.Duration
	}{
		{1, false, 800 * time.Millisecond},
		{2, false, 800 * time.Millisecond},
		{3, false, 1200 * time.Millisecond},
		{8, false, 1200 * time.Millisecond},
		{9, false, 1600 * time.Millisecond},
		{1000, false, 2 * time.Second},
		{2, true, 500 * time.Millisecond},
		{30, true, 500 * time.Millisecond},
	}
	for _, tc := range tests {
		var tune func(*memberlist.Config)
		if tc.fast {
			tune = membership.FastTimings
		}
		if got := announceLeadFor(tune, tc.others); got != tc.want {
			t.Errorf("announceLeadFor(fast %v, %d) = %v, want %v", tc.fast, tc.others, got, tc.want)
		}
	}
}
