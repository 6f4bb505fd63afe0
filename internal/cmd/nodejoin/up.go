package nodejoin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"k8s.io/client-go/kubernetes"

	"github.com/nodejoin/nodejoin/internal/sandbox/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

type upOptions struct {
	name     string
	nodes    nodeOptions
	detach   bool
	network  string
	nodeCIDR string
	apiPort  int
	binDir   string
	// readyFD is set in the background process that `up --detach` starts: it reports
	// progress on this descriptor and closes it once the cluster is ready.
	readyFD int
}

func upCommand() *cobra.Command {
	o := &upOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster",
		Long: "up starts a local control plane (etcd and kube-apiserver, built from pinned sources) with\n" +
			"nodejoin-controller, launches --nodes local instances whose kubelets join it, shows each\n" +
			"node's join step by step, and prints a summary and the admin kubeconfig's path. Without\n" +
			"--detach it runs until Ctrl-C and then removes the cluster; with --detach it returns once\n" +
			"every node is Ready and leaves the cluster running until `nodejoin down`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	nameFlag(cmd, &o.name)
	f.IntVar(&o.nodes.Count, "nodes", 0, "number of worker nodes (local instances) to launch")
	f.StringVar(&o.nodes.InstanceType, "instance-type", "m5.large", "EC2 instance type the instances report (sets max pods and reserved resources)")
	f.StringVar(&o.nodes.AMIFamily, "ami-family", string(instance.AmazonLinux2023), "user-data format: AmazonLinux2023 (NodeConfig), AmazonLinux2 (bootstrap.sh) or Bottlerocket (TOML)")
	f.StringVar(&o.nodes.Identity, "identity", string(instance.IdentityAWSIAM), "how kubelets authenticate: aws-iam (instance-role token, NodeAccessEntry) or bootstrap-token (TLS bootstrapping)")
	f.StringVar(&o.nodes.Kubelet, "kubelet", "", "real (containerd and the real kubelet in each instance; root) or sim (simulated kubelets); default real when possible")
	f.DurationVar(&o.nodes.Timeout, "node-timeout", 0, "how long nodes may take to become Ready (default 5m, more for many nodes)")
	f.BoolVar(&o.detach, "detach", false, "return once the cluster is ready and leave it running in the background")
	f.StringVar(&o.network, "network", "", `where the control plane listens: "namespace" (a network namespace of its own; root only, the default as root) or "loopback"`)
	f.StringVar(&o.nodeCIDR, "node-cidr", controlplane.DefaultNodeCIDR.String(), "address range inside the cluster's network namespace (never on the host's network)")
	f.IntVar(&o.apiPort, "api-port", 0, "host loopback port for the API server (0: a free port)")
	f.StringVar(&o.binDir, "bin-dir", "", "directory holding etcd and kube-apiserver (default: beside this binary, or the source tree's bin/)")
	f.IntVar(&o.readyFD, "internal-ready-fd", 0, "")
	_ = f.MarkHidden("internal-ready-fd")
	return cmd
}

func (o *upOptions) clusterOptions(dir string, progress io.Writer) (controlplane.Options, error) {
	cidr, err := netip.ParsePrefix(o.nodeCIDR)
	if err != nil {
		return controlplane.Options{}, fmt.Errorf("--node-cidr %q: %w", o.nodeCIDR, err)
	}
	return controlplane.Options{
		Name:     o.name,
		StateDir: dir,
		BinDir:   o.binDir,
		Network:  controlplane.Network(o.network),
		NodeCIDR: cidr,
		APIPort:  o.apiPort,
		Progress: progress,
		// nodejoin-controller, run by this process, authenticates node tokens.
		TokenWebhook: true,
	}, nil
}

func (o *upOptions) run(cmd *cobra.Command) error {
	if err := o.nodes.validate(); err != nil {
		return err
	}
	dir, err := stateDir(o.name)
	if err != nil {
		return err
	}
	// Checked here too, before --detach starts a background process for nothing.
	if err := controlplane.EnsureNoCluster(dir); err != nil {
		return err
	}
	if o.detach {
		return o.startDetached(cmd, dir)
	}
	if o.readyFD != 0 {
		return o.runDetachedChild(cmd.Context(), dir)
	}
	return o.runForeground(cmd, dir)
}

