package launcher

import (
	"bytes"
	"compress/gzip"
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
		{"# a comment\n\nsettings.kubernetes.cluster-name = 'c'\n", nodejoinv1alpha1.AMIFamilyBottlerocket},
		{gzipped("#cloud-config\nwrite_files:\n- content: |\n    /etc/eks/bootstrap.sh \"$C\"\n"), nodejoinv1alpha1.AMIFamilyAmazonLinux2},
		{"#!/bin/bash\nsettings.x=1\n", nodejoinv1alpha1.AMIFamilyAmazonLinux2023},
		{"", nodejoinv1alpha1.AMIFamilyAmazonLinux2023},
	} {
		if got := SniffFamily([]byte(tc.userData)); got != tc.want {
			t.Errorf("SniffFamily(%q) = %s, want %s", tc.userData, got, tc.want)
		}
	}
}

func gzipped(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return b.String()
}
