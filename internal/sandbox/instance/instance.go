package instance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/process"
)

// Instance is a handle on a launched local instance (the trusted record is inventory's).
type Instance struct {
	Record
	p        *Provider
	imdsStop context.CancelFunc
	imdsDone chan error
	imdsURL  string // simulated instances: the host loopback URL of their IMDS
	token    string // the bootstrap token, a secret

	// kubeletFlags are a simulated instance's local kubelet flags (Spec.KubeletFlags),
	// which a real instance's local NodeConfig carries.
	kubeletFlags []string

	mu      sync.Mutex
	simStop context.CancelFunc
	simDone chan error
	ended   bool
}

// SimNode is what a simulated kubelet needs to know of its instance.
type SimNode struct {
	NodeName, InternalIP, ProviderID, InstanceType, Zone, Region string
	Server                                                       string
	CAPEM                                                        []byte
	// Exec is the credential plugin, as nodeadm writes it for the real kubelet;
	// BootstrapToken is set instead in bootstrap-token mode.
	Exec           *clientcmdapi.ExecConfig
	BootstrapToken string
	// Labels and Taints are what the kubelet nodeadm configures from the instance's
	// user data registers the Node with (--node-labels, --register-with-taints).
	Labels map[string]string
	Taints []corev1.Taint
}

// SimRunner runs a simulated kubelet until ctx ends.
type SimRunner func(ctx context.Context, n SimNode) error

// Start launches an instance: it enters it into EC2 as running, gives it its address,
// namespace and metadata endpoint, and writes its record. Init then configures the node
// and starts its kubelet.
func (p *Provider) Start(ctx context.Context, spec Spec) (inst *Instance, err error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, errors.New("the local provider is shutting down")
	}
	if err := spec.complete(p.cfg.ClusterNS.Name != ""); err != nil {
		return nil, err
	}
	addr, err := p.allocate()
	if err != nil {
		return nil, err
	}
	id, err := newInstanceID()
	if err != nil {
		p.release(addr)
		return nil, err
	}
	inst = &Instance{p: p, Record: Record{
		ID: id, NodeName: p.dnsName(addr), IP: addr.String(), InstanceType: spec.InstanceType,
		AMIFamily: spec.AMIFamily, Identity: spec.Identity, Role: spec.Role, Kubelet: spec.Kubelet,
		Zone: cmp.Or(spec.Zone, p.cfg.Zone), AutoScalingGroup: spec.AutoScalingGroup,
		Launched: time.Now().UTC(), Dir: filepath.Join(p.cfg.Dir, id),
	}}
	defer func() {
		if err != nil {
			err = fmt.Errorf("instance %s (%s): %w", inst.ID, inst.IP, err)
			_ = inst.terminate(context.WithoutCancel(ctx))
		}
	}()
	token := ""
	if spec.Identity == IdentityBootstrapToken {
		token = spec.BootstrapToken
		inst.token = token
	}
	cluster := p.cfg.Cluster
	if spec.Kubelet == KubeletSim && p.cfg.HostEndpoint != "" {
		cluster.Endpoint = p.cfg.HostEndpoint
	}
	userData := spec.UserData
	if len(userData) == 0 {
		if userData, err = cluster.userData(inst.AMIFamily, token, p.cfg.NodeCIDR); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(inst.Dir, 0o700); err != nil {
		return nil, err
	}
	if spec.Kubelet == KubeletReal {
		inst.Namespace = "nodejoin-" + cluster.Name + "-" + id
		inst.Root = p.nextRoot()
		if _, err := os.Stat(inst.Root); err == nil {
			return nil, fmt.Errorf("root directory %s exists already (left by an earlier cluster %s? remove it with `nodejoin down --name %s`)", inst.Root, cluster.Name, cluster.Name)
		}
		inst.CgroupRoot = "/nodejoin/" + cluster.Name + "/" + id
		inst.ClusterNamespace, inst.Bridge = p.cfg.ClusterNS.Name, p.cfg.Bridge
	}
	// Recorded before anything is created, so that a crash leaves enough to clean up.
	if err := writeRecord(&inst.Record); err != nil {
		return nil, err
	}
	li := localaws.Instance{
		ID: id, Type: spec.InstanceType, AvailabilityZone: inst.Zone, PrivateIPv4: inst.IP,
		PrivateDNSName: inst.NodeName, Role: spec.Role, UserData: userData,
		VPCIPv4CIDRs: []string{p.cfg.NodeCIDR.Masked().String()}, SubnetID: spec.SubnetID, ImageID: spec.ImageID,
	}
	if err := localaws.InstanceDefaults(&li); err != nil {
		return nil, err
	}
	if err := p.cfg.Cloud.EC2.Launch(li, localaws.WithTags(spec.Tags)); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.instances[id] = inst
	p.mu.Unlock()

	if err := inst.serveIMDS(ctx, &spec, li); err != nil {
		return nil, err
	}
	if spec.Kubelet == KubeletReal {
		if err := inst.writeLocalFiles(spec); err != nil {
			return nil, err
		}
	} else {
		inst.kubeletFlags = append([]string(nil), spec.KubeletFlags...)
	}
	return inst, nil
}

