package manager

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/internal/addons"
)

// addonOptions are run's flags for the add-ons the controller applies (off by default).
type addonOptions struct {
	names, apiserver, clusterCIDR, serviceCIDR, dnsIP string
	kubeProxyImage, coreDNSImage                      string
	awsNodeImage, awsNodeEC2Endpoint, awsNodeRegion   string
	awsNodeEnv                                        map[string]string
}

func (a *addonOptions) register(f *pflag.FlagSet) {
	f.StringVar(&a.names, "addons", "", "add-ons to apply at start and keep applied, as EKS creates them with a cluster: kube-proxy,coredns,aws-node (default: none)")
	f.StringVar(&a.apiserver, "addons-apiserver-endpoint", "", "the API server's address as nodes reach it (https://host:port), for kube-proxy's kubeconfig; required with --addons kube-proxy")
	f.StringVar(&a.clusterCIDR, "cluster-cidr", addons.DefaultPodCIDR.String(), "the pods' address range (kube-proxy's clusterCIDR)")
	f.StringVar(&a.serviceCIDR, "service-cidr", addons.DefaultServiceCIDR.String(), "the Services' address range; kube-dns gets the address nodeadm gives kubelets as clusterDNS")
	f.StringVar(&a.dnsIP, "cluster-dns-ip", "", "kube-dns's address (default: derived from --service-cidr as nodeadm does, e.g. 10.100.0.10)")
	f.StringVar(&a.kubeProxyImage, "kube-proxy-image", addons.DefaultKubeProxyImage, "kube-proxy's image")
	f.StringVar(&a.coreDNSImage, "coredns-image", addons.DefaultCoreDNSImage, "CoreDNS's image")
	f.StringVar(&a.awsNodeImage, "aws-node-image", addons.DefaultAWSNodeImage, "aws-node's image (nodejoin-netagent)")
	f.StringVar(&a.awsNodeEC2Endpoint, "aws-node-ec2-endpoint", "", "the EC2 endpoint aws-node's ipamd calls (AWS_ENDPOINT_URL_EC2; default: the SDK's)")
	f.StringVar(&a.awsNodeRegion, "aws-node-region", "", "aws-node's AWS_REGION (default: the instance's region from IMDS)")
	f.StringToStringVar(&a.awsNodeEnv, "aws-node-env", nil, "further environment of aws-node's ipamd, such as WARM_IP_TARGET=5,MINIMUM_IP_TARGET=10 (WARM_ENI_TARGET defaults to 1)")
}

// config sets cfg.Addons from the flags; no add-on named leaves it nil.
func (a *addonOptions) config(cfg *Config) error {
	names, err := addons.ParseNames(a.names)
	if err != nil {
		return fmt.Errorf("--addons: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	o := &addons.Options{Enabled: names, APIServer: a.apiserver, KubeProxyImage: a.kubeProxyImage, CoreDNSImage: a.coreDNSImage,
		AWSNode: addons.AWSNodeOptions{Image: a.awsNodeImage, EC2Endpoint: a.awsNodeEC2Endpoint, Region: a.awsNodeRegion}}
	keys := slices.Sorted(maps.Keys(a.awsNodeEnv))
	for _, k := range keys {
		o.AWSNode.Env = append(o.AWSNode.Env, corev1.EnvVar{Name: k, Value: a.awsNodeEnv[k]})
	}
	if o.PodCIDR, err = netip.ParsePrefix(a.clusterCIDR); err != nil {
		return fmt.Errorf("--cluster-cidr %q: want an address range such as 10.244.0.0/16", a.clusterCIDR)
	}
	if o.ServiceCIDR, err = netip.ParsePrefix(a.serviceCIDR); err != nil {
		return fmt.Errorf("--service-cidr %q: want an address range such as 10.100.0.0/16", a.serviceCIDR)
	}
	if a.dnsIP != "" {
		if o.DNSIP, err = netip.ParseAddr(a.dnsIP); err != nil {
			return fmt.Errorf("--cluster-dns-ip %q: want an IP address", a.dnsIP)
		}
	}
	if err := o.Complete(); err != nil {
		return fmt.Errorf("--addons: %w", err)
	}
	cfg.Addons = o
	return nil
}
