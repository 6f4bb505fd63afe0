package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/spf13/pflag"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
)

// nodeGroupOptions are run's flags for the NodeGroup controller (off by default).
type nodeGroupOptions struct {
	enabled                        bool
	clusterName, endpoint, caFile  string
	serviceCIDR, dnsIP             string
	subnets, zones, securityGroups []string
	instanceProfile, asgEndpoint   string
	amis                           map[string]string
	workers                        int
}

func (n *nodeGroupOptions) register(f *pflag.FlagSet) {
	f.BoolVar(&n.enabled, "nodegroups", false, "run the NodeGroup controller: EC2 launch templates and Auto Scaling groups for NodeGroup objects, with rolling updates")
	f.StringVar(&n.clusterName, "nodegroup-cluster-name", "", "the cluster name node groups' user data and tags carry (default: --cluster-id)")
	f.StringVar(&n.endpoint, "nodegroup-apiserver-endpoint", "", "the API server's address as nodes reach it (https://host:port); required with --nodegroups")
	f.StringVar(&n.caFile, "nodegroup-ca-file", "", "PEM CA bundle nodes trust the API server with (default: --ca-cert)")
	f.StringVar(&n.serviceCIDR, "nodegroup-service-cidr", "10.100.0.0/16", "the Services' address range, for the nodes' cluster DNS")
	f.StringVar(&n.dnsIP, "nodegroup-cluster-dns-ip", "", "the nodes' cluster DNS address (default: derived from --nodegroup-service-cidr)")
	f.StringSliceVar(&n.subnets, "nodegroup-subnets", nil, "subnet IDs Auto Scaling groups span when a NodeGroup names none")
	f.StringSliceVar(&n.zones, "nodegroup-availability-zones", nil, "availability zones Auto Scaling groups span when no subnets are given")
	f.StringSliceVar(&n.securityGroups, "nodegroup-security-groups", nil, "security group IDs of node group instances when a NodeGroup names none")
	f.StringVar(&n.instanceProfile, "nodegroup-instance-profile", "", "IAM instance profile (name or ARN) of node group instances when a NodeGroup names none")
	f.StringToStringVar(&n.amis, "nodegroup-ami", nil, "the AMI of each family when a NodeGroup names none: AmazonLinux2023=ami-...,Bottlerocket=ami-...")
	f.StringVar(&n.asgEndpoint, "autoscaling-endpoint", "", "Auto Scaling endpoint URL (default: the region's); EC2's is --ec2-endpoint")
	f.IntVar(&n.workers, "nodegroup-workers", 2, "how many NodeGroups are reconciled at once")
}

// config sets cfg.NodeGroups from the flags; without --nodegroups it stays nil.
func (n *nodeGroupOptions) config(ctx context.Context, o *Options, cfg *Config) error {
	if !n.enabled {
		return nil
	}
	c := userdata.Cluster{Name: n.clusterName, Endpoint: n.endpoint, ServiceCIDR: n.serviceCIDR, DNSClusterIP: n.dnsIP}
	if c.Name == "" {
		c.Name = o.clusterID
	}
	switch {
	case c.Name == "":
		return errors.New("--nodegroups: give --nodegroup-cluster-name (or --cluster-id)")
	case !strings.HasPrefix(c.Endpoint, "https://"):
		return fmt.Errorf("--nodegroup-apiserver-endpoint %q: want https://host:port as nodes reach the API server", c.Endpoint)
	case len(n.subnets) == 0 && len(n.zones) == 0:
		return errors.New("--nodegroups: give --nodegroup-subnets or --nodegroup-availability-zones for the Auto Scaling groups")
	}
	caFile := n.caFile
	if caFile == "" {
		caFile = o.caCert
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("--nodegroup-ca-file: reading the CA nodes trust: %w", err)
	}
	c.CertificateAuthority = ca
	amis := map[v1alpha1.AMIFamily]string{}
	for fam, ami := range n.amis {
		f, err := v1alpha1.ParseAMIFamily(fam)
		if err != nil {
			return fmt.Errorf("--nodegroup-ami: %w", err)
		}
		amis[f] = ami
	}
	var lo []func(*config.LoadOptions) error
	if o.awsRegion != "" {
		lo = append(lo, config.WithRegion(o.awsRegion))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return fmt.Errorf("--nodegroups: loading AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return errors.New("--nodegroups: no AWS region; give --aws-region or set AWS_REGION")
	}
	ec2c := ec2.NewFromConfig(awsCfg, func(eo *ec2.Options) {
		if o.ec2Endpoint != "" {
			eo.BaseEndpoint = aws.String(o.ec2Endpoint)
		}
	})
	asc := autoscaling.NewFromConfig(awsCfg, func(ao *autoscaling.Options) {
		if n.asgEndpoint != "" {
			ao.BaseEndpoint = aws.String(n.asgEndpoint)
		}
	})
	cfg.NodeGroups = &nodegroup.Options{
		EC2: ec2c, AutoScaling: asc, Cluster: c, Subnets: n.subnets, AvailabilityZones: n.zones,
		InstanceProfile: n.instanceProfile, SecurityGroupIDs: n.securityGroups, AMIs: amis, Workers: n.workers,
	}
	return nil
}