// complete fills the spec's defaults and checks it.
func (spec *Spec) complete(haveNamespace bool) error {
	if spec.Kubelet == "" {
		spec.Kubelet = KubeletReal
	}
	if spec.Kubelet == KubeletReal && !haveNamespace {
		return errors.New("a real kubelet needs the cluster's network namespace (run as root with --network namespace), or use --kubelet sim")
	}
	if spec.Identity == "" {
		spec.Identity = IdentityAWSIAM
	}
	if spec.Identity == IdentityBootstrapToken && spec.BootstrapToken == "" {
		return errors.New("identity bootstrap-token needs a bootstrap token")
	}
	if spec.InstanceType == "" {
		spec.InstanceType = "m5.large"
	}
	if spec.AMIFamily == "" {
		spec.AMIFamily = defaultAMIFamily
	}
	return nil
}

// stolenCredentials hands out another instance's role credentials.
type stolenCredentials struct {
	sts  *localaws.STS
	from string
}

func (s stolenCredentials) InstanceCredentials(_, role string) (localaws.Credentials, error) {
	return s.sts.InstanceCredentials(s.from, role)
}

// setupNetwork creates the instance's namespace and joins it to the cluster bridge:
// eth0 holds the instance's address and MAC, the default route goes through the bridge,
// and 169.254.169.254 answers on its loopback as on EC2.
func (inst *Instance) setupNetwork(ctx context.Context, mac string) error {
	p := inst.p
	ns, err := netns.Create(ctx, inst.Namespace)
	if err != nil {
		return err
	}
	addr := netip.MustParseAddr(inst.IP)
	port := BridgePort{ClusterNS: p.cfg.ClusterNS, Bridge: p.cfg.Bridge, Name: vethName(p.cfg.NodeCIDR, addr), MAC: mac,
		Addr: netip.PrefixFrom(addr, p.cfg.NodeCIDR.Bits()), Gateway: p.cfg.Gateway}
	if err := port.Attach(ctx, ns); err != nil {
		return err
	}
	return ns.IP(ctx, "addr", "add", imdsAddr.Addr().String()+"/32", "dev", "lo")
}

// BridgePort is a host's primary interface on the cluster bridge (the VPC), as an
// instance's eth0 is: a veth pair whose bridge side Name is a port of Bridge in
// ClusterNS, and whose other side is eth0 of the host's namespace, holding MAC and
// Addr, with its default route through Gateway (the VPC router).
type BridgePort struct {
	ClusterNS netns.NS
	Bridge    string
	Name, MAC string
	Addr      netip.Prefix
	Gateway   netip.Addr
}

