package instance

import (
	"net/netip"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	nodegroupuserdata "github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
)

// defaultAMIFamily is the family of a Spec that names none.
const defaultAMIFamily = nodejoinv1alpha1.AMIFamilyAmazonLinux2023

// ClusterInfo is what a node's user data must say about its cluster.
type ClusterInfo struct {
	Name        string
	Endpoint    string
	CAPEM       []byte
	ServiceCIDR netip.Prefix
}

// userData renders the user data an EKS launch template without a node group gives an
// instance of family f, with the renderer node groups use. A non-empty bootstrapToken
// is carried the way nodejoin reads it. vpc is the instance's VPC range (the node
// range): where bootstrap.sh's rule finds the cluster DNS address from it, as it does
// for the default ranges, the user data leaves the address to the rule.
func (c ClusterInfo) userData(f nodejoinv1alpha1.AMIFamily, bootstrapToken string, vpc netip.Prefix) ([]byte, error) {
	cidr, vpcCIDR := "", ""
	if c.ServiceCIDR.IsValid() {
		cidr = c.ServiceCIDR.Masked().String()
	}
	if vpc.IsValid() {
		vpcCIDR = vpc.Masked().String()
	}
	return nodegroupuserdata.RenderInstance(nodegroupuserdata.Cluster{
		Name: c.Name, Endpoint: c.Endpoint, CertificateAuthority: c.CAPEM, ServiceCIDR: cidr, BootstrapToken: bootstrapToken,
		VPCIPv4CIDR: vpcCIDR,
	}, f)
}
