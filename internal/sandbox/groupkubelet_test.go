package sandbox

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// Node groups get real kubelets by default where the machine can run them, simulated
// ones where it cannot (saying what is missing), and exactly what was asked otherwise;
// real kubelets asked for where they cannot run are refused, naming what is missing.
func TestChooseGroupKubelet(t *testing.T) {
	lacking := []string{"root", "containerd"}
	for _, tc := range []struct {
		name    string
		asked   instance.KubeletKind
		missing []string
		want    instance.KubeletKind
		reason  []string // substrings of the reason, or of the error
		wantErr bool
	}{
		{name: "default on a capable machine", want: instance.KubeletReal, reason: []string{"auto:", "root"}},
		{name: "default where real cannot run", missing: lacking, want: instance.KubeletSim, reason: []string{"auto:", "need root, containerd", "make deps"}},
		{name: "auto", asked: NodeGroupKubeletAuto, want: instance.KubeletReal, reason: []string{"auto:"}},
		{name: "sim asked on a capable machine", asked: instance.KubeletSim, want: instance.KubeletSim, reason: []string{"--nodegroup-kubelet sim"}},
		{name: "real asked", asked: instance.KubeletReal, want: instance.KubeletReal, reason: []string{"--nodegroup-kubelet real"}},
		{name: "real asked where it cannot run", asked: instance.KubeletReal, missing: lacking, wantErr: true, reason: []string{"need root, containerd", "--nodegroup-kubelet sim"}},
		{name: "unknown", asked: "fake", wantErr: true, reason: []string{"want auto, real or sim"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := chooseGroupKubelet(tc.asked, tc.missing)
			text := c.Reason
			if tc.wantErr {
				var oe *OptionError
				if !errors.As(err, &oe) || oe.Option != "nodegroup-kubelet" {
					t.Fatalf("err = %v, want an OptionError of nodegroup-kubelet", err)
				}
				text = err.Error()
			} else if err != nil || c.Kubelet != tc.want {
				t.Fatalf("= %+v, %v; want %s", c, err, tc.want)
			}
			for _, s := range tc.reason {
				if !strings.Contains(text, s) {
					t.Errorf("%q lacks %q", text, s)
				}
			}
		})
	}
}

// The choice is recorded in the state directory, shown by get clusters (JSON) and in
// up's summary.
func TestGroupKubeletRecorded(t *testing.T) {
	dir := t.TempDir()
	if readGroupKubelet(dir) != nil {
		t.Fatal("a cluster that recorded nothing reads a choice")
	}
	want := KubeletChoice{Kubelet: instance.KubeletSim, Asked: NodeGroupKubeletAuto, Reason: "auto: real kubelets need root"}
	if err := writeGroupKubelet(dir, want); err != nil {
		t.Fatal(err)
	}
	got := readGroupKubelet(dir)
	if got == nil || *got != want {
		t.Fatalf("read %+v, want %+v", got, want)
	}
	var b bytes.Buffer
	Cluster{Name: "c", NodeGroupKubelet: got}.WriteSummary(&b, false)
	if !strings.Contains(b.String(), "node groups: simulated kubelets (auto: real kubelets need root)") {
		t.Errorf("summary:\n%s", b.String())
	}
	if err := os.WriteFile(dir+"/"+groupKubeletFile, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if readGroupKubelet(dir) != nil {
		t.Error("a damaged record reads as a choice")
	}
}
