package nodejoin

import (
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/nodegroup/client"
	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/sandbox"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/runner"
)

type upOptions struct {
	name  string
	nodes sandbox.NodeOptions
	// nodeGroupKubelet plays the kubelets of node groups' instances.
	nodeGroupKubelet  instance.KubeletKind
	instanceLimit     int
	dhcpDomain        string
	certLifetime      time.Duration
	controlPlaneNode  bool
	controlPlaneNodes int
	detach            bool
	network           string
	nodeCIDR          string
	serviceCIDR       string
	apiPort           int
	binDir            string
	output            printer.Format
	// readyFD is set in the background process that `up --detach` starts: it reports
	// progress on this descriptor and closes it once the cluster is ready.
	readyFD int
	// nodeGroupFile and groups are --nodegroup-file and what it holds (up_nodegroups.go).
	nodeGroupFile string
	groups        *client.Loaded
}

func upCommand() *cobra.Command {
	o := &upOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster",
		Long: "up starts a local control plane (etcd, kube-apiserver, kube-controller-manager and\n" +
			"kube-scheduler, built from pinned sources) with nodejoin-controller, launches --nodes local\n" +
			"instances whose kubelets join it, shows each node's join step by step, and prints a summary\n" +
			"and the admin kubeconfig's path. Without --detach it runs until Ctrl-C and then removes the\n" +
			"cluster; with --detach it returns once every node is Ready and leaves the cluster running\n" +
			"until `nodejoin down`.\n\n" +
			"With -o json or -o yaml the summary is one object (name, kubeconfig, nodes with their\n" +
			"instance ID, address, kubelet and seconds to Ready) and progress goes to stderr.",
		Example: "  # a cluster with three real kubelets (as root), until Ctrl-C\n" +
			"  sudo nodejoin up --nodes 3\n\n" +
			"  # fifty simulated kubelets in the background, the summary as JSON\n" +
			"  nodejoin up --name demo --nodes 50 --kubelet sim --detach -o json\n\n" +
			"  # nodes that authenticate with a bootstrap token and read bootstrap.sh user data\n" +
			"  sudo nodejoin up --nodes 1 --identity bootstrap-token --ami-family AmazonLinux2",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sandbox.FlagError(o.run(cmd))
		},
	}
	f := cmd.Flags()
	nameFlag(cmd, &o.name)
	f.IntVar(&o.nodes.Count, "nodes", 0, "number of worker nodes (local instances) to launch")
	f.StringVar(&o.nodes.InstanceType, "instance-type", sandbox.DefaultInstanceType, "EC2 instance type the instances report (sets max pods and reserved resources)")
	f.StringVar((*string)(&o.nodes.AMIFamily), "ami-family", string(sandbox.DefaultAMIFamily), "user-data format: AmazonLinux2023 (NodeConfig), AmazonLinux2 (bootstrap.sh) or Bottlerocket (TOML)")
	f.StringVar((*string)(&o.nodes.Identity), "identity", string(instance.IdentityAWSIAM), "how kubelets authenticate: aws-iam (instance-role token, NodeAccessEntry) or bootstrap-token (TLS bootstrapping)")
	f.StringVar((*string)(&o.nodes.Kubelet), "kubelet", "", "real (containerd and the real kubelet in each instance; root) or sim (simulated kubelets); default real when possible")
	f.StringVar((*string)(&o.nodeGroupKubelet), "nodegroup-kubelet", string(sandbox.NodeGroupKubeletAuto), "what plays the kubelets of the instances node groups (Auto Scaling groups) launch: auto (real where this machine can run real kubelets: root and `make deps`; else sim), real or sim")
	f.IntVar(&o.instanceLimit, "instance-limit", 0, "cap on the local account's running instances for node groups' launches (0: none); beyond it launches fail with InstanceLimitExceeded")
	f.StringVar(&o.dhcpDomain, "dhcp-domain", "", "domain-name of the local VPC's DHCP options, such as corp.example: instance metadata (local-hostname) then names instances ip-A-B-C-D.DOMAIN while EC2's private DNS name, which names the nodes, stays as it is")
	f.DurationVar(&o.certLifetime, "cert-lifetime", 0, "lifetime of the kubelets' client and serving certificates (default: the controller's, a day and a year); a few minutes, to watch kubelets renew them")
	f.BoolVar(&o.controlPlaneNode, "control-plane-node", false, "experimental: also run a control-plane node (a real kubelet in the control plane's namespace, labelled and tainted node-role.kubernetes.io/control-plane, joined with a certificate from the cluster CA as kubeadm joins its first node); root and --network namespace")
	f.IntVar(&o.controlPlaneNodes, "control-plane-nodes", 0, "how many control-plane nodes to run (1 or 2; implies --control-plane-node): with 2 the controller's chart runs a replica on each, and kube-apiserver calls their token webhook through its Service")
	f.DurationVar(&o.nodes.Timeout, "node-timeout", 0, "how long nodes may take to become Ready (default 5m, more for many nodes)")
	f.BoolVar(&o.detach, "detach", false, "return once the cluster is ready and leave it running in the background")
	f.StringVar(&o.network, "network", "", `where the control plane listens: "namespace" (a network namespace of its own; root only, the default as root) or "loopback"`)
	f.StringVar(&o.nodeCIDR, "node-cidr", controlplane.DefaultNodeCIDR.String(), "address range inside the cluster's network namespace (never on the host's network)")
	f.StringVar(&o.serviceCIDR, "service-cidr", controlplane.DefaultServiceCIDR.String(), "the Services' range (kube-apiserver's --service-cluster-ip-range); kube-dns takes its .10, which nodes reach as clusterDNS through their user data")
	f.IntVar(&o.apiPort, "api-port", 0, "host loopback port for the API server (0: a free port)")
	f.StringVar(&o.binDir, "bin-dir", "", "directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet (default: beside this binary, or the source tree's bin/)")
	printer.AddFlag(f, &o.output)
	f.StringVar(&o.nodeGroupFile, "nodegroup-file", "", "eksctl ClusterConfig or NodeGroup manifests whose node groups to create once the cluster is up (the cluster's name defaults to the eksctl file's metadata.name)")
	f.IntVar(&o.readyFD, "internal-ready-fd", 0, "")
	_ = f.MarkHidden("internal-ready-fd")
	return cmd
}