func (o *upOptions) runForeground(cmd *cobra.Command, dir string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	opts, err := o.clusterOptions(dir, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Starting cluster %s\n", o.name)
	ctx := cmd.Context()
	log := slog.New(slog.DiscardHandler)
	if logf, err := openLog(dir); err == nil {
		defer func() { _ = logf.Close() }()
		log = slog.New(slog.NewTextHandler(logf, nil))
	}
	opts.Log = log
	sess, err := startAll(ctx, opts, o.nodes, log)
	if err != nil {
		return o.startFailed(ctx, dir, err)
	}
	c, cp := sess.c, sess.cp
	if err := sess.serveControl(ctx, o.nodes, o.binDir, log); err != nil {
		fmt.Fprintf(stderr, "warning: `nodejoin node add` will not reach this cluster: %v\n", err)
	}
	printSummary(stdout, sess.summary)
	printReady(stdout, c, false)
	fmt.Fprintln(stderr, "Press Ctrl-C to stop the cluster and remove it.")
	var runErr error
	select {
	case <-ctx.Done():
		fmt.Fprintf(stderr, "Stopping cluster %s\n", o.name)
	case runErr = <-c.Failed():
		fmt.Fprintf(stderr, "Cluster %s failed, stopping it: %v\n", o.name, runErr)
	case <-cp.Finished():
		runErr = cp.Err()
		fmt.Fprintf(stderr, "Cluster %s failed, stopping it: %v\n", o.name, runErr)
	}
	return errors.Join(runErr, teardown(sess))
}

// session is what the process that runs a cluster runs: the control plane, the
// controller and the local instances.
type session struct {
	c       *controlplane.Cluster
	cp      *controlPlane
	summary []nodeSummary

	mu sync.Mutex
	w  *workers // nil until nodes are launched
}

// openLog opens the log of the process that runs the cluster.
func openLog(dir string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, "logs", "nodejoin.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// startAll starts the control plane, then nodejoin-controller in this process, then
// the nodes, and waits until they are Ready. On failure it stops what it started.
func startAll(ctx context.Context, opts controlplane.Options, nodes nodeOptions, log *slog.Logger) (*session, error) {
	c, err := controlplane.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	s := &session{c: c}
	if s.cp, err = startControlPlane(ctx, c, opts.Progress); err != nil {
		return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
	}
	if nodes.Count == 0 {
		return s, nil
	}
	fail := func(err error) (*session, error) {
		return nil, errors.Join(err, stopAll(s))
	}
	if s.w, err = startWorkers(ctx, c, s.cp, nodes, opts.BinDir, opts.Progress, log); err != nil {
		return fail(err)
	}
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return fail(err)
	}
	if s.summary, err = s.w.run(ctx, client, nodes, s.cp, c.StateDir(), opts.Progress); err != nil {
		return fail(err)
	}
	return s, nil
}

// stopAll stops what startAll started: the nodes first, then the controller and the
// control plane.
func stopAll(s *session) error {
	ctx := context.Background()
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	return errors.Join(w.stop(ctx), s.cp.Stop(), s.c.Stop(ctx))
}

// teardown stops a cluster this process runs and removes its state directory.
func teardown(s *session) error {
	if err := stopAll(s); err != nil {
		return err
	}
	return destroyCluster(context.Background(), s.c.StateDir(), s.c.Name())
}

// startFailed removes what a failed start left, but keeps the logs' content in the error.
func (o *upOptions) startFailed(ctx context.Context, dir string, err error) error {
	if rmErr := destroyCluster(context.WithoutCancel(ctx), dir, o.name); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("cluster %s: start interrupted", o.name)
	}
	return fmt.Errorf("starting cluster %s: %w", o.name, err)
}

func printReady(w io.Writer, c *controlplane.Cluster, detached bool) {
	fmt.Fprintf(w, "Cluster %s is ready.\n", c.Name())
	fmt.Fprintf(w, "  API server:  %s\n", c.Endpoint())
	fmt.Fprintf(w, "  kubeconfig:  %s\n", c.KubeconfigPath())
	fmt.Fprintf(w, "  logs:        %s\n", filepath.Join(c.StateDir(), "logs"))
	fmt.Fprintf(w, "Try: kubectl --kubeconfig %s get --raw /readyz\n", c.KubeconfigPath())
	if detached {
		fmt.Fprintf(w, "Stop it with: nodejoin down --name %s\n", c.Name())
	}
}

