package userdata

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/shell"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
)

// al2Params are the inputs of an AL2 bootstrap: bootstrap.sh's flags, or eksctl's
// kubelet.env, which feeds the same flags.
type al2Params struct {
	where           string
	clusterName     string
	endpoint        string
	b64CA           string
	serviceIPv4CIDR string
	serviceIPv6CIDR string
	ipFamily        string
	dnsClusterIP    string
	kubeletArgs     []string
	useMaxPods      *bool
	maxPods         int
	clusterID       string
	outpost         *bool
	localDisks      string
	retries         int
	// caField names where the CA came from, for errors.
	caField string
	// warnings are accepted oddities to report.
	warnings []string
}

// containerRuntime accepts containerd, and dockerd with a warning: dockerd left
// Kubernetes in 1.24, and user data written for older nodes still names it.
func (p *al2Params) containerRuntime(source, v string) error {
	switch v {
	case "", "containerd":
		return nil
	case "dockerd":
		p.warnings = append(p.warnings, source+" dockerd: dockerd was removed in Kubernetes 1.24; the node runs containerd")
		return nil
	default:
		return fmt.Errorf("%q: containerd is the only supported container runtime as of Kubernetes version 1.24", v)
	}
}

// bootstrapFlag describes one bootstrap.sh flag: how it sets al2Params, or why
// nodejoin ignores it.
type bootstrapFlag struct {
	set    func(p *al2Params, v string) error
	ignore string
}

func setString(f func(*al2Params) *string) func(*al2Params, string) error {
	return func(p *al2Params, v string) error { *f(p) = v; return nil }
}

func setBool(f func(*al2Params) **bool) func(*al2Params, string) error {
	return func(p *al2Params, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", v)
		}
		*f(p) = &b
		return nil
	}
}

var bootstrapFlags = map[string]bootstrapFlag{
	"--apiserver-endpoint": {set: setString(func(p *al2Params) *string { return &p.endpoint })},
	"--b64-cluster-ca":     {set: setString(func(p *al2Params) *string { return &p.b64CA })},
	"--service-ipv4-cidr":  {set: setString(func(p *al2Params) *string { return &p.serviceIPv4CIDR })},
	"--service-ipv6-cidr":  {set: setString(func(p *al2Params) *string { return &p.serviceIPv6CIDR })},
	"--dns-cluster-ip":     {set: setString(func(p *al2Params) *string { return &p.dnsClusterIP })},
	"--cluster-id":         {set: setString(func(p *al2Params) *string { return &p.clusterID })},
	"--local-disks":        {set: setString(func(p *al2Params) *string { return &p.localDisks })},
	"--ip-family": {set: func(p *al2Params, v string) error {
		v = strings.ToLower(v)
		if v != "ipv4" && v != "ipv6" {
			return fmt.Errorf("want ipv4 or ipv6, got %q", v)
		}
		p.ipFamily = v
		return nil
	}},
	"--kubelet-extra-args": {set: func(p *al2Params, v string) error {
		args, err := shell.Fields(v, nil)
		if err != nil {
			return fmt.Errorf("splitting %q into arguments: %w", v, err)
		}
		p.kubeletArgs = append(p.kubeletArgs, args...)
		return nil
	}},
	"--use-max-pods":         {set: setBool(func(p *al2Params) **bool { return &p.useMaxPods })},
	"--enable-local-outpost": {set: setBool(func(p *al2Params) **bool { return &p.outpost })},
	"--aws-api-retry-attempts": {set: func(p *al2Params, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 20 {
			return fmt.Errorf("want a number from 0 to 20, got %q", v)
		}
		p.retries = n
		return nil
	}},
	"--container-runtime":       {set: func(p *al2Params, v string) error { return p.containerRuntime("--container-runtime", v) }},
	"--containerd-config-file":  {ignore: "it names a file on the AL2 AMI, which nodeadm cannot read from user data; put its settings in spec.containerd.config"},
	"--docker-config-json":      {ignore: "dockerd was removed in Kubernetes 1.24; nodejoin runs containerd"},
	"--enable-docker-bridge":    {ignore: "dockerd was removed in Kubernetes 1.24; nodejoin runs containerd"},
	"--pause-container-account": {ignore: "nodejoin uses the sandbox image configured in containerd and never pulls it at boot"},
	"--pause-container-version": {ignore: "nodejoin uses the sandbox image configured in containerd and never pulls it at boot"},
	"--mount-bpf-fs":            {ignore: "the BPF file system is the host image's concern, not the node configuration's"},
}

