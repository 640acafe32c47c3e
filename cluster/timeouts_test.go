package cluster

import (
	"testing"
	"time"

	"github.com/phasecrawl/phasecrawl/config"
)

// TestTimeoutsDefaults: a zero timeout takes the configuration's default
// (config.Default, where each is written once), a set one stays, and the
// timeouts whose zero means something keep it.
func TestTimeoutsDefaults(t *testing.T) {
	d := config.Default().Cluster
	got := Timeouts{}.withDefaults()
	want := Timeouts{LeaveTimeout: DefaultLeaveTimeout, HandoffTimeout: d.HandoffTimeout, JoinTimeout: d.JoinTimeout,
		FenceAfter: d.FenceAfter, ReconnectInterval: d.ReconnectInterval}
	if got != want {
		t.Errorf("zero timeouts: got %+v, want %+v", got, want)
	}
	set := Timeouts{LeaveTimeout: time.Second, HandoffTimeout: 2 * time.Second, JoinTimeout: 3 * time.Second, BatchDelay: 4 * time.Millisecond,
		TakeoverAfter: 5 * time.Second, FenceAfter: 6 * time.Second, ReconnectInterval: 7 * time.Second, ReconnectTimeout: 8 * time.Second}
	if got := set.withDefaults(); got != set {
		t.Errorf("set timeouts: got %+v, want them unchanged %+v", got, set)
	}
	for name, v := range map[string]time.Duration{"handoff_timeout": d.HandoffTimeout, "join_timeout": d.JoinTimeout,
		"fence_after": d.FenceAfter, "reconnect_interval": d.ReconnectInterval} {
		if v <= 0 {
			t.Errorf("config.Default's cluster.%s is %s: a zero timeout would stay zero", name, v)
		}
	}
}
