// Package cpnode runs the local cluster's control-plane node: containerd and a real
// kubelet in the cluster namespace, beside kube-apiserver, registered with the
// node-role.kubernetes.io/control-plane label and NoSchedule taint, as kubeadm's
// control-plane nodes are. It is where the cluster's own controllers can run as pods
// (nodejoin-controller's chart places them on control-plane nodes), and its kube-proxy
// programs the cluster namespace so that kube-apiserver reaches Service ClusterIPs.
// A second node (Config.Index 1) runs in a namespace of its own, joined to the
// cluster bridge as an instance is, so that two replicas can use the same host ports.
//
// The node joins once, with a client certificate the cluster CA issues directly
// (controlplane.Cluster.WriteControlPlaneKubelet: the one first bootstrap, as
// `kubeadm init` writes kubelet.conf); it is no EC2 instance and has no instance
// metadata. nodeadm's renderer (nodeadm/bootstrap) writes its containerd and kubelet
// files from a NodeConfig this package builds, and nodeadm's process manager runs the
// two daemons, wrapped into the cluster namespace, as it runs local instances'.
package cpnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// HostNetworkOnlyTaint says that the control-plane node has no pod network: only pods
// with hostNetwork can run there. CoreDNS tolerates the control-plane taint, as on EKS
// and kubeadm, and would otherwise be scheduled there and never start. Pods meant for
// the node (the controller's chart: placement.tolerations) tolerate it too; kube-proxy
// and aws-node tolerate every taint.
var HostNetworkOnlyTaint = corev1.Taint{Key: "nodejoin.io/host-network-only", Effect: corev1.TaintEffectNoSchedule}

// Config says how to run the control-plane node.
type Config struct {
	// Cluster is the running control plane; it must run in a network namespace.
	Cluster *controlplane.Cluster
	// Index is the node's place among the cluster's control-plane nodes (from 0, fewer
	// than controlplane.MaxControlPlaneNodes). The first runs in the cluster namespace
	// at the bridge address; another runs in a namespace of its own, joined to the
	// bridge as an instance is, at controlplane.Options.ControlPlaneNodeAddr.
	Index int
	// NodeName is the Node's name. Default "<cluster>-control-plane".
	NodeName string
	// Root is the node's file system root. Default instance.RootBase(cluster)/control-plane.
	Root string
	// KubeletPath and ContainerdPath are the daemons' binaries.
	KubeletPath, ContainerdPath string
	// ImageArchives are imported into the node's containerd before it starts (the
	// pause image, kube-proxy's, the controller's).
	ImageArchives []string
	// Region and Zone label the Node as the instances' are. Default us-west-2, us-west-2a.
	Region, Zone string
	// ReadyTimeout bounds the wait for the Node to be Ready. Default 3 minutes.
	ReadyTimeout time.Duration
}

// Node is a running control-plane node.
type Node struct {
	cfg        Config
	ns         netns.NS
	addr       netip.Addr
	cgroupRoot string
}

// Name is the Node's name.
func (n *Node) Name() string { return n.cfg.NodeName }

// Root is the node's file system root (its logs are under var/log).
func (n *Node) Root() string { return n.cfg.Root }

func (c *Config) complete() error {
	if c.Cluster == nil || c.Cluster.Namespace().Name == "" {
		return errors.New("a control-plane node needs the cluster's network namespace (run as root with --network namespace)")
	}
	name := c.Cluster.Name()
	if c.Index < 0 || c.Index >= controlplane.MaxControlPlaneNodes {
		return fmt.Errorf("control-plane node %d: a cluster has %d at most", c.Index+1, controlplane.MaxControlPlaneNodes)
	}
	if c.NodeName == "" {
		c.NodeName = defaultNodeName(name, c.Index)
	}
	if err := controlplane.ValidNodeName(c.NodeName); err != nil {
		return err
	}
	if c.Root == "" {
		c.Root = filepath.Join(instance.RootBase(name), rootName(c.Index))
	}
	if c.KubeletPath == "" || c.ContainerdPath == "" {
		return errors.New("a control-plane node needs the kubelet and containerd binaries")
	}
	if c.Region == "" {
		c.Region = "us-west-2"
	}
	if c.Zone == "" {
		c.Zone = c.Region + "a"
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 3 * time.Minute
	}
	return nil
}