// parseBootstrapArgs reads bootstrap.sh's command line: the cluster name and flags, each
// flag with a value ("--flag value" as bootstrap.sh takes it, or "--flag=value").
func parseBootstrapArgs(args []string, where string) (*al2Params, []Finding, error) {
	p := &al2Params{where: where, retries: 3}
	var findings []Finding
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			positional = append(positional, a)
			continue
		}
		if a == "-h" || a == "--help" {
			return nil, nil, fmt.Errorf("%s: bootstrap.sh is called with %s, which prints help and fails", where, a)
		}
		name, value, hasValue := strings.Cut(a, "=")
		flag, ok := bootstrapFlags[name]
		if !ok {
			return nil, nil, fmt.Errorf("%s: unknown bootstrap.sh flag %s (known: %s)", where, name, strings.Join(sortedKeys(bootstrapFlags), ", "))
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("%s: bootstrap.sh flag %s has no value", where, name)
			}
			i++
			value = args[i]
		}
		if flag.ignore != "" {
			findings = append(findings, Finding{Part: where, Level: LevelIgnored, Msg: fmt.Sprintf("bootstrap.sh %s %s: %s", name, value, flag.ignore)})
			continue
		}
		if err := flag.set(p, value); err != nil {
			return nil, nil, fmt.Errorf("%s: bootstrap.sh flag %s: %w", where, name, err)
		}
	}
	switch len(positional) {
	case 0:
		return nil, nil, fmt.Errorf("%s: bootstrap.sh is called without a cluster name", where)
	case 1:
	default:
		return nil, nil, fmt.Errorf("%s: bootstrap.sh takes one cluster name, got %q (a flag value with spaces needs quotes)", where, positional)
	}
	p.clusterName = positional[0]
	return p, findings, nil
}

// eksDefaultDNS maps the cluster DNS address of EKS's two default service ranges back
// to the range.
var eksDefaultDNS = map[string]string{"10.100.0.10": "10.100.0.0/16", "172.20.0.10": "172.20.0.0/16"}

// build turns AL2 inputs into a NodeConfig, asking r for what they leave out exactly
// where bootstrap.sh would have asked AWS.
func (p *al2Params) build(ctx context.Context, r Resolver) (*v1alpha1.NodeConfig, []Finding, error) {
	var findings []Finding
	info := func(format string, args ...any) {
		findings = append(findings, Finding{Part: p.where, Level: LevelInfo, Msg: fmt.Sprintf(format, args...)})
	}
	for _, w := range p.warnings {
		findings = append(findings, Finding{Part: p.where, Level: LevelWarning, Msg: w})
	}
	c := newNodeConfig()
	cl := &c.Spec.Cluster
	cl.Name, cl.APIServerEndpoint, cl.ID, cl.EnableOutpost = p.clusterName, p.endpoint, p.clusterID, p.outpost
	if p.b64CA != "" {
		ca, err := base64.StdEncoding.DecodeString(strings.TrimSpace(p.b64CA))
		if err != nil {
			field := p.caField
			if field == "" {
				field = "--b64-cluster-ca"
			}
			return nil, nil, fmt.Errorf("%s: %s is not base64: %w", p.where, field, err)
		}
		cl.CertificateAuthority = ca
	}
	net := serviceNet{v4: p.serviceIPv4CIDR, v6: p.serviceIPv6CIDR, family: p.ipFamily}
	if p.endpoint == "" || p.b64CA == "" {
		if err := p.describe(ctx, r, cl, &net); err != nil {
			return nil, nil, err
		}
		info("endpoint, CA and service CIDR of cluster %s come from EKS DescribeCluster", p.clusterName)
	}
	dns, err := p.dnsIPs()
	if err != nil {
		return nil, nil, err
	}
	if cl.CIDR, err = p.serviceCIDR(ctx, r, net, dns, info); err != nil {
		return nil, nil, err
	}
	if len(dns) > 0 {
		if err := setKubeletConfig(c, "clusterDNS", dns); err != nil {
			return nil, nil, err
		}
	}
	if err := p.kubeletOptions(c, info); err != nil {
		return nil, nil, err
	}
	if p.localDisks != "" {
		strategy := map[string]v1alpha1.LocalStorageStrategy{"mount": v1alpha1.LocalStorageMount, "raid0": v1alpha1.LocalStorageRAID0, "raid10": v1alpha1.LocalStorageRAID10}[p.localDisks]
		if strategy == "" {
			return nil, nil, fmt.Errorf("%s: --local-disks %q: want mount, raid0 or raid10", p.where, p.localDisks)
		}
		c.Spec.Instance.LocalStorage.Strategy = strategy
	}
	return c, findings, nil
}

