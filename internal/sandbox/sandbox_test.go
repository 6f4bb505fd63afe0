package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNodeOptionsValidate(t *testing.T) {
	tests := []struct {
		o      NodeOptions
		option string // "" for valid
	}{
		{NodeOptions{Count: 2}, ""},
		{NodeOptions{Count: -1}, "nodes"},
		{NodeOptions{AMIFamily: "Windows"}, "ami-family"},
		{NodeOptions{Identity: "kerberos"}, "identity"},
		{NodeOptions{Kubelet: "vm"}, "kubelet"},
	}
	for _, tt := range tests {
		err := tt.o.Validate()
		var oe *OptionError
		switch {
		case tt.option == "" && err != nil:
			t.Errorf("%+v: %v", tt.o, err)
		case tt.option != "" && (!errors.As(err, &oe) || oe.Option != tt.option):
			t.Errorf("%+v: error %v, want one about %s", tt.o, err, tt.option)
		}
	}
	o := NodeOptions{Count: 10}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.InstanceType != DefaultInstanceType || o.AMIFamily != DefaultAMIFamily || o.Identity != DefaultIdentity || o.Timeout != 5*time.Minute+20*time.Second {
		t.Errorf("defaults = %+v", o)
	}
}

func TestOptionsDHCPDomainName(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	tests := []struct {
		domain string
		ok     bool
	}{
		{"", true},
		{"corp.example", true},
		{"corp.example.", false},
		{"Corp.Example", false},
		{"corp.example other.example", false},
	}
	for _, tt := range tests {
		o := Options{DHCPDomainName: tt.domain}
		err := o.complete()
		var oe *OptionError
		switch {
		case tt.ok && err != nil:
			t.Errorf("%q: %v", tt.domain, err)
		case !tt.ok && (!errors.As(err, &oe) || oe.Option != "dhcp-domain" || oe.Value != tt.domain):
			t.Errorf("%q: error %v, want one about dhcp-domain", tt.domain, err)
		}
	}
}

func TestOptionsCertLifetime(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, tt := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {time.Minute, true}, {90 * time.Second, true}, {24 * time.Hour, true}, {30 * time.Second, false}, {-time.Minute, false}} {
		o := Options{CertLifetime: tt.d}
		err := o.complete()
		var oe *OptionError
		switch {
		case tt.ok && err != nil:
			t.Errorf("%v: %v", tt.d, err)
		case !tt.ok && (!errors.As(err, &oe) || oe.Option != "cert-lifetime" || oe.Value != tt.d.String()):
			t.Errorf("%v: error %v, want one about cert-lifetime", tt.d, err)
		}
	}
}

// fakeCluster writes the state directory of a cluster whose process is gone.
func fakeCluster(t *testing.T, name string) {
	t.Helper()
	dir, err := StateDir(name)
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cluster.json", `{"name":"`+name+`","network":"loopback","owner":{"pid":2147483647,"start":1},"ready":true}`)
	write("nodes.json", `[{"name":"n1","instanceID":"i-0123456789abcdef0","ip":"198.18.0.11","kubelet":"sim","readySeconds":1.5}]`)
	write("logs/kube-apiserver.log", "apiserver\n")
	write("logs/nodejoin-controller.log", "controller\n")
	write("logs/kubeletsim/n1.log", "kubelet\n")
	write("instances/i-0123456789abcdef0/instance.json", `{"id":"i-0123456789abcdef0","nodeName":"n1","ip":"198.18.0.11","kubelet":"sim","identity":"aws-iam","launched":"2026-01-01T00:00:00Z"}`)
}

func TestExportLogsCopiesEveryLogIntoOneDirectory(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	fakeCluster(t, "crashed")
	out := filepath.Join(t.TempDir(), "export")
	ex, err := ExportLogs("crashed", out)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range ex.Files {
		paths = append(paths, f.Path)
		if data, err := os.ReadFile(filepath.Join(out, f.Path)); err != nil || int64(len(data)) != f.Bytes || f.Bytes == 0 {
			t.Errorf("%s: %d bytes reported, read %d (%v)", f.Path, f.Bytes, len(data), err)
		}
	}
	want := "control-plane/kube-apiserver.log control-plane/nodejoin-controller.log n1/instance.json n1/kubelet.log"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("exported %s, want %s", got, want)
	}
	if _, err := ExportLogs("absent", out); err == nil || !strings.Contains(err.Error(), "no cluster named absent") {
		t.Errorf("export of an absent cluster: %v", err)
	}
}

func TestListShowsCrashedClusters(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	if cs, err := List(); err != nil || len(cs) != 0 {
		t.Fatalf("List of nothing = %v, %v", cs, err)
	}
	fakeCluster(t, "b")
	fakeCluster(t, "a")
	cs, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Name != "a" || cs[1].Name != "b" || cs[0].Running || cs[0].PID != 0 || len(cs[0].Nodes) != 1 {
		t.Errorf("List = %+v", cs)
	}
	if _, err := Get("a"); err == nil || !strings.Contains(err.Error(), "nodejoin down --name a") {
		t.Errorf("Get of a crashed cluster: %v", err)
	}
	if _, err := Nodes(t.Context(), "a", NodesOptions{}); err == nil || !strings.Contains(err.Error(), "is not running") {
		t.Errorf("Nodes of a crashed cluster: %v", err)
	}
}

func TestDiagnoseNamesTheNodesItKnows(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	fakeCluster(t, "c")
	_, err := Diagnose(t.Context(), "c", "n9")
	if err == nil || !strings.Contains(err.Error(), "n1 (i-0123456789abcdef0)") || !strings.Contains(err.Error(), "nodejoin get nodes --name c") {
		t.Errorf("error = %v", err)
	}
	rep, err := Diagnose(t.Context(), "c", "i-0123456789abcdef0")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Node != "n1" || len(rep.Steps) != 2 || len(rep.Notes) != 1 || rep.Failed() {
		t.Errorf("report of a stopped cluster's node = %+v", rep)
	}
}