// Start writes the node's files, imports its images, starts containerd and the kubelet
// in the cluster namespace, and returns once the Node is Ready and marked as a
// control-plane node. On failure it stops what it started.
func Start(ctx context.Context, cfg Config) (n *Node, err error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.Root); err == nil {
		return nil, fmt.Errorf("control-plane node root %s exists already (left by an earlier cluster? remove it with `nodejoin down --name %s`)", cfg.Root, cfg.Cluster.Name())
	}
	opts := cfg.Cluster.Options()
	addr, err := opts.ControlPlaneNodeAddr(cfg.Index)
	if err != nil {
		return nil, err
	}
	n = &Node{cfg: cfg, ns: cfg.Cluster.Namespace(), addr: addr, cgroupRoot: cgroupRoot(cfg.Cluster.Name(), cfg.Index)}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("control-plane node %s: %w", cfg.NodeName, err), n.Stop(context.WithoutCancel(ctx)))
		}
	}()
	if cfg.Index > 0 {
		if n.ns, err = n.joinBridge(ctx); err != nil {
			return n, err
		}
	}
	if err := n.writeFiles(ctx); err != nil {
		return n, err
	}
	if err := n.importImages(ctx); err != nil {
		return n, err
	}
	if cfg.Index == 0 {
		// A further node's default route is the bridge's, which the service range
		// takes too.
		if err := n.routeServices(ctx); err != nil {
			return n, err
		}
	}
	if err := instance.CreateCgroup(n.cgroupRoot); err != nil {
		return n, err
	}
	mgr := n.manager()
	for _, d := range bootstrap.Daemons {
		if err := mgr.Restart(ctx, d); err != nil {
			return n, fmt.Errorf("starting %s: %w (log: %s)", d, err, filepath.Join(cfg.Root, "var/log", d+".log"))
		}
	}
	client, err := kubernetes.NewForConfig(cfg.Cluster.RESTConfig())
	if err != nil {
		return n, err
	}
	if err := n.waitRegistered(ctx, client); err != nil {
		return n, err
	}
	if err := controlplane.MarkControlPlane(ctx, client, cfg.NodeName); err != nil {
		return n, err
	}
	return n, n.waitReady(ctx, client)
}

func (n *Node) manager() bootstrap.ProcessManager {
	return bootstrap.ProcessManager{
		Root:     n.cfg.Root,
		Binaries: map[string]string{bootstrap.Kubelet: n.cfg.KubeletPath, bootstrap.Containerd: n.cfg.ContainerdPath},
		Wrap:     n.ns.Wrap,
	}
}

// nodeConfig is what the node's files are rendered from: the cluster, and the same
// host adaptations as a local instance's local NodeConfig (instance.writeLocalFiles),
// with the kubelet registering the control-plane taint itself.
func (s site) nodeConfig(cfg *Config, cgroupRoot string) (*v1alpha1.NodeConfig, error) {
	root := cfg.Root
	kubelet := map[string]any{
		"failCgroupV1": false, "cgroupDriver": "cgroupfs", "cgroupRoot": cgroupRoot, "failSwapOn": false,
		"protectKernelDefaults":       false,
		"volumePluginDir":             filepath.Join(root, "usr/libexec/kubernetes/kubelet-plugins/volume/exec"),
		"podLogsDir":                  filepath.Join(root, "var/log/pods"),
		"resolvConf":                  filepath.Join(root, instance.ResolvConfPath),
		"imageGCHighThresholdPercent": 100,
		"evictionHard": map[string]string{
			"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%", "imagefs.inodesFree": "0%",
		},
	}
	kdoc, err := inline(kubelet)
	if err != nil {
		return nil, err
	}
	spec, err := inline(instance.LocalRuntimeSpec())
	if err != nil {
		return nil, err
	}
	return &v1alpha1.NodeConfig{Spec: v1alpha1.NodeConfigSpec{
		Cluster: v1alpha1.ClusterDetails{Name: s.Name, APIServerEndpoint: s.Endpoint, CertificateAuthority: s.CAPEM,
			CIDR: s.ServiceCIDR.Masked().String()},
		Kubelet: v1alpha1.KubeletOptions{Config: kdoc, Flags: []string{
			// The taint from the first registration on: no pod lands here before
			// MarkControlPlane. The role label is MarkControlPlane's: the kubelet
			// refuses node-role.kubernetes.io/ labels in --node-labels.
			"--register-with-taints=" + controlplane.ControlPlaneTaint.Key + "=:" + string(controlplane.ControlPlaneTaint.Effect) +
				"," + HostNetworkOnlyTaint.Key + "=:" + string(HostNetworkOnlyTaint.Effect),
			// No cloud controller initializes this node (it is no EC2 instance): without
			// an external cloud provider the kubelet sets its addresses itself and no
			// node.cloudprovider.kubernetes.io/uninitialized taint waits for one.
			"--cloud-provider=",
			// No instance behind it: the VPC network add-on keeps off.
			"--node-labels=" + corev1.LabelTopologyRegion + "=" + cfg.Region + "," + corev1.LabelTopologyZone + "=" + cfg.Zone +
				"," + addons.NoInstanceLabel + "=true",
		}},
		Containerd: v1alpha1.ContainerdOptions{Config: instance.LocalContainerdConfig(root), BaseRuntimeSpec: spec},
	}}, nil
}

