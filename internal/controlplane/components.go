package controlplane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// Secure ports of the supervised components inside the cluster namespace (upstream's
// defaults). In loopback mode each cluster picks free ones instead.
const (
	controllerManagerPort = 10257
	schedulerPort         = 10259
)

// controllers is kube-controller-manager's --controllers. Every controller that is on
// by default runs except csrapproving: nodejoin-controller approves kubelet CSRs (after
// checking them against the instance inventory), and KCM's approver would approve
// every node-client CSR that RBAC allows without that check. bootstrapsigner and
// tokencleaner stay off as upstream has them: nodejoin's tokens are for authentication
// only (nothing reads a signed cluster-info), and nodejoin-controller's leader deletes
// expired bootstrap tokens itself (internal/bootstraptoken Clean), as EKS does without
// kubeadm's token cleaner.
const controllers = "*,-csrapproving"

// component is a control-plane daemon that this process restarts whenever it exits
// without being asked to: kube-controller-manager and kube-scheduler. Both keep no
// state of their own, so a restart loses nothing.
type component struct {
	name   string
	argv   []string
	health string // https URL of its /healthz

	mu       sync.Mutex
	proc     *process.Process
	started  time.Time // when proc started
	restarts int
	stopping bool
	stop     chan struct{} // closed by shutdown
	done     chan struct{} // closed when the supervision loop ends; nil before it runs
}

// Restart backoff: doubled after each restart up to the maximum, and back to the
// minimum once a run lasted stableRun.
const (
	minRestartDelay = time.Second
	maxRestartDelay = 30 * time.Second
	stableRun       = time.Minute
)

// startControllerManager starts kube-controller-manager and waits until its /healthz
// answers ok.
func (c *Cluster) startControllerManager(ctx context.Context) error {
	bin, err := toolbin.Find(c.opts.BinDir, toolbin.KubeControllerManager)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.opts.StateDir, "kube-controller-manager.kubeconfig")
	if err := c.writeComponentKubeconfig(kubeconfig, "system:kube-controller-manager", c.pki.ControllerManager); err != nil {
		return err
	}
	p := c.pki
	ctrls, upstream := controllers, []string(nil)
	if c.opts.UpstreamKubeletClientCSRs {
		// KCM's approver and the kube-apiserver-client-kubelet signer for client
		// certificates (the benchmark's baseline); kubelet-serving stays unset.
		ctrls = "*"
		upstream = []string{
			"--cluster-signing-kubelet-client-cert-file=" + p.CA.Cert,
			"--cluster-signing-kubelet-client-key-file=" + p.CA.Key,
		}
	}
	if c.opts.KubeletSigners {
		upstream = append(upstream,
			"--cluster-signing-kubelet-serving-cert-file="+p.CA.Cert, "--cluster-signing-kubelet-serving-key-file="+p.CA.Key)
		if !c.opts.UpstreamKubeletClientCSRs {
			upstream = append(upstream,
				"--cluster-signing-kubelet-client-cert-file="+p.CA.Cert, "--cluster-signing-kubelet-client-key-file="+p.CA.Key)
		}
	}
	return c.startComponent(ctx, toolbin.KubeControllerManager, controllerManagerPort, func(port int) []string {
		return append(append([]string{bin,
			"--kubeconfig=" + kubeconfig,
			// Delegated authentication and authorization for its HTTPS endpoints, so that
			// /metrics can be read with a client certificate of the cluster CA.
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--client-ca-file=" + p.CA.Cert,
			// Each controller acts as its own service account (kube-system/<controller>),
			// bound to the bootstrap system:controller:* roles; KCM's own identity may
			// only read and mint those accounts' tokens (TokenRequest).
			"--use-service-account-credentials=true",
			"--controllers=" + ctrls,
			// Only the kubernetes.io/kube-apiserver-client signer: setting one signer's
			// files keeps the other three loops (kubelet-serving,
			// kube-apiserver-client-kubelet, legacy-unknown) from starting, so every
			// kubelet certificate comes from nodejoin-controller.
			"--cluster-signing-kube-apiserver-client-cert-file=" + p.CA.Cert,
			"--cluster-signing-kube-apiserver-client-key-file=" + p.CA.Key,
			// The kube-root-ca.crt ConfigMap published into every namespace, which every
			// pod's projected service-account volume reads.
			"--root-ca-file=" + p.CA.Cert,
			// Fills Secrets of type kubernetes.io/service-account-token that users create
			// (pods get tokens through the TokenRequest API, signed by kube-apiserver's
			// --service-account-signing-key-file, the same key).
			"--service-account-private-key-file=" + p.ServiceAccountKey,
			// The local CNI derives each node's pod range itself (10.244.<node>.0/24), so
			// KCM allocates none: a podCIDR it allocated would differ.
			"--allocate-node-cidrs=false",
			"--cluster-name=" + c.opts.Name,
			"--leader-elect=true",
			"--profiling=false",
		}, upstream...), servingArgs(p, port)...)
	})
}