// Attach creates the pair into ns and joins it to the bridge: the VPC router answers
// ARP for the address and forwards to the pinned MAC.
func (b BridgePort) Attach(ctx context.Context, ns netns.NS) error {
	cns := b.ClusterNS
	if err := cns.IP(ctx, "link", "add", b.Name, "type", "veth", "peer", "name", "eth0", "netns", ns.Name); err != nil {
		return err
	}
	if err := joinBridge(ctx, cns, b.Bridge, b.Name, b.MAC); err != nil {
		return err
	}
	if err := addNeighbours(ctx, cns, b.Bridge, b.MAC, []string{b.Addr.Addr().String()}); err != nil {
		return err
	}
	for _, s := range [][]string{
		{"link", "set", "eth0", "address", b.MAC},
		{"addr", "add", b.Addr.String(), "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"route", "add", "default", "via", b.Gateway.String()},
	} {
		if err := ns.IP(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// claim puts addr on the instance's loopback without answering ARP for it on eth0, so
// that the node it belongs to keeps its traffic.
func (inst *Instance) claim(ctx context.Context, addr string) error {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is4() {
		return fmt.Errorf("address to claim %q: want an IPv4 address", addr)
	}
	ns := netns.NS{Name: inst.Namespace}
	argv := ns.Wrap([]string{"sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1"})
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return ns.IP(ctx, "addr", "add", a.String()+"/32", "dev", "lo")
}

// vethName names the bridge side of an instance's veth pair by its offset in the range.
func vethName(prefix netip.Prefix, a netip.Addr) string {
	base := prefix.Masked().Addr().As4()
	b := a.As4()
	off := (int(b[2])-int(base[2]))<<8 | (int(b[3]) - int(base[3]))
	return "njv" + strconv.Itoa(off)
}

// LocalConfigPath is the NodeConfig, under an instance's root, holding what a local
// instance needs beyond its user data: the host's cgroup layout and paths kept inside
// its root. nodeadm merges it after the user data.
const LocalConfigPath = "etc/nodejoin/local-node.yaml"

// ResolvConfPath is the kubelet's resolvConf, under an instance's root.
const ResolvConfPath = "etc/nodejoin/resolv.conf"

// writeResolvConf writes the resolv.conf the kubelet hands pods: the cluster DNS
// address (kube-dns, CoreDNS) as the one name server, and no search domains. Pods with
// dnsPolicy Default (CoreDNS itself among them) and host-network pods get it as is;
// ClusterFirst pods get clusterDNS anyway and take only search domains and options
// from it. CoreDNS does not loop through it: its Corefile never forwards, so it never
// reads this file, and it answers names outside the cluster NXDOMAIN itself. An empty
// file would leave Default pods querying 127.0.0.1, which answers nothing in a node's
// namespace; the host's file would send their queries out of the sandbox.
func (inst *Instance) writeResolvConf() error {
	dns, err := nodeconfig.ClusterDNS(inst.p.cfg.Cluster.ServiceCIDR.Masked().String())
	if err != nil {
		return err
	}
	data := "# Written by nodejoin for this local node's kubelet (resolvConf): the cluster's DNS only.\n" +
		"nameserver " + dns + "\n"
	return atomicfile.WriteFile(filepath.Join(inst.Root, ResolvConfPath), []byte(data), 0o644)
}

// CNIBinDir and CNIConfDir are the node's CNI directories under its root: empty at
// launch; the network add-on's init container fills the first, its ipamd writes the
// configuration into the second once it can hand out addresses.
const (
	CNIBinDir  = "opt/cni/bin"
	CNIConfDir = "etc/cni/net.d"
)

// NodesDir holds, under a cluster's root base, one symlink per node name to its
// instance's root: the network add-on finds a node's directories there by $(NODE_NAME).
const NodesDir = "nodes"

// RootBase is the default directory of a cluster's instance roots.
func RootBase(cluster string) string { return filepath.Join("/var/lib/nodejoin", cluster) }

func (inst *Instance) writeLocalFiles(spec Spec) error {
	root := inst.Root
	kubelet := map[string]any{
		// The host runs cgroup v1 and no systemd for the kubelet.
		"failCgroupV1": false,
		"cgroupDriver": "cgroupfs",
		"cgroupRoot":   inst.CgroupRoot,
		"failSwapOn":   false,
		// Kernel defaults are the host's, not this node's.
		"protectKernelDefaults": false,
		"volumePluginDir":       filepath.Join(root, "usr/libexec/kubernetes/kubelet-plugins/volume/exec"),
		"podLogsDir":            filepath.Join(root, "var/log/pods"),
		// Pods get name servers from this file, never from the host's /etc/resolv.conf,
		// whose resolver is outside the sandbox (writeResolvConf).
		"resolvConf": filepath.Join(root, ResolvConfPath),
		// Every node shares the host's disk, and no image can be pulled again: image
		// garbage collection and disk-pressure eviction would only remove imported
		// images (the pause image too) for good.
		"imageGCHighThresholdPercent": 100,
		"evictionHard": map[string]string{
			"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%", "imagefs.inodesFree": "0%",
		},
	}
	nc := map[string]any{
		"apiVersion": "node.eks.aws/v1alpha1",
		"kind":       "NodeConfig",
		"spec": map[string]any{
			"kubelet": map[string]any{"config": kubelet, "flags": append([]string{}, spec.KubeletFlags...)},
			"containerd": map[string]any{
				"config":          localContainerdConfig(root),
				"baseRuntimeSpec": localRuntimeSpec(),
			},
		},
	}
	data, err := json.MarshalIndent(nc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, "root"), 0o700); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(root, LocalConfigPath), data, 0o644); err != nil {
		return err
	}
	if err := inst.writeResolvConf(); err != nil {
		return err
	}
	for _, d := range []string{CNIBinDir, CNIConfDir} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil { //nolint:gosec // G301: the node's /opt/cni/bin and /etc/cni/net.d, traversable by its daemons.
			return err
		}
	}
	return inst.linkNodeDir()
}

// linkNodeDir makes RootBase/nodes/<node name> point at the instance's root.
func (inst *Instance) linkNodeDir() error {
	dir := filepath.Join(filepath.Dir(inst.Root), NodesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: the sandbox's node index, listed by the operator's tools.
		return err
	}
	link := filepath.Join(dir, inst.NodeName)
	_ = os.Remove(link)
	return os.Symlink(filepath.Join("..", filepath.Base(inst.Root)), link)
}

// unlinkNodeDir removes the node's symlink if it still points at this root, and the
// directory once empty.
func unlinkNodeDir(r *Record) {
	if r.Root == "" {
		return
	}
	dir := filepath.Join(filepath.Dir(r.Root), NodesDir)
	link := filepath.Join(dir, r.NodeName)
	if target, err := os.Readlink(link); err == nil && target == filepath.Join("..", filepath.Base(r.Root)) {
		_ = os.Remove(link)
	}
	_ = os.Remove(dir)
}

// instanceEnv is the environment of an instance's processes: nothing of the host's AWS
// configuration, the instance's own metadata endpoint, the local STS and, for a real
// instance, the local AWS's edge (every service: EC2 for the node's name, EKS for
// user data that names the cluster only).
func (inst *Instance) instanceEnv() []string {
	imds := "http://" + imdsAddr.String()
	if inst.imdsURL != "" {
		imds = inst.imdsURL
	}
	home := inst.Dir
	if inst.Root != "" {
		home = filepath.Join(inst.Root, "root")
	}
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds,
		"AWS_ENDPOINT_URL_STS=" + inst.p.cfg.Cloud.STSURL,
	}
	// nodeadm names the node from EC2's private DNS name, as the webhook does; the edge
	// is reachable only from inside the cluster namespace, where real instances live.
	// STS keeps its own endpoint: node tokens presign for the host the webhook trusts.
	if e := inst.p.cfg.EC2Endpoint; e != "" && inst.Kubelet == KubeletReal {
		env = append(env, "AWS_ENDPOINT_URL="+e, "AWS_ENDPOINT_URL_EC2="+e)
	}
	return env
}