// site is what the node's files say of the cluster and its network.
type site struct {
	Name, Endpoint        string
	CAPEM                 []byte
	ServiceCIDR, NodeCIDR netip.Prefix
	// Addr is the node's address.
	Addr netip.Addr
}

// render renders the node's files as nodeadm would for an instance of this name and
// address, for a kubelet of version.
func (s site) render(cfg *Config, cgroupRoot, version string) (*bootstrap.Rendered, error) {
	nc, err := s.nodeConfig(cfg, cgroupRoot)
	if err != nil {
		return nil, err
	}
	md := &bootstrap.Metadata{
		InstanceID: "control-plane", InstanceType: "m5.large", Region: cfg.Region, AvailabilityZone: cfg.Zone,
		LocalIPv4: s.Addr.String(), PrivateDNSName: cfg.NodeName, LocalHostname: cfg.NodeName,
		VPCIPv4CIDRs: []string{s.NodeCIDR.Masked().String()},
	}
	rendered, err := bootstrap.Render(nc, md, bootstrap.Options{
		Root: cfg.Root, KubeletVersion: version, CPUMillis: 2000, InstanceTypes: instancetypes.Lookup,
		CNIBinDir: filepath.Join(cfg.Root, instance.CNIBinDir),
	})
	if err != nil {
		return nil, fmt.Errorf("rendering its files: %w", err)
	}
	return rendered, nil
}

func inline(v any) (v1alpha1.InlineDocument, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc v1alpha1.InlineDocument
	return doc, json.Unmarshal(data, &doc)
}

// writeFiles renders and writes the node's files, then replaces the kubelet's
// kubeconfig (nodeadm's names its credential plugin) with the certificate one.
func (n *Node) writeFiles(ctx context.Context) error {
	c := n.cfg.Cluster
	root := n.cfg.Root
	caPEM, err := os.ReadFile(c.CAFile())
	if err != nil {
		return err
	}
	opts := c.Options()
	st := site{Name: c.Name(), Endpoint: c.InternalEndpoint(), CAPEM: caPEM, ServiceCIDR: opts.ServiceCIDR, NodeCIDR: opts.NodeCIDR, Addr: n.addr}
	ans, err := bootstrap.KubeletVersion(ctx, n.cfg.KubeletPath, "")
	if err != nil {
		return err
	}
	rendered, err := st.render(&n.cfg, n.cgroupRoot, strings.TrimPrefix(strings.TrimSpace(ans.Text), "Kubernetes "))
	if err != nil {
		return err
	}
	if _, err := rendered.Files.Write(root); err != nil {
		return err
	}
	if err := c.WriteControlPlaneKubelet(controlplane.KubeletClientCert{
		NodeName:       n.cfg.NodeName,
		CertPath:       filepath.Join(root, "var/lib/kubelet/pki/kubelet-client-current.pem"),
		KubeconfigPath: filepath.Join(root, bootstrap.KubeconfigPath),
		// No controller approves this node's serving CSR (it is no instance of the
		// inventory): its first serving certificate comes from the CA too.
		ServingCertPath: filepath.Join(root, "var/lib/kubelet/pki/kubelet-server-current.pem"),
		Addresses:       []netip.Addr{st.Addr},
	}); err != nil {
		return err
	}
	dns, err := nodeconfig.ClusterDNS(c.Options().ServiceCIDR.Masked().String())
	if err != nil {
		return err
	}
	resolv := "# Written by nodejoin for the control-plane node's kubelet (resolvConf): the cluster's DNS only.\nnameserver " + dns + "\n"
	if err := atomicfile.WriteFile(filepath.Join(root, instance.ResolvConfPath), []byte(resolv), 0o644); err != nil {
		return err
	}
	for _, d := range []string{instance.CNIBinDir, instance.CNIConfDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil { //nolint:gosec // G301: the node's CNI directories, traversable by its daemons.
			return err
		}
	}
	if err := n.writeCNIConfig(); err != nil {
		return err
	}
	return n.linkNodeDir()
}

