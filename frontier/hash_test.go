package frontier

import "testing"

func TestHashing(t *testing.T) {
	if Fingerprint("http://a.test/") != Fingerprint("http://a.test/") {
		t.Fatal("Fingerprint not deterministic")
	}
	if Fingerprint("http://a.test/") == Fingerprint("http://a.test/x") {
		t.Fatal("Fingerprint collides on different URLs")
	}
	if HostHash("Example.COM:8080") != HostHash("example.com:8080") {
		t.Fatal("HostHash must ignore case")
	}
	if HostHash("example.com") == HostHash("example.com:8080") {
		t.Fatal("HostHash must include the port")
	}
	tests := []struct {
		hash   uint64
		nphase int
		want   int
	}{
		{12345, 0, 0},
		{12345, 1, 0},
		{12345, -3, 0},
		{12345, 7, 12345 % 7},
		{^uint64(0), 3, int(^uint64(0) % 3)},
		{9, 3, 0},
	}
	for _, tc := range tests {
		if got := PhaseOf(tc.hash, tc.nphase); got != tc.want {
			t.Errorf("PhaseOf(%d, %d) = %d, want %d", tc.hash, tc.nphase, got, tc.want)
		}
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{InList: "in_list", InProgress: "in_progress", Completed: "completed", Stalled: "stalled", 0: "state(0)", 9: "state(9)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", s, got, want)
		}
	}
}