// Init configures the node: for a real kubelet, nodeadm init inside the instance (it
// writes the node's files and starts containerd and the kubelet); for a simulated one,
// it starts run with the credentials nodeadm would configure.
func (inst *Instance) Init(ctx context.Context, run SimRunner) error {
	if inst.Kubelet == KubeletSim {
		return inst.startSim(ctx, run)
	}
	p := inst.p
	logPath := filepath.Join(inst.Dir, NodeadmLog)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	argv := []string{p.cfg.NodeadmPath, "init", "--root", inst.Root, "--daemon-manager", "process",
		"--config-source", "imds://user-data", "--config-source", "file://" + filepath.Join(inst.Root, LocalConfigPath),
		"--kubelet-path", p.cfg.KubeletPath, "--containerd-path", p.cfg.ContainerdPath, "--cni-bin-dir", filepath.Join(inst.Root, CNIBinDir),
		"--cfn-signal", bootstrap.SignalDetach}
	argv = (netns.NS{Name: inst.Namespace}).Wrap(argv)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = inst.instanceEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.WaitDelay = 5 * time.Second
	if err := saveHostState(filepath.Dir(p.cfg.Dir)); err != nil {
		return err
	}
	if err := createCgroup(inst.CgroupRoot); err != nil {
		return err
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nodeadm init failed (%w): %s (log: %s)", err, LastErrorLine(logPath), logPath)
	}
	return inst.startSignal(ctx, logPath)
}

