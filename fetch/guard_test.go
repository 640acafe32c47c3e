package fetch

import (
	"errors"
	"net/netip"
	"testing"
)

func TestIsPrivateAddr(t *testing.T) {
	tests := []struct {
		ip      string
		private bool
	}{
		{"127.0.0.1", true}, {"127.255.0.9", true}, {"::1", true},
		{"10.0.0.1", true}, {"172.16.0.1", true}, {"172.31.255.255", true}, {"192.168.1.1", true},
		{"100.64.0.1", true}, {"100.127.255.254", true},
		{"169.254.169.254", true}, {"169.254.0.1", true}, {"fe80::1", true},
		{"fc00::1", true}, {"fd12:3456::1", true},
		{"0.0.0.0", true}, {"::", true}, {"0.1.2.3", true},
		{"224.0.0.1", true}, {"239.1.1.1", true}, {"ff02::1", true}, {"255.255.255.255", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"64:ff9b::a9fe:a9fe", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"172.32.0.1", false}, {"100.128.0.1", false},
		{"2606:4700:4700::1111", false}, {"::ffff:8.8.8.8", false}, {"64:ff9b::808:808", false},
		{"93.184.216.34", false},
	}
	for _, tt := range tests {
		if got := IsPrivateAddr(netip.MustParseAddr(tt.ip)); got != tt.private {
			t.Errorf("IsPrivateAddr(%s) = %v, want %v", tt.ip, got, tt.private)
		}
	}
	if !IsPrivateAddr(netip.Addr{}) {
		t.Error("invalid address must count as private")
	}
	err := error(&PrivateAddressError{Host: "h", IP: netip.MustParseAddr("10.0.0.1")})
	if !errors.Is(err, ErrPrivateAddress) {
		t.Error("PrivateAddressError does not match ErrPrivateAddress")
	}
}

func TestDialControlRefusesPrivate(t *testing.T) {
	c := DefaultClientConfig()
	cl, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctl := cl.dialer.ControlContext
	if ctl == nil {
		t.Fatal("no dial-time guard when AllowPrivate is false")
	}
	if err := ctl(t.Context(), "tcp4", "169.254.169.254:80", nil); !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("metadata address: %v", err)
	}
	if err := ctl(t.Context(), "tcp4", "8.8.8.8:80", nil); err != nil {
		t.Fatalf("public address: %v", err)
	}
}