// serviceNet is what is known of the cluster's service network.
type serviceNet struct{ v4, v6, family string }

// describe fills what the flags left out from EKS DescribeCluster.
func (p *al2Params) describe(ctx context.Context, r Resolver, cl *v1alpha1.ClusterDetails, net *serviceNet) error {
	if r == nil {
		return fmt.Errorf("%s: bootstrap.sh gives no %s for cluster %s, so EKS DescribeCluster must supply it: %w", p.where, missingWhat(p), p.clusterName, ErrNoResolver)
	}
	d, err := r.DescribeCluster(ctx, p.clusterName, p.retries)
	if err != nil {
		return fmt.Errorf("%s: describing cluster %s: %w", p.where, p.clusterName, err)
	}
	if cl.APIServerEndpoint == "" {
		cl.APIServerEndpoint = d.Endpoint
	}
	if len(cl.CertificateAuthority) == 0 {
		cl.CertificateAuthority = d.CertificateData
	}
	if net.v4 == "" {
		net.v4 = d.ServiceIPv4CIDR
	}
	if net.v6 == "" {
		net.v6 = d.ServiceIPv6CIDR
	}
	if net.family == "" {
		net.family = strings.ToLower(d.IPFamily)
	}
	if cl.ID == "" {
		cl.ID = d.ID
	}
	if cl.EnableOutpost == nil && d.Outpost {
		yes := true
		cl.EnableOutpost = &yes
	}
	return nil
}

func (p *al2Params) dnsIPs() ([]string, error) {
	if p.dnsClusterIP == "" {
		return nil, nil
	}
	var dns []string
	for _, ip := range strings.Split(p.dnsClusterIP, ",") {
		ip = strings.TrimSpace(ip)
		if _, err := netip.ParseAddr(ip); err != nil {
			return nil, fmt.Errorf("%s: --dns-cluster-ip %q: %q is not an IP address", p.where, p.dnsClusterIP, ip)
		}
		dns = append(dns, ip)
	}
	return dns, nil
}

// serviceCIDR picks the service CIDR by bootstrap.sh's rules.
func (p *al2Params) serviceCIDR(ctx context.Context, r Resolver, net serviceNet, dns []string, info func(string, ...any)) (string, error) {
	if net.v6 != "" {
		if net.family == "ipv4" && p.serviceIPv6CIDR != "" {
			return "", fmt.Errorf("%s: --ip-family should be ipv6 when --service-ipv6-cidr is specified", p.where)
		}
		net.family = "ipv6"
	}
	switch {
	case net.family == "ipv6" && net.v6 != "":
		return net.v6, nil
	case net.family == "ipv6" && len(dns) == 0:
		return "", fmt.Errorf("%s: one of --service-ipv6-cidr or --dns-cluster-ip must be provided when --ip-family is ipv6", p.where)
	case net.family != "ipv6" && net.v4 != "" && net.v4 != "None":
		return net.v4, nil
	case len(dns) > 0 && eksDefaultDNS[dns[0]] != "":
		info("service CIDR %s inferred from --dns-cluster-ip %s (EKS's default range for it)", eksDefaultDNS[dns[0]], dns[0])
		return eksDefaultDNS[dns[0]], nil
	}
	// bootstrap.sh's rule: EKS picks 172.20.0.0/16 when the VPC uses 10.0.0.0/8.
	if r == nil {
		return "", fmt.Errorf("%s: no service CIDR or cluster DNS address given; give --service-ipv4-cidr (or --dns-cluster-ip), or run where instance metadata tells the VPC's range: %w", p.where, ErrNoResolver)
	}
	blocks, err := r.VPCIPv4CIDRs(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: reading the VPC's CIDR blocks to choose the service CIDR: %w", p.where, err)
	}
	cidr := "10.100.0.0/16"
	if slices.ContainsFunc(blocks, func(b string) bool { return strings.HasPrefix(b, "10.") }) {
		cidr = "172.20.0.0/16"
	}
	info("service CIDR %s chosen as bootstrap.sh does: the VPC's blocks are %v; give --service-ipv4-cidr to be sure", cidr, blocks)
	return cidr, nil
}