// LastErrorLine returns the last line of a log that reads like an error (a klog E line,
// or one starting with "error"), or its last line; "" for a missing or empty log.
func LastErrorLine(path string) string {
	data, _ := os.ReadFile(path)
	if len(strings.TrimSpace(string(data))) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "error") || strings.Contains(l, "Error:") || strings.HasPrefix(l, "E") && len(l) > 5 && l[1] >= '0' && l[1] <= '9' {
			return l
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

func (inst *Instance) startSim(ctx context.Context, run SimRunner) error {
	if run == nil {
		return errors.New("no simulated kubelet runner")
	}
	p := inst.p
	n := SimNode{
		NodeName: inst.NodeName, InternalIP: inst.IP, ProviderID: "aws:///" + inst.Zone + "/" + inst.ID,
		InstanceType: inst.InstanceType, Zone: inst.Zone, Region: p.Region(),
		Server: p.cfg.HostEndpoint, CAPEM: p.cfg.Cluster.CAPEM,
	}
	reg, err := inst.registration(ctx)
	if err != nil {
		return err
	}
	n.Labels, n.Taints = reg.Labels, reg.Taints
	if inst.Identity == IdentityBootstrapToken {
		n.BootstrapToken = inst.token
	} else {
		exec := &clientcmdapi.ExecConfig{
			APIVersion:      "client.authentication.k8s.io/v1beta1",
			Command:         p.cfg.NodeadmPath,
			Args:            []string{"get-token", "--cluster-name", p.cfg.Cluster.Name, "--region", p.Region()},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}
		for _, kv := range inst.instanceEnv() {
			k, v, _ := strings.Cut(kv, "=")
			exec.Env = append(exec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: v})
		}
		// The plugin inherits this process's environment: blank the host's AWS
		// credentials so that only the instance's role can be used.
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
			"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_EC2_METADATA_DISABLED"} {
			exec.Env = append(exec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: ""})
		}
		n.Exec = exec
	}
	simCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	inst.mu.Lock()
	inst.simStop, inst.simDone = cancel, make(chan error, 1)
	inst.mu.Unlock()
	go func() { inst.simDone <- run(simCtx, n) }()
	return nil
}

// SimDone reports a simulated kubelet's end (nil for a real instance).
func (inst *Instance) SimDone() <-chan error {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.simDone
}

// Terminate stops the instance and removes what it made on the host: its processes,
// mounts, cgroups, namespace and root directory. EC2 shows it terminated. Its record
// and nodeadm's log stay until the cluster's state directory is removed.
func (p *Provider) Terminate(ctx context.Context, inst *Instance) error {
	return inst.terminate(ctx)
}

func (inst *Instance) terminate(ctx context.Context) error {
	inst.mu.Lock()
	if inst.ended {
		inst.mu.Unlock()
		return nil
	}
	inst.ended = true
	simStop, simDone := inst.simStop, inst.simDone
	inst.mu.Unlock()
	p := inst.p
	if simStop != nil {
		simStop()
		if err := <-simDone; err != nil {
			p.cfg.Log.Warn("simulated kubelet ended with an error", "instance", inst.ID, "err", err)
		}
	}
	err := cleanupInstance(ctx, &inst.Record)
	if inst.imdsStop != nil {
		inst.imdsStop()
		if err := <-inst.imdsDone; err != nil {
			p.cfg.Log.Warn("instance metadata endpoint ended with an error", "instance", inst.ID, "err", err)
		}
	}
	_ = p.cfg.Cloud.EC2.SetState(inst.ID, "terminated")
	p.mu.Lock()
	delete(p.instances, inst.ID)
	p.mu.Unlock()
	if a, perr := netip.ParseAddr(inst.IP); perr == nil {
		p.release(a)
	}
	return err
}