// linkNodeDir makes RootBase/nodes/<node name> point at the node's root, as a local
// instance's: the network add-on's init container, which tolerates every taint, finds
// the node's CNI directories there (else it would create a directory of its own).
func (n *Node) linkNodeDir() error {
	dir := filepath.Join(filepath.Dir(n.cfg.Root), instance.NodesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: the sandbox's node index, as instances' (instance.linkNodeDir).
		return err
	}
	link := filepath.Join(dir, n.cfg.NodeName)
	_ = os.Remove(link)
	return os.Symlink(filepath.Join("..", filepath.Base(n.cfg.Root)), link)
}

// terminateUnder stops every process (but this one) whose command line names a path
// under root: the node's containerd shims.
func terminateUnder(root string) {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), root+"/") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if id, err := process.IdentityOf(pid); err == nil {
			process.Terminate(id, 5*time.Second)
		}
	}
}

// writeCNIConfig gives the node a network configuration, so that its runtime reports
// the network ready: the pods it runs (kube-proxy, the network add-on, the
// controller) use the host network, the cluster namespace's. A pod without host
// network gets none: CNI finds no plugin to add it with, and the pod stays pending
// with that error, rather than taking an address the VPC does not route here.
func (n *Node) writeCNIConfig() error {
	conf := `{"cniVersion":"1.0.0","name":"control-plane-host-network-only","plugins":[{"type":"nodejoin-host-network-only"}]}` + "\n"
	return atomicfile.WriteFile(filepath.Join(n.cfg.Root, instance.CNIConfDir, "05-control-plane.conflist"), []byte(conf), 0o644)
}

// importImages imports the image archives into the node's containerd store.
func (n *Node) importImages(ctx context.Context) error {
	if len(n.cfg.ImageArchives) == 0 {
		return nil
	}
	root := n.cfg.Root
	state := filepath.Join(root, "run/containerd-import")
	c, err := instance.StartContainerd(ctx, n.cfg.ContainerdPath, filepath.Join(root, "var/lib/containerd"), state, filepath.Join(root, instance.ImportLog))
	if err != nil {
		return err
	}
	defer func() {
		c.Stop()
		_ = os.RemoveAll(state)
	}()
	for _, a := range n.cfg.ImageArchives {
		if err := instance.ImportArchive(ctx, c.Socket, a); err != nil {
			return err
		}
	}
	return nil
}

// routeServices routes the service range out of the bridge in the cluster namespace.
// kube-apiserver's connections to a ClusterIP need a route to exist before the
// kube-proxy's DNAT (in the OUTPUT chain, after the first route lookup) rewrites them
// to an endpoint; without one they fail at once with "network is unreachable", as
// they did before this node existed.
func (n *Node) routeServices(ctx context.Context) error {
	opts := n.cfg.Cluster.Options()
	return n.ns.IP(ctx, "route", "replace", opts.ServiceCIDR.Masked().String(), "dev", controlplane.BridgeName,
		"src", opts.BridgeAddr().String())
}

func (n *Node) waitRegistered(ctx context.Context, client kubernetes.Interface) error {
	return n.wait(ctx, "registered", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
		return err == nil, nil
	})
}