func (p *al2Params) kubeletOptions(c *v1alpha1.NodeConfig, info func(string, ...any)) error {
	c.Spec.Kubelet.Flags = p.kubeletArgs
	if p.maxPods > 0 {
		if err := setKubeletConfig(c, "maxPods", p.maxPods); err != nil {
			return err
		}
	}
	if p.useMaxPods != nil && !*p.useMaxPods && p.maxPods == 0 {
		// bootstrap.sh then leaves maxPods out of the kubelet config, so the kubelet's
		// own default applies unless a --max-pods flag says otherwise.
		if err := setKubeletConfig(c, "maxPods", 110); err != nil {
			return err
		}
		info("--use-max-pods false: maxPods is the kubelet's default, 110, unless --kubelet-extra-args sets --max-pods")
	}
	if slices.ContainsFunc(p.kubeletArgs, func(a string) bool { return strings.HasPrefix(a, "--reserved-cpus") }) {
		// bootstrap.sh drops the reserved cgroups when CPUs are reserved.
		for _, k := range []string{"kubeReservedCgroup", "systemReservedCgroup"} {
			if err := setKubeletConfig(c, k, ""); err != nil {
				return err
			}
		}
		info("--reserved-cpus given: kubeReservedCgroup and systemReservedCgroup are left empty, as bootstrap.sh does")
	}
	return nil
}

func missingWhat(p *al2Params) string {
	switch {
	case p.endpoint == "" && p.b64CA == "":
		return "--apiserver-endpoint or --b64-cluster-ca"
	case p.endpoint == "":
		return "--apiserver-endpoint"
	default:
		return "--b64-cluster-ca"
	}
}

// translateShell finds the bootstrap.sh call of a shell script and translates it, and
// its cfn-signal call, if any.
func translateShell(ctx context.Context, p *Part, r Resolver) ([]*v1alpha1.NodeConfig, []Finding, *Signal, error) {
	name := p.Name()
	calls, err := scanScript(p.Body, name, false)
	if err != nil {
		return nil, nil, nil, err
	}
	sig, sigFindings := pickSignal(calls.signals, name)
	sigFindings = append(sigFindings, calls.findings...)
	call := calls.bootstrap
	if call == nil {
		msg := "shell script without a bootstrap.sh call: nodeadm does not run scripts (cloud-init does, where it runs)"
		if sig != nil {
			msg = "shell script without a bootstrap.sh call: nodeadm does not run scripts (cloud-init does, where it runs); it reads its cfn-signal call only"
		}
		return nil, append([]Finding{{Part: name, Level: LevelIgnored, Msg: msg}}, sigFindings...), sig, nil
	}
	params, findings, err := parseBootstrapArgs(call.Args, name)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (the bootstrap.sh call on line %d of the part's script)", err, call.Line)
	}
	cfg, more, err := params.build(ctx, r)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (the bootstrap.sh call on line %d of the part's script)", err, call.Line)
	}
	findings = append([]Finding{{Part: name, Level: LevelInfo, Msg: fmt.Sprintf("line %d: bootstrap.sh call for cluster %s translated to a NodeConfig; the rest of the script is not run by nodeadm", call.Line, params.clusterName)}}, findings...)
	findings = append(findings, more...)
	return []*v1alpha1.NodeConfig{cfg}, append(findings, sigFindings...), sig, nil
}

// pickSignal keeps the first of a script's cfn-signal calls: a node signals once per
// boot.
func pickSignal(sigs []*Signal, part string) (*Signal, []Finding) {
	if len(sigs) == 0 {
		return nil, nil
	}
	out := []Finding{{Part: part, Level: LevelInfo, Msg: sigs[0].Explain()}}
	for _, s := range sigs[1:] {
		out = append(out, Finding{Part: part, Level: LevelWarning, Msg: fmt.Sprintf("line %d: another cfn-signal call, ignored: a node signals once per boot (the call on line %d is the one sent)", s.Line, sigs[0].Line)})
	}
	return sigs[0], out
}