// startScheduler starts kube-scheduler and waits until its /healthz answers ok.
func (c *Cluster) startScheduler(ctx context.Context) error {
	bin, err := toolbin.Find(c.opts.BinDir, toolbin.KubeScheduler)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.opts.StateDir, "kube-scheduler.kubeconfig")
	if err := c.writeComponentKubeconfig(kubeconfig, "system:kube-scheduler", c.pki.Scheduler); err != nil {
		return err
	}
	config := filepath.Join(c.opts.StateDir, "kube-scheduler.yaml")
	data, err := renderSchedulerConfig(kubeconfig)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(config, data, 0o600); err != nil {
		return fmt.Errorf("writing kube-scheduler configuration: %w", err)
	}
	p := c.pki
	return c.startComponent(ctx, toolbin.KubeScheduler, schedulerPort, func(port int) []string {
		return append([]string{bin,
			"--config=" + config,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--client-ca-file=" + p.CA.Cert,
			"--profiling=false",
		}, servingArgs(p, port)...)
	})
}

// servingArgs bind a component's HTTPS endpoints to 127.0.0.1 (of the cluster
// namespace, in namespace mode) with a certificate of the cluster CA.
func servingArgs(p PKI, port int) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + p.ComponentServing.Cert,
		"--tls-private-key-file=" + p.ComponentServing.Key,
	}
}

// schedulerConfig is the part of kube-scheduler's KubeSchedulerConfiguration
// (kubescheduler.config.k8s.io/v1) that nodejoin sets; kube-scheduler defaults the rest
// and decodes the file strictly, so a misspelt field fails its start. A struct of our
// own, rather than k8s.io/kube-scheduler's types, keeps that module and its
// dependencies out of the main module for three fields.
type schedulerConfig struct {
	APIVersion       string `json:"apiVersion"`
	Kind             string `json:"kind"`
	ClientConnection struct {
		Kubeconfig string `json:"kubeconfig"`
	} `json:"clientConnection"`
	LeaderElection struct {
		LeaderElect bool `json:"leaderElect"`
	} `json:"leaderElection"`
}

func renderSchedulerConfig(kubeconfig string) ([]byte, error) {
	cfg := schedulerConfig{APIVersion: "kubescheduler.config.k8s.io/v1", Kind: "KubeSchedulerConfiguration"}
	cfg.ClientConnection.Kubeconfig = kubeconfig
	cfg.LeaderElection.LeaderElect = true
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kube-scheduler configuration: %w", err)
	}
	return data, nil
}

// writeComponentKubeconfig writes the kubeconfig a component reaches the API server
// with, as user with the client certificate files.
func (c *Cluster) writeComponentKubeconfig(path, user string, cert certFiles) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["nodejoin"] = &clientcmdapi.Cluster{Server: c.InternalEndpoint(), CertificateAuthority: c.pki.CA.Cert}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: cert.Cert, ClientKey: cert.Key}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "nodejoin", AuthInfo: user}
	cfg.CurrentContext = "default"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig of %s: %w", user, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig of %s: %w", user, err)
	}
	return nil
}