func (o *upOptions) sandboxOptions() (sandbox.Options, error) {
	cidr, err := netip.ParsePrefix(o.nodeCIDR)
	if err != nil {
		return sandbox.Options{}, fmt.Errorf("--node-cidr %q: want an address range such as 198.18.0.0/16: %w", o.nodeCIDR, err)
	}
	services, err := netip.ParsePrefix(o.serviceCIDR)
	if err != nil {
		return sandbox.Options{}, fmt.Errorf("--service-cidr %q: want an address range such as 172.20.0.0/16: %w", o.serviceCIDR, err)
	}
	return sandbox.Options{
		Name:        o.name,
		BinDir:      o.binDir,
		Network:     controlplane.Network(o.network),
		NodeCIDR:    cidr,
		ServiceCIDR: services,
		APIPort:     o.apiPort,
		Nodes:       o.nodes,
		Control:     true,
		// Node groups' instances, launched by the local cloud's Auto Scaling.
		NodeGroupKubelet:  o.nodeGroupKubelet,
		InstanceLimit:     o.instanceLimit,
		DHCPDomainName:    o.dhcpDomain,
		CertLifetime:      o.certLifetime,
		ControlPlaneNode:  o.controlPlaneNode || o.controlPlaneNodes > 0,
		ControlPlaneNodes: o.controlPlaneNodes,
	}, nil
}

func (o *upOptions) run(cmd *cobra.Command) error {
	if o.readyFD == 0 {
		if err := o.loadNodeGroupFile(cmd); err != nil {
			return err
		}
	}
	opts, err := o.sandboxOptions()
	if err != nil {
		return err
	}
	// Checked here too, before --detach starts a background process for nothing.
	if err := sandbox.Check(opts); err != nil {
		return err
	}
	switch {
	case o.detach:
		return o.startDetached(cmd)
	case o.readyFD != 0:
		return runner.Child(cmd.Context(), o.readyFD, opts)
	}
	return o.runForeground(cmd, opts)
}

// printSummary prints the started cluster in the -o format.
func (o *upOptions) printSummary(w io.Writer, c sandbox.Cluster, detached bool, groups []v1alpha1.NodeGroup) error {
	if o.groups != nil {
		return o.printUpNodeGroups(w, c, detached, groups)
	}
	return printer.Print(w, o.output, c, func(w io.Writer) { c.WriteSummary(w, detached) })
}

// runForeground runs the cluster until interrupted; once it is up, it creates the node
// groups and prints the summary.
func (o *upOptions) runForeground(cmd *cobra.Command, opts sandbox.Options) error {
	stderr := cmd.ErrOrStderr()
	return runner.Foreground(cmd.Context(), opts, stderr, func(c sandbox.Cluster) error {
		groups, err := o.createNodeGroups(cmd.Context(), c, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "Node groups of %s failed, stopping cluster %s: %v\n", o.nodeGroupFile, o.name, err)
			return err
		}
		return o.printSummary(cmd.OutOrStdout(), c, false, groups)
	})
}

// startDetached starts `nodejoin up` again in the background with the flags given, and
// returns once the cluster is ready and its node groups created.
func (o *upOptions) startDetached(cmd *cobra.Command) error {
	args := []string{"up", "--internal-ready-fd=3"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "detach" && f.Name != "internal-ready-fd" && f.Name != "output" && f.Name != "nodegroup-file" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	if !cmd.Flags().Changed("name") {
		args = append(args, "--name="+o.name) // taken from --nodegroup-file
	}
	if err := runner.Start(cmd.Context(), o.name, args, cmd.ErrOrStderr()); err != nil {
		return err
	}
	c, err := sandbox.Get(o.name)
	if err != nil {
		return err
	}
	groups, err := o.createNodeGroups(cmd.Context(), c, cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("cluster %s runs, but its node groups from %s failed: %w; look with `nodejoin describe nodegroup --cluster %s --name GROUP`, remove the cluster with `nodejoin down --name %s`", o.name, o.nodeGroupFile, err, o.name, o.name)
	}
	return o.printSummary(cmd.OutOrStdout(), c, true, groups)
}
