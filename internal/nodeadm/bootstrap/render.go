package bootstrap

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
)

// Metadata is what the instance's metadata service says about it.
type Metadata struct {
	InstanceID       string
	InstanceType     string
	Region           string
	AvailabilityZone string
	MAC              string
	LocalIPv4        string
	IPv6             []string
	// PrivateDNSName is the instance's private DNS name as EC2 reports it, the node's
	// name (see ResolvePrivateDNSName).
	PrivateDNSName string
	// LocalHostname is IMDS local-hostname, which a custom DHCP domain makes differ.
	LocalHostname string
	VPCIPv4CIDRs  []string
}

// Options tune rendering to the host.
type Options struct {
	// Root is where the node's file system starts: "/" on a real host, an instance's
	// directory for a local instance. Paths inside the files point under it too.
	Root string
	// KubeletVersion such as v1.37.1 switches version-dependent settings.
	KubeletVersion string
	// CPUMillis is the host's online CPU in millicores, for kubeReserved.
	CPUMillis int
	// InstanceTypes looks up max-pods inputs; nil or a miss falls back to 110 pods.
	InstanceTypes func(string) (nodeconfig.ENIInfo, bool)
	// NodeadmPath is the nodeadm binary the kubeconfig's credential plugin runs.
	NodeadmPath string
	// BootstrapToken, when set, makes the kubelet join with a bootstrap token
	// instead of the AWS-style credential plugin.
	BootstrapToken string
	// CNIBinDir is where the CNI plugins are installed. Default /opt/cni/bin.
	CNIBinDir string
	// KubeletGates checks every feature gate written for the kubelet (nodeadm's and
	// spec.kubelet.config's) against the kubelet that will run: a setting it refuses is
	// dropped with a warning. Nil checks nothing.
	KubeletGates GateChecker
}

// The files nodeadm writes, as paths on the node.
const (
	CAPath                  = "/etc/kubernetes/pki/ca.crt"
	KubeletConfigPath       = "/etc/kubernetes/kubelet/config.json"
	KubeletDropInDir        = "/etc/kubernetes/kubelet/config.json.d"
	KubeletDropInPath       = KubeletDropInDir + "/40-nodeadm.conf"
	KubeconfigPath          = "/var/lib/kubelet/kubeconfig"
	BootstrapKubeconfigPath = "/var/lib/kubelet/bootstrap-kubeconfig"
	KubeletEnvPath          = "/etc/eks/kubelet/environment"
	ContainerdConfigPath    = "/etc/containerd/config.toml"
	BaseRuntimeSpecPath     = "/etc/containerd/base-runtime-spec.json"
	// KubeletArgsVar is the environment file's variable that holds the kubelet's flags.
	KubeletArgsVar = "NODEADM_KUBELET_ARGS"
)

// Rendered is the outcome of Render.
type Rendered struct {
	Files Files
	// KubeletArgs is the kubelet's full command line after the binary.
	KubeletArgs []string
	// MaxPods is the max pods value nodeadm computed (the user's drop-in may override).
	MaxPods int
	// Warnings are fallbacks taken, such as an unknown instance type.
	Warnings []string
}

// Render computes every file of the node from a merged, valid configuration.
func Render(cfg *v1alpha1.NodeConfig, md *Metadata, o Options) (*Rendered, error) {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.NodeadmPath == "" {
		o.NodeadmPath = "/usr/bin/nodeadm"
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = "/opt/cni/bin"
	}
	r := &renderer{cfg: cfg, md: md, o: o, out: &Rendered{}, gates: &gateFilter{checker: o.KubeletGates, version: o.KubeletVersion}}
	steps := []func() error{r.ca, r.kubeletConfig, r.kubeconfig, r.kubeletEnv, r.units, r.containerd}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	r.out.Files = r.out.Files.Sorted()
	return r.out, nil
}

type renderer struct {
	cfg   *v1alpha1.NodeConfig
	md    *Metadata
	o     Options
	out   *Rendered
	gates *gateFilter
}

