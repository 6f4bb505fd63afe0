package userdata

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// ErrInstanceFamily reports a family RenderInstance has no user data for.
var ErrInstanceFamily = errors.New("instances outside node groups run AmazonLinux2023, AmazonLinux2 or Bottlerocket")

// InstanceFamilies are the families RenderInstance renders, in the order help texts
// show them.
var InstanceFamilies = []v1alpha1.AMIFamily{v1alpha1.AMIFamilyAmazonLinux2023, v1alpha1.AMIFamilyAmazonLinux2, v1alpha1.AMIFamilyBottlerocket}

// RenderInstance generates the user data of one instance launched outside any node
// group, as an EKS launch template without a node group gives it: the cluster's
// bootstrap for family f and nothing a group adds (no labels, taints or max pods).
// c.BootstrapToken, when set, is carried as Render carries it. The cluster's service
// CIDR is required. AL2023's NodeConfig names the service range, from which nodeadm
// derives the cluster DNS address. AL2's bootstrap.sh call and Bottlerocket's settings
// name the address only where the AMI's own rule (ruleDNS) would not find it from
// c.VPCIPv4CIDR, or when c.DNSClusterIP is set.
func RenderInstance(c Cluster, f v1alpha1.AMIFamily) ([]byte, error) {
	if c.ServiceCIDR == "" {
		return nil, fmt.Errorf("user data for cluster %q: the service CIDR is required", c.Name)
	}
	r, err := newRenderer(c, Template{Family: f, NodeGroupName: "(none)"})
	if err != nil {
		return nil, fmt.Errorf("user data for cluster %q: %w", c.Name, err)
	}
	byRule := c.DNSClusterIP == "" && c.VPCIPv4CIDR != "" && r.dns == ruleDNS(c.VPCIPv4CIDR)
	switch f {
	case v1alpha1.AMIFamilyAmazonLinux2023:
		doc, err := nodeConfigYAML(map[string]any{"cluster": map[string]any{
			"name": c.Name, "apiServerEndpoint": c.Endpoint, "certificateAuthority": r.caB64, "cidr": c.ServiceCIDR,
		}})
		if err != nil {
			return nil, err
		}
		return writeMIME(append([]part{newPart(mediaNodeConfig, "---\n"+doc)}, tokenPart(c.BootstrapToken)...)), nil
	case v1alpha1.AMIFamilyAmazonLinux2:
		args := []string{"/etc/eks/bootstrap.sh", shellQuote(c.Name), "--apiserver-endpoint", shellQuote(c.Endpoint), "--b64-cluster-ca", r.caB64}
		if !byRule {
			args = append(args, "--dns-cluster-ip", r.dns)
			for _, fl := range r.serviceCIDRFlags() {
				args = append(args, shellQuote(fl))
			}
		}
		script := "#!/bin/bash\nset -ex\n" + strings.Join(args, " ") + "\n"
		return writeMIME(append([]part{newPart(mediaShell, script)}, tokenPart(c.BootstrapToken)...)), nil
	case v1alpha1.AMIFamilyBottlerocket:
		kube := map[string]any{"cluster-name": c.Name, "api-server": c.Endpoint, "cluster-certificate": r.caB64}
		if !byRule {
			kube["cluster-dns-ip"] = r.dns
		}
		if c.BootstrapToken != "" {
			kube["bootstrap-token"] = c.BootstrapToken
		}
		var b strings.Builder
		if err := writeTOMLTable(&b, nil, map[string]any{"settings": map[string]any{"kubernetes": kube}}, nil); err != nil {
			return nil, err
		}
		return []byte(b.String()), nil
	}
	return nil, fmt.Errorf("AMI family %q: %w", f, ErrInstanceFamily)
}

// ruleDNS is the cluster DNS address bootstrap.sh (and Bottlerocket) pick when told
// neither the address nor the service range: 172.20.0.10 when the VPC's range is in
// 10.0.0.0/8 (EKS then picks 172.20.0.0/16 for services), 10.100.0.10 otherwise.
func ruleDNS(vpcCIDR string) string {
	if strings.HasPrefix(vpcCIDR, "10.") {
		return "172.20.0.10"
	}
	return "10.100.0.10"
}
