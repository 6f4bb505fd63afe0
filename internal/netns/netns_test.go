package netns

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestCheckOverlap(t *testing.T) {
	host := []net.Addr{
		&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
		&net.IPNet{IP: net.ParseIP("192.0.2.15"), Mask: net.CIDRMask(24, 32)},
		&net.IPNet{IP: net.ParseIP("fe80::1"), Mask: net.CIDRMask(64, 128)},
	}
	tests := []struct {
		prefix  string
		wantErr string
	}{
		{"198.18.0.0/24", ""},
		{"192.0.2.0/24", "overlaps the host's network 192.0.2.0/24"},
		{"192.0.0.0/16", "overlaps the host's network 192.0.2.0/24"},
		{"192.0.2.128/25", "overlaps"},
		{"127.0.0.0/8", ""}, // loopback stays private to each namespace
	}
	for _, tt := range tests {
		err := checkOverlap(netip.MustParsePrefix(tt.prefix), host)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tt.prefix, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", tt.prefix, err, tt.wantErr)
		}
	}
}

func TestWrapEntersOnlyTheNetworkNamespace(t *testing.T) {
	got := NS{Name: "nj-a"}.Wrap([]string{"kubelet", "--v=2"})
	want := []string{"nsenter", "--net=/run/netns/nj-a", "--", "kubelet", "--v=2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Wrap = %v, want %v", got, want)
	}
}
