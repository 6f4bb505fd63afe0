package controller

import (
	"fmt"
	"net/netip"

	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/manager"
)

// addonFlags are run's flags for the add-ons the controller applies (off by default).
type addonFlags struct {
	names, apiserver, clusterCIDR, serviceCIDR, dnsIP string
	kubeProxyImage, coreDNSImage                      string
}

func (a *addonFlags) register(f *pflag.FlagSet) {
	f.StringVar(&a.names, "addons", "", "add-ons to apply at start and keep applied, as EKS creates them with a cluster: kube-proxy,coredns (default: none)")
	f.StringVar(&a.apiserver, "addons-apiserver-endpoint", "", "the API server's address as nodes reach it (https://host:port), for kube-proxy's kubeconfig; required with --addons kube-proxy")
	f.StringVar(&a.clusterCIDR, "cluster-cidr", addons.DefaultPodCIDR.String(), "the pods' address range (kube-proxy's clusterCIDR)")
	f.StringVar(&a.serviceCIDR, "service-cidr", addons.DefaultServiceCIDR.String(), "the Services' address range; kube-dns gets the address nodeadm gives kubelets as clusterDNS")
	f.StringVar(&a.dnsIP, "cluster-dns-ip", "", "kube-dns's address (default: derived from --service-cidr as nodeadm does, e.g. 10.100.0.10)")
	f.StringVar(&a.kubeProxyImage, "kube-proxy-image", addons.DefaultKubeProxyImage, "kube-proxy's image")
	f.StringVar(&a.coreDNSImage, "coredns-image", addons.DefaultCoreDNSImage, "CoreDNS's image")
}

// config sets cfg.Addons from the flags; no add-on named leaves it nil.
func (a *addonFlags) config(cfg *manager.Config) error {
	names, err := addons.ParseNames(a.names)
	if err != nil {
		return fmt.Errorf("--addons: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	o := &addons.Options{Enabled: names, APIServer: a.apiserver, KubeProxyImage: a.kubeProxyImage, CoreDNSImage: a.coreDNSImage}
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
