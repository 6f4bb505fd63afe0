package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/launcher"
)

// NodeGroupKubeletAuto asks for real kubelets on node groups' instances where this
// machine can run them (root, the packages of `make deps`, the kubelet of `make
// tools`), simulated ones otherwise: the default of Options.NodeGroupKubelet.
const NodeGroupKubeletAuto instance.KubeletKind = "auto"

// KubeletChoice is what plays the kubelets of node groups' instances, what was asked
// and why that was chosen.
type KubeletChoice struct {
	Kubelet instance.KubeletKind `json:"kubelet"`
	Asked   instance.KubeletKind `json:"asked"`
	Reason  string               `json:"reason"`
}

// String says the choice in a sentence, for progress and the summary.
func (k KubeletChoice) String() string {
	what := "real kubelets"
	if k.Kubelet == instance.KubeletSim {
		what = "simulated kubelets"
	}
	return what + " (" + k.Reason + ")"
}

// chooseGroupKubelet resolves asked ("" is auto) given what this machine lacks to run
// real kubelets (launcher.RealKubeletMissing). Real kubelets asked for on a machine
// that cannot run them are an error, not a silent fallback.
func chooseGroupKubelet(asked instance.KubeletKind, missing []string) (KubeletChoice, error) {
	if asked == "" {
		asked = NodeGroupKubeletAuto
	}
	c := KubeletChoice{Asked: asked}
	switch asked {
	case instance.KubeletSim:
		c.Kubelet, c.Reason = instance.KubeletSim, "asked: --nodegroup-kubelet sim"
	case instance.KubeletReal:
		if len(missing) > 0 {
			return c, &OptionError{"nodegroup-kubelet", string(asked), "real kubelets need " + strings.Join(missing, ", ") + "; run `make deps` as root and `make tools`, or use --nodegroup-kubelet sim"}
		}
		c.Kubelet, c.Reason = instance.KubeletReal, "asked: --nodegroup-kubelet real"
	case NodeGroupKubeletAuto:
		if len(missing) > 0 {
			c.Kubelet, c.Reason = instance.KubeletSim, "auto: real kubelets need "+strings.Join(missing, ", ")+" (`make deps` as root, `make tools`)"
		} else {
			c.Kubelet, c.Reason = instance.KubeletReal, "auto: running as root with containerd, runc, the CNI plugins and the kubelet"
		}
	default:
		return c, &OptionError{"nodegroup-kubelet", string(asked), "want auto, real or sim"}
	}
	return c, nil
}

// resolveGroupKubelet chooses the node groups' kubelet for o, on the network the
// control plane will use.
func (o *Options) resolveGroupKubelet() error {
	var missing []string
	if o.NodeGroupKubelet != instance.KubeletSim {
		network := o.Network
		if network == "" { // as controlplane defaults it
			network = controlplane.NetworkLoopback
			if os.Geteuid() == 0 {
				network = controlplane.NetworkNamespace
			}
		}
		missing = launcher.RealKubeletMissing(network, o.BinDir)
	}
	c, err := chooseGroupKubelet(o.NodeGroupKubelet, missing)
	if err != nil {
		return err
	}
	o.groupKubelet = c
	return nil
}

// groupKubeletFile records, in the state directory, the node groups' kubelet choice.
const groupKubeletFile = "nodegroup-kubelet.json"

func writeGroupKubelet(dir string, c KubeletChoice) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, groupKubeletFile), append(data, '\n'), 0o600)
}

// readGroupKubelet reads what writeGroupKubelet recorded; nil for a cluster that
// recorded none (started by an older nodejoin).
func readGroupKubelet(dir string) *KubeletChoice {
	data, err := os.ReadFile(filepath.Join(dir, groupKubeletFile))
	if err != nil {
		return nil
	}
	var c KubeletChoice
	if json.Unmarshal(data, &c) != nil || c.Kubelet == "" {
		return nil
	}
	return &c
}
