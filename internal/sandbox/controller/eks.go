package controller

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/nodegroup/eksbackend"
)

// PlatformVersion is what the local EKS reports as the cluster's platform version.
const PlatformVersion = "eks.local"

// serveEKS puts EKS and SSM on the local AWS's edge. EKS is a view of the cluster's
// NodeGroup and NodeAccessEntry objects (eksbackend), so the EKS API and `kubectl get
// nodegroups` cannot disagree; SSM answers the public EKS AMI parameters from the EC2
// image catalog. It returns each AMI family's latest image for the cluster's version:
// the NodeGroup controller's default images, so that a group created without a release
// is on the release EKS and SSM call the latest.
func (c *Controller) serveEKS(cl *controlplane.Cluster, cfg Config, log *slog.Logger) (map[v1alpha1.AMIFamily]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cl.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server for the local EKS: %w", err)
	}
	sv, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's Kubernetes version for the local EKS: %w", err)
	}
	version := sv.Major + "." + sv.Minor
	catalog := c.cloud.EC2.Releases()
	releases := &catalogReleases{catalog: catalog, version: version}
	amis := map[v1alpha1.AMIFamily]string{}
	for _, f := range v1alpha1.AMIFamilies {
		if _, ami, ok := releases.Latest(f); ok {
			amis[f] = ami
		}
	}

	caPEM, err := os.ReadFile(cl.CAFile())
	if err != nil {
		return nil, fmt.Errorf("reading the cluster CA for the local EKS: %w", err)
	}
	subnets := subnetIDs(c.cloud.AutoScaling.Subnets())
	opts := cl.Options()
	info := eksbackend.ClusterInfo{
		Cluster: eksapi.Cluster{
			Name:      cl.Name(),
			Arn:       fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", cfg.Region, cfg.AccountID, cl.Name()),
			CreatedAt: eksapi.NewTime(time.Now()),
			Version:   version,
			// Nodes reach the API server at its address in the cluster namespace: the
			// endpoint bootstrap.sh and nodeadm ask EKS for. Callers on the host (the
			// AWS CLI, eksctl) get its loopback address, PublicEndpoint.
			Endpoint: cl.InternalEndpoint(),
			RoleArn:  fmt.Sprintf("arn:aws:iam::%s:role/nodejoin-%s-cluster", cfg.AccountID, cl.Name()),
			ResourcesVpcConfig: eksapi.VpcConfig{
				SubnetIDs: subnets, SecurityGroupIDs: []string{localaws.DefaultSecurityGroupID},
				ClusterSecurityGroupID: localaws.DefaultSecurityGroupID, VpcID: localaws.DefaultVPCID,
				EndpointPublicAccess: true, EndpointPrivateAccess: true, PublicAccessCidrs: []string{"0.0.0.0/0"},
			},
			KubernetesNetworkConfig: &eksapi.KubernetesNetworkConfig{ServiceIpv4Cidr: opts.ServiceCIDR.String(), IPFamily: "ipv4"},
			CertificateAuthority:    &eksapi.CertificateAuthority{Data: base64.StdEncoding.EncodeToString(caPEM)},
			PlatformVersion:         PlatformVersion,
			Status:                  "ACTIVE",
			AccessConfig:            &eksapi.AccessConfig{AuthenticationMode: "API_AND_CONFIG_MAP"},
			Tags:                    map[string]string{},
		},
		Region: cfg.Region, AccountID: cfg.AccountID, NodeRole: cfg.NodeInstanceProfile, Subnets: subnets,
		PublicEndpoint: cl.Endpoint(),
	}
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	// Not cached: a DescribeNodegroup right after CreateNodegroup must find the group.
	kc, err := client.New(cl.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server for the local EKS: %w", err)
	}
	// Users' launch templates are read from the local EC2, so that CreateNodegroup
	// refuses what EKS refuses in them at once.
	lt := ec2.NewFromConfig(c.cloud.ControllerConfig(cfg.Region), func(o *ec2.Options) { o.BaseEndpoint = aws.String(c.cloud.EC2URL) })
	c.eks = eksbackend.New(kc, info, releases).WithLaunchTemplates(lt)
	c.cloud.Edge.Route("eks", localaws.NewEKSWithBackend(c.eks, log))
	c.cloud.Edge.Route("ssm", localaws.NewSSM(cfg.Region, catalog))
	return amis, nil
}

// catalogReleases is the local EC2's image catalog for one Kubernetes version, as the
// EKS backend resolves release versions.
type catalogReleases struct {
	catalog *localaws.ReleaseCatalog
	version string
}

func (r *catalogReleases) Latest(family v1alpha1.AMIFamily) (release, ami string, ok bool) {
	rel, ok := r.catalog.Latest(r.version, string(family))
	return rel.ReleaseVersion, rel.ImageID, ok
}

func (r *catalogReleases) Image(family v1alpha1.AMIFamily, release string) (string, bool) {
	rel, ok := r.catalog.ByReleaseVersion(r.version, string(family), release)
	return rel.ImageID, ok
}

func (r *catalogReleases) ReleaseOf(ami string) (v1alpha1.AMIFamily, string, bool) {
	rel, ok := r.catalog.ByImageID(ami)
	if !ok || rel.KubernetesVersion != r.version {
		return "", "", false
	}
	return v1alpha1.AMIFamily(rel.Family), rel.ReleaseVersion, true
}

// AccountReleases is the local EC2's AMI release catalog for a cluster's Kubernetes
// version (major.minor), as the local EKS resolves release versions, and the subnets a
// group without its own spans: what `nodejoin describe nodegroup` needs to say what EKS
// DescribeNodegroup says. The catalog is fixed, so it is the running cluster's.
func AccountReleases(region, version string) (eksbackend.Releases, []string) {
	return &catalogReleases{catalog: localaws.NewReleaseCatalog(), version: version}, subnetIDs(localaws.DefaultSubnets(region))
}

// subnetIDs are the IDs of subnets, in order: the node groups' default subnets and
// DescribeCluster's resourcesVpcConfig name the same ones.
func subnetIDs(subnets []localaws.Subnet) []string {
	ids := make([]string, 0, len(subnets))
	for _, s := range subnets {
		ids = append(ids, s.ID)
	}
	return ids
}
