package nodejoin

import (
	"bytes"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	var out bytes.Buffer
	err := Run(t.Context(), args, &out, &out)
	return out.String(), err
}

func TestCommandsFailWithAnActionableMessage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"up", "--nodes", "2", "--identity", "kerberos"}, `--identity "kerberos": want aws-iam or bootstrap-token`},
		{[]string{"up", "--nodes", "2", "--ami-family", "Windows"}, `--ami-family "Windows": want one of AmazonLinux2023, AmazonLinux2, Bottlerocket`},
		{[]string{"up", "--nodes", "2", "--kubelet", "vm"}, `--kubelet "vm": want real or sim`},
		{[]string{"up", "--nodes", "-1"}, `--nodes "-1": want 0 or more`},
		{[]string{"up", "-o", "xml"}, `--output "xml": want text, json or yaml`},
		{[]string{"up", "--dhcp-domain", "Corp.Example."}, `--dhcp-domain "Corp.Example.": want one DNS domain such as corp.example`},
		{[]string{"up", "--dhcp-domain", "corp.example other.example"}, `--dhcp-domain "corp.example other.example": want one DNS domain`},
		{[]string{"up", "--cert-lifetime", "30s"}, `--cert-lifetime "30s": want 0 (the controller's defaults) or at least 1m0s`},
		{[]string{"get", "nodes", "--name", "absent"}, "no cluster named absent"},
		{[]string{"add", "node", "--name", "absent"}, "start one with `nodejoin up --name absent`"},
		{[]string{"diagnose", "node", "--name", "absent", "n1"}, "no cluster named absent"},
		{[]string{"diagnose", "cluster", "--name", "absent"}, "start one with `nodejoin up --name absent`"},
		{[]string{"diagnose", "cluster", "-o", "xml"}, `--output "xml": want text, json or yaml`},
		{[]string{"export", "logs", "--name", "absent", "/tmp/x"}, "no cluster named absent"},
		{[]string{"up", "--name", "../etc"}, `cluster name "../etc" is not a plain name`},
		{[]string{"up", "--name", "Bad_Name", "--network", "loopback", "--bin-dir", "/nonexistent"}, `cluster name "Bad_Name"`},
		{[]string{"up", "--network", "carrier-pigeon", "--bin-dir", "/nonexistent"}, `network "carrier-pigeon"`},
		{[]string{"up", "--node-cidr", "198.18.0.0", "--network", "loopback"}, `--node-cidr "198.18.0.0"`},
		{[]string{"kubeconfig", "--name", "absent"}, "no cluster named absent"},
		{[]string{"up", "extra"}, `unknown command "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestDownOfAnAbsentClusterIsNotAnError(t *testing.T) {
	out, err := run(t, "down", "--name", "absent")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "cluster absent: nothing to remove") {
		t.Errorf("output = %q", out)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "nodejoin ") {
		t.Errorf("output = %q", out)
	}
}
