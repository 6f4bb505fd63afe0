package main

import (
	"slices"
	"testing"
)

// The busybox image has every applet in /bin as upstream's does (the Sysctls conformance
// test runs /bin/sysctl; Debian puts sysctl in /sbin) besides Debian's paths, agnhost's
// userland has Debian's paths only, and neither shadows a command the layer already has.
func TestAppletPaths(t *testing.T) {
	list := []string{"bin/sh", "sbin/sysctl", "usr/bin/env", "bin/nc", "usr/sbin/nc"}
	has := func(p string) bool { return p == "usr/bin/nc" }
	tests := []struct {
		name string
		flat bool
		want []string
	}{
		{"busybox image: every applet in /bin too", true, []string{"bin/sh", "sbin/sysctl", "bin/sysctl", "usr/bin/env", "bin/env"}},
		{"userland: Debian's paths", false, []string{"bin/sh", "sbin/sysctl", "usr/bin/env"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := appletPaths(list, tt.flat, has); !slices.Equal(got, tt.want) {
				t.Errorf("appletPaths = %q, want %q", got, tt.want)
			}
		})
	}
}