// cleanupInstance removes what a real instance made on the host. It needs only the
// record, so it also cleans up after a crashed `nodejoin up`.
func cleanupInstance(ctx context.Context, r *Record) error {
	if r.Kubelet != KubeletReal {
		return nil
	}
	var errs []error
	// The kubelet first, so it does not restart containers as containerd goes.
	for _, d := range []string{bootstrap.Kubelet, bootstrap.Containerd} {
		if id, err := bootstrap.ReadPIDFile((bootstrap.ProcessManager{Root: r.Root}).PIDFile(d)); err == nil {
			process.Terminate(id, 15*time.Second)
		}
	}
	ns := netns.NS{Name: r.Namespace}
	if ns.Exists() {
		// Whatever else runs in the namespace (containerd shims, nodeadm itself after
		// an interrupted start) belongs to this instance.
		if pids, err := ns.Users(); err == nil {
			for _, pid := range pids {
				if pid == os.Getpid() {
					continue
				}
				if id, err := process.IdentityOf(pid); err == nil {
					process.Terminate(id, 5*time.Second)
				}
			}
		}
	}
	unlinkNodeDir(r)
	if r.Root != "" {
		if err := unmountAll(r.Root); err != nil {
			errs = append(errs, err)
		} else if err := os.RemoveAll(r.Root); err != nil {
			errs = append(errs, err)
		}
	}
	if r.CgroupRoot != "" {
		if err := removeCgroup(r.CgroupRoot); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removePodRoute(ctx, r); err != nil {
		errs = append(errs, err)
	}
	if r.Namespace != "" {
		if err := netns.Delete(ctx, r.Namespace); err != nil {
			errs = append(errs, err)
		}
	}
	// After the namespace, whose going took the instance's ports off the bridge.
	if err := removeRoutes(ctx, r); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning up instance %s: %w", r.ID, err)
	}
	return nil
}

// removePodRoute removes the cluster namespace's route to the node's pods that
// instances recorded before the network add-on replaced per-node pod ranges, if it is
// still there (the namespace goes with `down`).
func removePodRoute(ctx context.Context, r *Record) error {
	cns := netns.NS{Name: r.ClusterNamespace}
	if r.PodCIDR == "" || r.ClusterNamespace == "" || !cns.Exists() {
		return nil
	}
	// iproute2 says "No such process" (ESRCH) for a route that is not there.
	if err := cns.IP(ctx, "route", "del", r.PodCIDR, "via", r.IP); err != nil && !strings.Contains(err.Error(), "No such process") {
		return err
	}
	return nil
}

// Cleanup removes what the instances recorded under dir left on the host, after their
// `nodejoin up` crashed or was killed, and the cluster's cgroup parent. It never
// touches the owner process, which must be gone.
func Cleanup(ctx context.Context, dir, cluster string) error {
	recs, err := ReadRecords(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range recs {
		if err := cleanupInstance(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, cleanupOrphans(ctx, cluster, recs)...)
	if err := removeCgroup("/nodejoin/" + cluster); err != nil {
		errs = append(errs, err)
	}
	// The roots' parent, and the shared one once no cluster uses it.
	base := filepath.Join("/var/lib/nodejoin", cluster)
	for _, r := range recs {
		if r.Root != "" {
			base = filepath.Dir(r.Root)
		}
	}
	_ = os.Remove(base)
	_ = os.Remove(filepath.Dir(base))
	// The shared parent goes once no cluster uses it.
	if mounts, err := cgroupMounts(); err == nil {
		for _, m := range mounts {
			_ = os.Remove(filepath.Join(m, "nodejoin"))
		}
	}
	if err := restoreHostState(filepath.Dir(dir)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
