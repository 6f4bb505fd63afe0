package launcher

import (
	"strings"
	"testing"
)

func TestRenderUserData(t *testing.T) {
	fields := UserDataFields{
		ClusterName: "demo", APIServerEndpoint: "https://10.0.0.1:6443", CertificateAuthority: "LS0tCg==",
		ServiceCIDR: "10.100.0.0/16", ClusterDNS: "10.100.0.10",
	}
	gz := gzipped("#cloud-config\nCLUSTER_NAME={{.ClusterName}}\n")
	for _, tc := range []struct {
		name, data, want, err string
		ca                    string // instead of fields' CertificateAuthority
	}{
		{name: "every field", data: "/etc/eks/bootstrap.sh {{.ClusterName}} --apiserver-endpoint {{.APIServerEndpoint}} " +
			"--b64-cluster-ca {{.CertificateAuthority}} --dns-cluster-ip {{.ClusterDNS}} --service-ipv4-cidr {{.ServiceCIDR}}\n",
			want: "/etc/eks/bootstrap.sh demo --apiserver-endpoint https://10.0.0.1:6443 --b64-cluster-ca LS0tCg== " +
				"--dns-cluster-ip 10.100.0.10 --service-ipv4-cidr 10.100.0.0/16\n"},
		{name: "nothing to fill in stays as it is", data: "MIME-Version: 1.0\r\n${CLUSTER} $X\n", want: "MIME-Version: 1.0\r\n${CLUSTER} $X\n"},
		{name: "a template comment renders to nothing", data: "{{/* seed 000: the name replaced */ -}}\nname={{.ClusterName}}\n", want: "name=demo\n"},
		{name: "a literal {{", data: `x={{"{{"}}y` + "\n", want: "x={{y\n"},
		{name: "gzip passed on untouched", data: gz, want: gz},
		{name: "unknown field, near a known one", data: "#!/bin/bash\n\n/etc/eks/bootstrap.sh {{.ClusterNmae}}\n",
			err: "user data f.mime, line 3: unknown template field .ClusterNmae: did you mean .ClusterName? (the fields are .APIServerEndpoint, .CertificateAuthority, .ClusterDNS, .ClusterName, .ServiceCIDR)"},
		{name: "unknown field, far from any", data: "a\n{{if .Region}}x{{end}}\n",
			err: "user data f.mime, line 2: unknown template field .Region: the fields are .APIServerEndpoint"},
		{name: "unknown field through $", data: "{{with .ClusterName}}{{$.Zone}}{{end}}", err: "line 1: unknown template field .Zone"},
		{name: "a field of a field", data: "\n\n{{.ClusterName.Short}}", err: "line 3: unknown template field .ClusterName.Short: .ClusterName is a string"},
		{name: "a field of a parenthesized field", data: "{{(.ClusterName).Short}}", err: "line 1: unknown template field (.ClusterName).Short"},
		{name: "unknown field in a defined template", data: "{{define \"x\"}}\n{{.Zone}}{{end}}{{template \"x\" .}}",
			err: "line 2: unknown template field .Zone"},
		{name: "defined templates and else branches", data: "{{define \"x\"}}{{.ClusterName}}{{end}}{{if .ServiceCIDR}}{{template \"x\" .}}{{else}}none{{end}}",
			want: "demo"},
		{name: "not template text", data: "a\nb {{.ClusterName\n", err: "user data f.mime is not valid template text: f.mime:"},
		{name: "empty", data: " \n", err: "user data f.mime is empty"},
		{name: "too big", data: strings.Repeat("x", MaxUserData+1), err: "16385 bytes, more than EC2's 16384 (gzip it"},
		{name: "too big once filled in", data: strings.Repeat("{{.CertificateAuthority}}", 10), ca: strings.Repeat("A", 2000),
			err: "20000 bytes once its fields are filled in, more than EC2's 16384"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fields
			if tc.ca != "" {
				f.CertificateAuthority = tc.ca
			}
			got, err := RenderUserData("f.mime", []byte(tc.data), f)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("RenderUserData = %q, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("RenderUserData = %q, %v; want %q", got, err, tc.want)
			}
			if err := CheckUserData("f.mime", []byte(tc.data)); err != nil {
				t.Errorf("CheckUserData = %v, want nil", err)
			}
		})
	}
}
