package joinlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Log lines as kubelet v1.37 writes them when its credentials belong to another node.
const stolenLog = `I1123 12:14:20.026720   21865 kubelet_node_status.go:75] "Attempting to register node" node="ip-198-18-0-13.local.internal"
E1123 12:14:19.886065   21865 controller.go:208] "Failed to ensure lease exists, will retry" err="leases.coordination.k8s.io \"ip-198-18-0-13.local.internal\" is forbidden: User \"system:node:ip-198-18-0-11.local.internal\" cannot get resource \"leases\""
E1123 12:14:20.030253   21865 kubelet_node_status.go:114] "Unable to register node with API server, error getting existing node" err="nodes \"ip-198-18-0-13.local.internal\" is forbidden: User \"system:node:ip-198-18-0-11.local.internal\" cannot get resource \"nodes\" in API group \"\" at the cluster scope: node: node 'ip-198-18-0-11.local.internal' cannot read 'ip-198-18-0-13.local.internal', only its own Node object" node="ip-198-18-0-13.local.internal"
E1123 12:14:21.000000   21865 kubelet.go:3596] "Unable to register mirror pod because node is not registered yet" err="node \"ip-198-18-0-13.local.internal\" not found"
`

func TestForeignIdentityIsFoundInTheKubeletLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.log")
	if err := os.WriteFile(path, []byte(stolenLog), 0o600); err != nil {
		t.Fatal(err)
	}
	other, line := ForeignIdentity(path, "ip-198-18-0-13.local.internal")
	if other != "ip-198-18-0-11.local.internal" || !strings.Contains(line, "Unable to register node") {
		t.Errorf("ForeignIdentity = %q, %q", other, line)
	}
	// The kubelet's own name in a refusal is no sign of stolen credentials.
	if other, _ := ForeignIdentity(path, "ip-198-18-0-11.local.internal"); other != "" {
		t.Errorf("own identity reported as foreign: %q", other)
	}
	// The telling line is the registration refusal, not the last, noisier, error.
	if ev := KubeletEvidence(path); !strings.Contains(ev, "Unable to register node") {
		t.Errorf("evidence %q", ev)
	}
}
