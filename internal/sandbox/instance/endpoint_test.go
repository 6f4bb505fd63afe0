package instance

import "testing"

// Only a loopback host endpoint that differs from the instances' is relayed.
func TestRelayedEndpoint(t *testing.T) {
	for _, tc := range []struct {
		host, inst, listen, target string
		ok                         bool
	}{
		{"https://127.0.0.1:39205", "https://198.18.0.1:6443", "127.0.0.1:39205", "198.18.0.1:6443", true},
		{"https://[::1]:6443", "https://198.18.0.1:6443", "[::1]:6443", "198.18.0.1:6443", true},
		{"https://10.0.0.5:6443", "https://198.18.0.1:6443", "", "", false},
		{"https://198.18.0.1:6443", "https://198.18.0.1:6443", "", "", false},
		{"", "https://198.18.0.1:6443", "", "", false},
		{"https://localhost:6443", "https://198.18.0.1:6443", "", "", false},
	} {
		ap, target, ok := relayedEndpoint(tc.host, tc.inst)
		if ok != tc.ok || (ok && (ap.String() != tc.listen || target != tc.target)) {
			t.Errorf("relayedEndpoint(%q, %q) = %v %q %v", tc.host, tc.inst, ap, target, ok)
		}
	}
}