func (n *Node) waitReady(ctx context.Context, client kubernetes.Interface) error {
	return n.wait(ctx, "Ready", func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // kube-apiserver may be busy: ask again until the timeout
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

func (n *Node) wait(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, n.cfg.ReadyTimeout, true, cond)
	if err != nil {
		return fmt.Errorf("the Node was not %s within %s: %s (kubelet log: %s)", what, n.cfg.ReadyTimeout,
			instance.LastErrorLine(filepath.Join(n.cfg.Root, instance.KubeletLog)), filepath.Join(n.cfg.Root, instance.KubeletLog))
	}
	return nil
}

// Stop stops the kubelet, then containerd and what its pods left, unmounts and removes
// the node's root and cgroup, and the service route. The Node object stays.
func (n *Node) Stop(ctx context.Context) error {
	err := cleanup(n.cfg.Root, n.cgroupRoot, n.cfg.NodeName)
	if n.cfg.Index > 0 {
		// The veth pair goes with the namespace.
		return errors.Join(err, netns.Delete(ctx, nsName(n.cfg.Cluster.Name(), n.cfg.Index)))
	}
	if n.ns.Exists() {
		opts := n.cfg.Cluster.Options()
		_ = n.ns.IP(ctx, "route", "del", opts.ServiceCIDR.Masked().String(), "dev", controlplane.BridgeName)
	}
	return err
}

// Cleanup removes what the control-plane node of cluster left on the host (its
// daemons, cgroup, mounts and root, at their default places) after its `nodejoin up`
// crashed or was killed; nothing when it has none. The cluster namespace, with the
// service route, goes with the control plane.
func Cleanup(cluster string) error {
	var errs []error
	for i := range controlplane.MaxControlPlaneNodes {
		errs = append(errs, cleanup(filepath.Join(instance.RootBase(cluster), rootName(i)), cgroupRoot(cluster, i), defaultNodeName(cluster, i)))
		if i > 0 {
			errs = append(errs, netns.Delete(context.Background(), nsName(cluster, i)))
		}
	}
	return errors.Join(errs...)
}

// suffix tells control-plane node i from the first: "", "-2", ...
func suffix(i int) string {
	if i == 0 {
		return ""
	}
	return "-" + strconv.Itoa(i+1)
}

func defaultNodeName(cluster string, i int) string { return cluster + "-control-plane" + suffix(i) }

func rootName(i int) string { return "control-plane" + suffix(i) }

func cgroupRoot(cluster string, i int) string { return "/nodejoin/" + cluster + "/" + rootName(i) }

// nsName is the namespace of control-plane node i > 0; the first's is the cluster's.
func nsName(cluster string, i int) string { return "nodejoin-" + cluster + "-cp" + suffix(i) }

func cleanup(root, cgroup, nodeName string) error {
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	m := bootstrap.ProcessManager{Root: root}
	for _, d := range []string{bootstrap.Kubelet, bootstrap.Containerd} {
		if id, err := bootstrap.ReadPIDFile(m.PIDFile(d)); err == nil {
			process.Terminate(id, 15*time.Second)
		}
	}
	// containerd's shims outlive it; they run in the cluster namespace beside
	// kube-apiserver, so they are found by the socket under root they name.
	terminateUnder(root)
	var errs []error
	// The containers live in the node's cgroup.
	if err := instance.RemoveCgroup(cgroup); err != nil {
		errs = append(errs, err)
	}
	if err := instance.UnmountAll(root); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(root); err != nil {
		errs = append(errs, err)
	}
	// The network add-on's index entry for the node, and the index once empty.
	nodes := filepath.Join(filepath.Dir(root), instance.NodesDir)
	_ = os.Remove(filepath.Join(nodes, nodeName))
	_ = os.Remove(nodes)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning up the control-plane node: %w", err)
	}
	return nil
}

// Addr is the node's address: the bridge's in the cluster namespace for the first.
func (n *Node) Addr() netip.Addr { return n.addr }

// joinBridge creates the namespace of a further node and joins it to the cluster
// bridge, as an instance's eth0 is, with a fixed locally administered MAC.
func (n *Node) joinBridge(ctx context.Context) (netns.NS, error) {
	c := n.cfg.Cluster
	opts := c.Options()
	ns, err := netns.Create(ctx, nsName(c.Name(), n.cfg.Index))
	if err != nil {
		return ns, err
	}
	a := n.addr.As4()
	port := instance.BridgePort{ClusterNS: c.Namespace(), Bridge: controlplane.BridgeName, Name: "njcp" + strconv.Itoa(n.cfg.Index+1),
		MAC: fmt.Sprintf("02:6e:6a:%02x:%02x:%02x", a[1], a[2], a[3]), Addr: netip.PrefixFrom(n.addr, opts.NodeCIDR.Bits()), Gateway: opts.BridgeAddr()}
	return ns, port.Attach(ctx, ns)
}
