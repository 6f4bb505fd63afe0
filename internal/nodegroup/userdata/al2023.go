package userdata

import (
	"fmt"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// al2023 is AL2023's MIME document of NodeConfig parts.
//
// Managed (what EKS injects): pre-bootstrap shell parts, then EKS's NodeConfig with the
// cluster, labels, taints, max pods and kubelet configuration, then the user's parts
// in their order. nodeadm merges NodeConfigs in document order, later wins, so a value
// the user's NodeConfig sets overrides EKS's (kubelet flags are appended).
//
// Self-managed (eksctl): pre-bootstrap shell parts, the minimal NodeConfig (cluster,
// clusterDNS, kubelet configuration, labels and taints as flags), a second NodeConfig
// with maxPods alone when set, then the user's user data (eksctl's override) last.
func (r *renderer) al2023() ([]byte, error) {
	if r.c.ServiceCIDR == "" {
		return nil, fmt.Errorf("node group %s: %s user data needs the cluster's service CIDR (NodeConfig spec.cluster.cidr is required)", r.t.NodeGroupName, v1alpha1.AMIFamilyAmazonLinux2023)
	}
	var user []part
	var err error
	if r.t.Style == Managed && strings.TrimSpace(r.t.UserData) != "" {
		if !isMIME(r.t.UserData) {
			return nil, fmt.Errorf("node group %s: %w", r.t.NodeGroupName, ErrNotMIME)
		}
		if user, err = userParts(r.t.UserData); err != nil {
			return nil, fmt.Errorf("node group %s: %w", r.t.NodeGroupName, err)
		}
	} else if user, err = r.userPartsAnyForm(); err != nil {
		return nil, err
	}

	parts := shellParts(r.t.PreBootstrapCommands)
	kubelet := map[string]any{}
	for k, v := range r.t.Kubelet {
		kubelet[k] = v
	}
	if r.dns != "" {
		kubelet["clusterDNS"] = []string{r.dns}
	}
	flags := []string{"--node-labels=" + labelsArg(r.labels)}
	if len(r.t.Taints) > 0 {
		flags = append(flags, "--register-with-taints="+taintsArg(r.t.Taints))
	}
	cluster := map[string]any{
		"name": r.c.Name, "apiServerEndpoint": r.c.Endpoint,
		"certificateAuthority": r.caB64, "cidr": r.c.ServiceCIDR,
	}
	if r.t.Style == Managed {
		if mp := r.managedMaxPods(); mp > 0 {
			kubelet["maxPods"] = mp
		}
		doc, err := nodeConfigYAML(map[string]any{"cluster": cluster, "kubelet": map[string]any{"config": kubelet, "flags": flags}})
		if err != nil {
			return nil, err
		}
		parts = append(parts, newPart(mediaNodeConfig, "---\n"+doc))
		parts = append(parts, user...)
		parts = append(parts, tokenPart(r.c.BootstrapToken)...)
		return writeMIME(parts), nil
	}
	// eksctl serialises nodeadm's Go types, whose empty structs appear as {}.
	doc, err := nodeConfigYAML(map[string]any{
		"cluster": cluster, "containerd": map[string]any{},
		"instance": map[string]any{"localStorage": map[string]any{}, "network": map[string]any{}},
		"kubelet":  map[string]any{"config": kubelet, "flags": flags},
	}, "metadata")
	if err != nil {
		return nil, err
	}
	parts = append(parts, newPart(mediaNodeConfig, doc))
	if r.maxPods > 0 {
		doc, err := nodeConfigYAML(map[string]any{"kubelet": map[string]any{"config": map[string]any{"maxPods": r.maxPods}}}, "metadata")
		if err != nil {
			return nil, err
		}
		parts = append(parts, newPart(mediaNodeConfig, doc))
	}
	parts = append(parts, user...)
	parts = append(parts, tokenPart(r.c.BootstrapToken)...)
	return writeMIME(parts), nil
}

// nodeConfigYAML renders a NodeConfig with spec, keys sorted; empty names top-level
// keys written as {}.
func nodeConfigYAML(spec map[string]any, empty ...string) (string, error) {
	doc := map[string]any{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
	for _, k := range empty {
		doc[k] = map[string]any{}
	}
	y, err := sigsyaml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encoding a NodeConfig: %w", err)
	}
	return string(y), nil
}