// p maps a path on the node to where it is on this host.
func (r *renderer) p(path string) string { return filepath.Join(r.o.Root, path) }

func (r *renderer) warn(format string, args ...any) {
	r.out.Warnings = append(r.out.Warnings, fmt.Sprintf(format, args...))
}

func (r *renderer) ca() error {
	r.out.Files.add(CAPath, 0o644, r.cfg.Spec.Cluster.CertificateAuthority)
	return nil
}

func (r *renderer) versionAtLeast(v string) bool {
	return r.o.KubeletVersion != "" && semver.Compare(r.o.KubeletVersion, v) >= 0
}

func (r *renderer) kubeconfig() error {
	cl := r.cfg.Spec.Cluster
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: cl.APIServerEndpoint, CertificateAuthority: r.p(CAPath)}
	cfg.Contexts["kubelet"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "kubelet"}
	cfg.CurrentContext = "kubelet"
	if r.o.BootstrapToken != "" {
		cfg.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{Token: r.o.BootstrapToken}
		data, err := clientcmd.Write(*cfg)
		if err != nil {
			return err
		}
		// The kubelet writes its own kubeconfig, with its client certificate, after TLS
		// bootstrapping; the bootstrap one holds a secret.
		r.out.Files.add(BootstrapKubeconfigPath, 0o600, data)
		return nil
	}
	name := cl.Name
	if cl.EnableOutpost != nil && *cl.EnableOutpost && cl.ID != "" {
		name = cl.ID
	}
	args := []string{"get-token", "--cluster-name", name}
	if r.md.Region != "" {
		args = append(args, "--region", r.md.Region)
	}
	cfg.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:      "client.authentication.k8s.io/v1beta1",
		Command:         r.o.NodeadmPath,
		Args:            args,
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	r.out.Files.add(KubeconfigPath, 0o644, data)
	return nil
}

// kubeletEnv writes the kubelet's command line: nodeadm's flags sorted by name (upstream
// writes them in random order), then the user's flags in their order, so the last
// occurrence of a flag wins as the kubelet's flag parser wants.
func (r *renderer) kubeletEnv() error {
	flags := map[string]string{
		"config":          r.p(KubeletConfigPath),
		"kubeconfig":      r.p(KubeconfigPath),
		"cloud-provider":  "external",
		"runtime-cgroups": "/runtime.slice/containerd.service",
		"node-ip":         r.nodeIP(),
	}
	if r.o.BootstrapToken != "" {
		flags["bootstrap-kubeconfig"] = r.p(BootstrapKubeconfigPath)
	}
	if len(r.cfg.Spec.Kubelet.Config) > 0 {
		flags["config-dir"] = r.p(KubeletDropInDir)
	}
	if r.cfg.Spec.Enabled(v1alpha1.FeatureInstanceIDNodeName) {
		flags["hostname-override"] = r.md.InstanceID
	} else {
		flags["hostname-override"] = r.md.PrivateDNSName
	}
	if r.o.Root != "/" {
		flags["root-dir"] = r.p("/var/lib/kubelet")
		flags["cert-dir"] = r.p("/var/lib/kubelet/pki")
	}
	var args []string
	for _, k := range sortedKeys(flags) {
		if flags[k] != "" {
			args = append(args, "--"+k+"="+flags[k])
		}
	}
	args = append(args, r.cfg.Spec.Kubelet.Flags...)
	r.out.KubeletArgs = args
	for _, a := range args {
		if strings.ContainsAny(a, " \t\n\"'\\$") {
			return fmt.Errorf("kubelet flag %q contains a space, quote or $: the environment file cannot carry it intact", a)
		}
	}
	r.out.Files.add(KubeletEnvPath, 0o644, []byte(KubeletArgsVar+"="+strings.Join(args, " ")+"\n"))
	return nil
}

func (r *renderer) nodeIP() string {
	if strings.Contains(r.cfg.Spec.Cluster.CIDR, ":") && len(r.md.IPv6) > 0 {
		return r.md.IPv6[0]
	}
	return r.md.LocalIPv4
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
