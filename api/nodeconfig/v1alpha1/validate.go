package v1alpha1

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks that the configuration is complete and well-formed enough to write a
// node's files. It reports every problem, each with its field path; where a common
// mistake is likely the message says so.
func (c *NodeConfig) Validate() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	errs = append(errs, c.Spec.Cluster.validate(spec.Child("cluster"))...)
	errs = append(errs, c.Spec.Kubelet.validate(spec.Child("kubelet"))...)
	errs = append(errs, c.Spec.Instance.validate(spec.Child("instance"))...)
	for gate := range c.Spec.FeatureGates {
		if !slices.Contains(KnownFeatures, gate) {
			errs = append(errs, field.NotSupported(spec.Child("featureGates").Key(string(gate)), gate, KnownFeatures))
		}
	}
	return errs
}

func (c *ClusterDetails) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "the name of the cluster to join"))
	}
	switch u, err := url.Parse(c.APIServerEndpoint); {
	case c.APIServerEndpoint == "":
		errs = append(errs, field.Required(p.Child("apiServerEndpoint"), "the cluster's API server URL, such as https://ABCD.gr7.us-west-2.eks.amazonaws.com"))
	case err != nil || u.Host == "":
		errs = append(errs, field.Invalid(p.Child("apiServerEndpoint"), c.APIServerEndpoint, "not a URL with a host"))
	case u.Scheme != "https":
		errs = append(errs, field.Invalid(p.Child("apiServerEndpoint"), c.APIServerEndpoint, "must be an https:// URL"))
	}
	if len(c.CertificateAuthority) == 0 {
		errs = append(errs, field.Required(p.Child("certificateAuthority"), "the base64 of the cluster's PEM CA bundle"))
	} else if err := checkCABundle(c.CertificateAuthority); err != nil {
		errs = append(errs, field.Invalid(p.Child("certificateAuthority"), "(CA bundle)", err.Error()))
	}
	if c.CIDR == "" {
		errs = append(errs, field.Required(p.Child("cidr"), "the cluster's service CIDR, such as 10.100.0.0/16 (the cluster DNS address is derived from it)"))
	} else if msg := checkServiceCIDR(c.CIDR); msg != "" {
		errs = append(errs, field.Invalid(p.Child("cidr"), c.CIDR, msg))
	}
	if c.EnableOutpost != nil && *c.EnableOutpost && c.ID == "" {
		errs = append(errs, field.Required(p.Child("id"), "cluster ID must be provided for outposts"))
	}
	return errs
}

// checkCABundle requires at least one PEM certificate and nothing but certificates.
func checkCABundle(data []byte) error {
	n := 0
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a PEM %q block; want only CERTIFICATE blocks", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d does not parse: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("no PEM certificate found (decoded %d bytes); give the base64 of the PEM file, not of its DER body", len(data))
	}
	return nil
}

// checkServiceCIDR accepts an IPv4 or IPv6 network and explains the usual mistake:
// giving the VPC's or the pods' range instead of the service range.
func checkServiceCIDR(cidr string) string {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "not a CIDR such as 10.100.0.0/16"
	}
	if prefix.Masked() != prefix {
		return fmt.Sprintf("has host bits set; the network is %s", prefix.Masked())
	}
	if prefix.Addr().Is4() && (prefix.Bits() < 12 || prefix.Bits() > 24) {
		return "an EKS service CIDR is between /12 and /24; this looks like a VPC or pod range: give the cluster's service CIDR (kubernetesNetworkConfig.serviceIpv4Cidr, usually 10.100.0.0/16 or 172.20.0.0/16)"
	}
	if prefix == netip.MustParsePrefix("172.31.0.0/16") {
		return "172.31.0.0/16 is the default VPC's range, not a service CIDR: give the cluster's service CIDR (kubernetesNetworkConfig.serviceIpv4Cidr)"
	}
	return ""
}

func (k *KubeletOptions) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range k.Flags {
		if !strings.HasPrefix(f, "--") || len(f) < 3 {
			errs = append(errs, field.Invalid(p.Child("flags").Index(i), f, "a kubelet flag starts with --, such as --node-labels=team=a"))
		}
		// An empty list registers no taints (eksctl's Windows user data passes one).
		if taints, ok := strings.CutPrefix(f, "--register-with-taints="); ok && taints != "" {
			for _, t := range strings.Split(taints, ",") {
				_, effect, _ := strings.Cut(t, ":")
				if effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute" {
					errs = append(errs, field.Invalid(p.Child("flags").Index(i), f, fmt.Sprintf("taint %q needs an effect: key=value:NoSchedule, :PreferNoSchedule or :NoExecute (the kubelet refuses to start otherwise)", t)))
				}
			}
		}
	}
	return errs
}

func (o *InstanceOptions) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	ls := p.Child("localStorage")
	strategies := []LocalStorageStrategy{LocalStorageRAID0, LocalStorageRAID10, LocalStorageMount}
	if s := o.LocalStorage.Strategy; s != "" && !slices.Contains(strategies, s) {
		errs = append(errs, field.NotSupported(ls.Child("strategy"), s, strategies))
	}
	mounts := []DisabledMount{DisabledMountContainerd, DisabledMountPodLogs, DisabledMountSOCI}
	for i, m := range o.LocalStorage.DisabledMounts {
		if !slices.Contains(mounts, m) {
			errs = append(errs, field.NotSupported(ls.Child("disabledMounts").Index(i), m, mounts))
		}
	}
	for i, ns := range o.Network.Nameservers {
		if _, err := netip.ParseAddr(ns); err != nil {
			errs = append(errs, field.Invalid(p.Child("network", "nameservers").Index(i), ns, "not an IP address"))
		}
	}
	return errs
}
