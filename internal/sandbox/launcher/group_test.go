package launcher

import (
	"testing"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

func TestSniffFamily(t *testing.T) {
	for _, tc := range []struct {
		userData string
		want     instance.AMIFamily
	}{
		{"  [settings.kubernetes]\ncluster-name = \"c\"\n", instance.Bottlerocket},
		{"#!/bin/bash\n/etc/eks/bootstrap.sh c\n", instance.AmazonLinux2},
		{"MIME-Version: 1.0\n", instance.AmazonLinux2023},
		{"", instance.AmazonLinux2023},
	} {
		if got := sniffFamily([]byte(tc.userData)); got != tc.want {
			t.Errorf("sniffFamily(%q) = %s, want %s", tc.userData, got, tc.want)
		}
	}
}