// startDetached starts `nodejoin up` again as a background process in a session of its
// own, relays its progress, and returns once it reports the cluster ready. Interrupting
// this process before then stops the background one too.
func (o *upOptions) startDetached(cmd *cobra.Command, dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable to run in the background: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	logPath := filepath.Join(dir, "logs", "nodejoin.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s: %w", logPath, err)
	}
	defer func() { _ = logf.Close() }()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()

	args := []string{"up", "--internal-ready-fd=3"}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name != "detach" && f.Name != "internal-ready-fd" {
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	child := exec.Command(exe, args...)
	child.Stdout, child.Stderr = logf, logf
	child.ExtraFiles = []*os.File{w}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		_ = w.Close()
		return fmt.Errorf("starting the background process: %w", err)
	}
	_ = w.Close()
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	// Relay the background process's progress until it reports ready or gives up.
	relayed := make(chan bool, 1)
	go func() {
		ready := false
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if sc.Text() == readyMarker {
				ready = true
				continue
			}
			fmt.Fprintln(cmd.ErrOrStderr(), sc.Text())
		}
		relayed <- ready
	}()
	var ready bool
	select {
	case ready = <-relayed:
	case <-cmd.Context().Done():
		_ = child.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			return fmt.Errorf("cluster %s: start interrupted; the background process ended with %w", o.name, err)
		}
		return fmt.Errorf("cluster %s: start interrupted", o.name)
	}
	if !ready {
		select {
		case err := <-exited:
			return fmt.Errorf("cluster %s did not start (%w); see the messages above", o.name, err)
		default:
			return fmt.Errorf("the background process of cluster %s closed its progress pipe without reporting ready; see %s", o.name, logPath)
		}
	}
	s, err := controlplane.ReadState(dir)
	if err != nil {
		return err
	}
	printSummary(cmd.OutOrStdout(), readSummary(dir))
	fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s is ready and runs in the background (pid %d).\n", o.name, s.Owner.PID)
	fmt.Fprintf(cmd.OutOrStdout(), "  API server:  %s\n  kubeconfig:  %s\n  logs:        %s\n", s.Endpoint, s.Kubeconfig, filepath.Join(dir, "logs"))
	fmt.Fprintf(cmd.OutOrStdout(), "Stop it with: nodejoin down --name %s\n", o.name)
	return nil
}

// readyMarker is the last line the background process sends before closing the pipe.
const readyMarker = "nodejoin: cluster ready"

// runDetachedChild is the background process of `up --detach`: it runs the cluster,
// reports progress on the ready descriptor, closes it once ready, and keeps the cluster
// running until SIGTERM (sent by `nodejoin down`).
func (o *upOptions) runDetachedChild(ctx context.Context, dir string) error {
	// The daemons this process starts must not inherit the pipe, or the waiting parent
	// would never see it close.
	syscall.CloseOnExec(o.readyFD)
	ready := os.NewFile(uintptr(o.readyFD), "ready")
	if ready == nil {
		return fmt.Errorf("--internal-ready-fd %d is not open", o.readyFD)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts, err := o.clusterOptions(dir, io.MultiWriter(ready, os.Stderr))
	if err != nil {
		_ = ready.Close()
		return err
	}
	opts.Log = log
	sess, err := startAll(ctx, opts, o.nodes, log)
	if err != nil {
		err = o.startFailed(ctx, dir, err)
		fmt.Fprintf(ready, "error: %v\n", err)
		_ = ready.Close()
		return err
	}
	c, cp := sess.c, sess.cp
	if err := sess.serveControl(ctx, o.nodes, o.binDir, log); err != nil {
		fmt.Fprintf(ready, "warning: `nodejoin node add` will not reach this cluster: %v\n", err)
	}
	fmt.Fprintln(ready, readyMarker)
	_ = ready.Close()
	log.Info("cluster ready", "name", o.name, "endpoint", c.Endpoint())
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("stopping cluster", "name", o.name)
	case runErr = <-c.Failed():
		log.Error("cluster failed, stopping it", "name", o.name, "err", runErr)
	case <-cp.Finished():
		runErr = cp.Err()
		log.Error("cluster failed, stopping it", "name", o.name, "err", runErr)
	}
	if err := stopAll(sess); err != nil {
		runErr = errors.Join(runErr, err)
	}
	// `nodejoin down` removes the state directory once this process has exited; on a
	// failure the directory stays for its logs until then.
	return runErr
}
