package launcher

import (
	"testing"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

func TestSniffFamily(t *testing.T) {
	for _, tc := range []struct {
		userData string
		want     nodejoinv1alpha1.AMIFamily
	}{
		{"  [settings.kubernetes]\ncluster-name = \"c\"\n", nodejoinv1alpha1.AMIFamilyBottlerocket},
		{"#!/bin/bash\n/etc/eks/bootstrap.sh c\n", nodejoinv1alpha1.AMIFamilyAmazonLinux2},
		{"MIME-Version: 1.0\n", nodejoinv1alpha1.AMIFamilyAmazonLinux2023},
		{"", nodejoinv1alpha1.AMIFamilyAmazonLinux2023},
	} {
		if got := sniffFamily([]byte(tc.userData)); got != tc.want {
			t.Errorf("sniffFamily(%q) = %s, want %s", tc.userData, got, tc.want)
		}
	}
}
