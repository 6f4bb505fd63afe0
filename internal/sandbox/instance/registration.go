package instance

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// registration reads the labels and taints a real kubelet would register a simulated
// instance's Node with: nodeadm's load of the user data from the instance's metadata
// endpoint (every family's decoder, MIME parts merged in order), then the instance's
// local kubelet flags, merged after it as nodeadm merges a real instance's local
// NodeConfig, and what the kubelet makes of the merged configuration's flags and
// drop-in (bootstrap.KubeletRegistration).
func (inst *Instance) registration(ctx context.Context) (*bootstrap.Registration, error) {
	md := &bootstrap.IMDS{Client: imds.New(imds.Options{Endpoint: inst.imdsURL})}
	loaded, err := bootstrap.Load(ctx, []string{bootstrap.DefaultSource}, bootstrap.Environment{IMDS: md, Resolver: localResolver{inst.p}})
	if err != nil {
		return nil, fmt.Errorf("reading the instance's user data as nodeadm does: %w", err)
	}
	cfg := loaded.Merged
	if len(inst.kubeletFlags) > 0 {
		local := &v1alpha1.NodeConfig{}
		local.Spec.Kubelet.Flags = inst.kubeletFlags
		if cfg, err = nodeconfig.Merge([]*v1alpha1.NodeConfig{cfg, local}); err != nil {
			return nil, fmt.Errorf("merging the local kubelet flags: %w", err)
		}
	}
	reg, err := bootstrap.KubeletRegistration(cfg)
	if err != nil {
		return nil, fmt.Errorf("the kubelet would not start with the instance's configuration: %w", err)
	}
	return reg, nil
}

// localResolver answers what AL2-style user data leaves out as EKS and the VPC would
// for the local cluster: DescribeCluster knows only it, the VPC is the node range.
type localResolver struct{ p *Provider }

func (r localResolver) DescribeCluster(_ context.Context, name string, _ int) (*userdata.ClusterInfo, error) {
	c := r.p.cfg.Cluster
	if name != c.Name {
		return nil, fmt.Errorf("DescribeCluster %s: no such cluster (the local cloud has cluster %s)", name, c.Name)
	}
	endpoint := c.Endpoint
	if r.p.cfg.HostEndpoint != "" {
		endpoint = r.p.cfg.HostEndpoint
	}
	return &userdata.ClusterInfo{Endpoint: endpoint, CertificateData: c.CAPEM, ServiceIPv4CIDR: c.ServiceCIDR.Masked().String(), IPFamily: "ipv4"}, nil
}

func (r localResolver) VPCIPv4CIDRs(context.Context) ([]string, error) {
	return []string{r.p.cfg.NodeCIDR.Masked().String()}, nil
}