// startComponent starts a supervised component with the command line argv gives for
// its secure port, waits until its /healthz answers ok and then keeps it running. In
// loopback mode the port is picked free; should another process take it before the
// component binds it, the component is started again on another.
func (c *Cluster) startComponent(ctx context.Context, name string, nsPort int, argv func(port int) []string) error {
	hc, err := c.httpClient(c.pki.Admin.Cert, c.pki.Admin.Key, c.dial)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		port := nsPort
		if c.ns.Name == "" {
			if port, err = componentPort(); err != nil {
				return err
			}
		}
		k := &component{
			name:   name,
			argv:   argv(port),
			health: "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/healthz",
			stop:   make(chan struct{}),
		}
		p, err := c.startDaemon(name, k.argv)
		if err != nil {
			return err
		}
		k.proc, k.started = p, time.Now()
		c.mu.Lock()
		c.components = append(c.components, k)
		c.mu.Unlock()
		c.recordComponent(name, k.health, "ok", p.LogFile(), 0)
		err = c.waitHealthy(ctx, p, hc, k.health, "ok")
		if err == nil {
			k.mu.Lock()
			if !k.stopping { // Stop may have run meanwhile
				k.done = make(chan struct{})
				go c.supervise(k, k.done)
			}
			k.mu.Unlock()
			return nil
		}
		k.shutdown()
		c.mu.Lock()
		c.components = slices.DeleteFunc(c.components, func(x *component) bool { return x == k })
		c.mu.Unlock()
		if c.ns.Name != "" || attempt == 3 || !strings.Contains(p.LogTail(30), "address already in use") {
			return err
		}
		c.opts.Log.Warn("component port taken before it bound it; retrying on another", "component", name, "port", port)
	}
}

// supervise restarts k whenever it exits until shutdown, with a growing delay, and
// logs and records each restart.
func (c *Cluster) supervise(k *component, done chan struct{}) {
	defer close(done)
	delay := minRestartDelay
	for {
		k.mu.Lock()
		p, started := k.proc, k.started
		k.mu.Unlock()
		select {
		case <-p.Done():
		case <-k.stop:
			return
		}
		if time.Since(started) >= stableRun {
			delay = minRestartDelay
		}
		c.opts.Log.Warn("control-plane component exited; restarting it", "component", k.name, "err", p.Err(),
			"delay", delay, "log", p.LogFile())
		select {
		case <-time.After(delay):
		case <-k.stop:
			return
		}
		delay = min(2*delay, maxRestartDelay)
		k.mu.Lock()
		if k.stopping {
			k.mu.Unlock()
			return
		}
		np, err := c.startDaemon(k.name, k.argv)
		if err != nil {
			k.mu.Unlock()
			c.opts.Log.Error("restarting control-plane component failed", "component", k.name, "err", err)
			continue // p is still the exited process: the loop waits and tries again
		}
		k.proc, k.started = np, time.Now()
		k.restarts++
		restarts := k.restarts
		k.mu.Unlock()
		c.opts.Log.Info("control-plane component restarted", "component", k.name, "pid", np.PID(), "restarts", restarts)
		c.recordComponent(k.name, k.health, "ok", np.LogFile(), restarts)
	}
}

// shutdown stops k and its supervision for good.
func (k *component) shutdown() {
	k.mu.Lock()
	if !k.stopping {
		k.stopping = true
		close(k.stop)
	}
	p, done := k.proc, k.done
	k.mu.Unlock()
	p.Stop(10 * time.Second)
	if done != nil {
		<-done
	}
}

// process returns k's current process.
func (k *component) process() *process.Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proc
}

// Restarts says how often a supervised component (kube-controller-manager,
// kube-scheduler) was restarted after it exited; 0 for any other name.
func (c *Cluster) Restarts(name string) int {
	k := c.component(name)
	if k == nil {
		return 0
	}
	// Never under c.mu: supervise holds k.mu while it records a restart under c.mu.
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restarts
}

// component returns the supervised component called name, or nil.
func (c *Cluster) component(name string) *component {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.components {
		if k.name == name {
			return k
		}
	}
	return nil
}

// KillComponent ends a supervised component (kube-controller-manager or
// kube-scheduler) with SIGKILL, as a crash would; the supervisor starts it again.
func (c *Cluster) KillComponent(name string) error {
	k := c.component(name)
	if k == nil {
		return fmt.Errorf("cluster %s runs no supervised component %q", c.opts.Name, name)
	}
	k.process().Kill()
	return nil
}

// componentPort picks a port for a component's HTTPS endpoints in loopback mode: one
// that is free now and below the kernel's ephemeral range, so that no outgoing
// connection (of etcd, kube-apiserver or anything else) is given it before the
// component binds it.
func componentPort() (int, error) {
	low := ephemeralLow()
	const floor = 10000
	if low-floor < 1000 {
		ports, err := freePorts(1)
		if err != nil {
			return 0, err
		}
		return ports[0], nil
	}
	var lc net.ListenConfig
	for range 200 {
		port := floor + rand.IntN(low-floor) //nolint:gosec // G404: a port number, not a secret.
		l, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			_ = l.Close()
			return port, nil
		}
	}
	return 0, errors.New("finding a free loopback port below the ephemeral range: 200 tries failed")
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot
// be read).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
