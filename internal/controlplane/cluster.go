package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/pki"
	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// Cluster is a running control plane.
type Cluster struct {
	opts Options
	pki  PKI
	ca   *pki.CA
	ns   netns.NS // zero in loopback mode

	apiListen netip.AddrPort // where kube-apiserver binds
	webhook   netip.AddrPort // where the token webhook listens (Options.TokenWebhook)
	// webhookListener holds the loopback webhook port from setupNetwork until
	// ListenTokenWebhook hands it over.
	webhookListener net.Listener
	etcdPorts       [2]int // client, peer (inside the namespace, or on the host's loopback)
	endpoint        string // API URL as the host sees it

	fwdCancel context.CancelFunc
	fwdDone   chan struct{}

	mu         sync.Mutex
	etcd       *process.Process
	apiserver  *process.Process
	components []*component              // supervised, in start order
	expected   map[*process.Process]bool // daemons stopped on purpose
	state      State
	failed     chan error
}

// Start brings up etcd, kube-apiserver, kube-controller-manager and kube-scheduler (the
// last two unless Options.APIServerOnly) and returns once each answers its health
// check. On
// failure it stops whatever it started and returns an error that quotes the failing
// daemon's log.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := EnsureNoCluster(opts.StateDir); err != nil {
		return nil, err
	}
	binDir := opts.BinDir
	if binDir == "" {
		binDir = toolbin.Dir()
	}
	opts.BinDir = binDir
	if err := findBinaries(&opts); err != nil {
		return nil, err
	}

	c = &Cluster{
		opts:     opts,
		pki:      newPKIPaths(filepath.Join(opts.StateDir, "pki")),
		expected: map[*process.Process]bool{},
		failed:   make(chan error, 1),
	}
	// An earlier failed start may have left files; it never left a live cluster (no
	// state file), so they are stale.
	for _, stale := range []string{"pki", "etcd", "kubeconfig"} {
		if err := os.RemoveAll(filepath.Join(opts.StateDir, stale)); err != nil {
			return nil, fmt.Errorf("removing stale %s: %w", stale, err)
		}
	}
	for _, d := range []string{opts.StateDir, c.logDir(), c.pki.Dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	self, err := process.IdentityOf(os.Getpid())
	if err != nil {
		return nil, err
	}
	c.state = State{Name: opts.Name, Network: opts.Network, Owner: self, Daemons: map[string]process.Identity{}}
	if err := writeState(opts.StateDir, &c.state); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			stopErr := c.Stop(context.WithoutCancel(ctx))
			err = errors.Join(err, stopErr)
		}
	}()

	if err := c.step("generating certificates", func() error {
		c.ca, err = generatePKI(c.pki, &c.opts)
		return err
	}); err != nil {
		return c, err
	}
	if err := c.step("creating network", func() error { return c.setupNetwork(ctx) }); err != nil {
		return c, err
	}
	if err := c.step("starting etcd", func() error { return c.startEtcd(ctx) }); err != nil {
		return c, err
	}
	if err := c.writeTokenWebhookConfig(); err != nil {
		return c, err
	}
	if err := c.step("starting kube-apiserver", func() error { return c.StartAPIServer(ctx) }); err != nil {
		return c, err
	}
	if err := c.writeKubeconfig(); err != nil {
		return c, err
	}
	if err := c.startComponents(ctx); err != nil {
		return c, err
	}
	c.mu.Lock()
	c.state.Ready = true
	c.state.Endpoint = c.endpoint
	c.state.Kubeconfig = c.KubeconfigPath()
	err = writeState(opts.StateDir, &c.state)
	c.mu.Unlock()
	return c, err
}

// findBinaries checks that every daemon the cluster runs has its binary.
func findBinaries(opts *Options) error {
	bins := []string{toolbin.Etcd, toolbin.KubeAPIServer}
	if !opts.APIServerOnly {
		bins = append(bins, toolbin.KubeControllerManager, toolbin.KubeScheduler)
	}
	for _, b := range bins {
		if _, err := toolbin.Find(opts.BinDir, b); err != nil {
			return err
		}
	}
	return nil
}

// startComponents starts kube-controller-manager, then kube-scheduler, unless
// Options.APIServerOnly. The controllers come first: the service-account and root-CA
// publisher controllers must fill a namespace before any pod there can start.
func (c *Cluster) startComponents(ctx context.Context) error {
	if c.opts.APIServerOnly {
		return nil
	}
	if err := c.step("starting kube-controller-manager", func() error { return c.startControllerManager(ctx) }); err != nil {
		return err
	}
	return c.step("starting kube-scheduler", func() error { return c.startScheduler(ctx) })
}

func (c *Cluster) step(what string, fn func() error) error {
	start := time.Now()
	fmt.Fprintf(c.opts.Progress, " • %s\n", what)
	if c.opts.OnStep != nil {
		c.opts.OnStep(what, StepStarted, 0)
	}
	if err := fn(); err != nil {
		fmt.Fprintf(c.opts.Progress, " ✗ %s failed after %s\n", what, since(start))
		if c.opts.OnStep != nil {
			c.opts.OnStep(what, StepFailed, time.Since(start))
		}
		return err
	}
	fmt.Fprintf(c.opts.Progress, " ✓ %s (%s)\n", what, since(start))
	if c.opts.OnStep != nil {
		c.opts.OnStep(what, StepDone, time.Since(start))
	}
	return nil
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func (c *Cluster) logDir() string { return filepath.Join(c.opts.StateDir, "logs") }

func (c *Cluster) setupNetwork(ctx context.Context) error {
	if c.opts.Network == NetworkLoopback {
		ports, err := freePorts(3)
		if err != nil {
			return err
		}
		if c.opts.TokenWebhook {
			// The webhook's listener stays open from here until the controller serves on
			// it: a port picked now and bound later can be taken in between by one of
			// etcd's or kube-apiserver's outgoing connections.
			var lc net.ListenConfig
			l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
			if err != nil {
				return fmt.Errorf("listening for the token webhook: %w", err)
			}
			c.webhookListener = l
			c.webhook = l.Addr().(*net.TCPAddr).AddrPort()
		}
		apiPort := ports[2]
		if c.opts.APIPort != 0 {
			apiPort = c.opts.APIPort
		}
		c.etcdPorts = [2]int{ports[0], ports[1]}
		//nolint:gosec // G115: validate() bounds APIPort to 0..65535 and the kernel's ports fit.
		c.apiListen = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(apiPort))
		c.endpoint = "https://" + c.apiListen.String()
		return nil
	}
	if err := netns.CheckHostOverlap(c.opts.NodeCIDR); err != nil {
		return err
	}
	name := namespaceName(c.opts.Name)
	ns, err := netns.Create(ctx, name)
	if err != nil {
		return err
	}
	c.ns = ns
	c.mu.Lock()
	c.state.Namespace = name
	err = writeState(c.opts.StateDir, &c.state)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	bridge := netip.PrefixFrom(c.opts.BridgeAddr(), c.opts.NodeCIDR.Bits())
	if err := ns.AddBridge(ctx, BridgeName, bridge); err != nil {
		return err
	}
	// A fixed MAC: a bridge otherwise takes its ports' lowest, and each change of its
	// address flushes its neighbour table, the VPC router's permanent entries too.
	if err := ns.IP(ctx, "link", "set", BridgeName, "address", bridgeMAC(c.opts.BridgeAddr())); err != nil {
		return err
	}
	// The cluster namespace is the VPC's router (docs/network.md): it forwards between
	// the instances' interfaces (a new namespace does not), and sends no ICMP redirects,
	// which would point instances past it at addresses only it answers ARP for.
	for _, kv := range [][2]string{{"net.ipv4.ip_forward", "1"}, {"net.ipv4.conf.all.send_redirects", "0"}, {"net.ipv4.conf." + BridgeName + ".send_redirects", "0"}} {
		if err := ns.Sysctl(kv[0], kv[1]); err != nil {
			return err
		}
	}
	// The namespace has a loopback of its own, so fixed ports cannot collide.
	c.etcdPorts = [2]int{2379, 2380}
	c.apiListen = netip.AddrPortFrom(c.opts.BridgeAddr(), apiserverPort)
	c.webhook = netip.AddrPortFrom(c.opts.BridgeAddr(), tokenWebhookPort)

	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.opts.APIPort)))
	if err != nil {
		return fmt.Errorf("listening on the host's loopback for the API: %w", err)
	}
	c.endpoint = "https://" + l.Addr().String()
	fwdCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.fwdCancel, c.fwdDone = cancel, make(chan struct{})
	go func() {
		defer close(c.fwdDone)
		if err := ns.Forward(fwdCtx, l, c.apiListen.String(), c.opts.Log); err != nil {
			c.fail(fmt.Errorf("forwarding the API port: %w", err))
		}
	}()
	return nil
}

// writeTokenWebhookConfig points kube-apiserver at the token webhook this process will
// serve, when Options.TokenWebhook asks for one.
func (c *Cluster) writeTokenWebhookConfig() error {
	if !c.opts.TokenWebhook {
		return nil
	}
	c.opts.TokenWebhookConfigFile = filepath.Join(c.opts.StateDir, "token-webhook.kubeconfig")
	caPEM, err := os.ReadFile(c.pki.CA.Cert)
	if err != nil {
		return err
	}
	client, err := pki.Load(c.pki.TokenWebhookClient.Cert, c.pki.TokenWebhookClient.Key)
	if err != nil {
		return err
	}
	keyPEM, err := client.KeyPEM()
	if err != nil {
		return err
	}
	addr := c.webhook
	if c.opts.TokenWebhookService.IsValid() {
		addr = netip.AddrPortFrom(c.opts.TokenWebhookService, 443)
	}
	return WriteWebhookClientConfig(c.opts.TokenWebhookConfigFile, "https://"+addr.String()+"/authenticate", caPEM, client.CertPEM(), keyPEM)
}

// ListenTokenWebhook opens the listener kube-apiserver's token webhook configuration
// points at: inside the cluster namespace when there is one. Options.TokenWebhook must
// be set.
func (c *Cluster) ListenTokenWebhook() (net.Listener, error) {
	if !c.opts.TokenWebhook {
		return nil, fmt.Errorf("cluster %s was started without a token webhook", c.opts.Name)
	}
	if c.ns.Name != "" {
		return c.ns.Listen("tcp", c.webhook.String())
	}
	c.mu.Lock()
	l := c.webhookListener
	c.webhookListener = nil
	c.mu.Unlock()
	if l != nil {
		return l, nil
	}
	var lc net.ListenConfig
	return lc.Listen(context.Background(), "tcp", c.webhook.String())
}

// WriteWebhookConfig writes the kubeconfig-format file that points kube-apiserver's token
// webhook (--authentication-token-webhook-config-file) at url, trusting caPEM.
func WriteWebhookConfig(path, url string, caPEM []byte) error {
	return WriteWebhookClientConfig(path, url, caPEM, nil, nil)
}

// WriteWebhookClientConfig is WriteWebhookConfig with the client certificate and key
// (PEM) kube-apiserver presents to the webhook, which requires one.
func WriteWebhookClientConfig(path, url string, caPEM, clientCertPEM, clientKeyPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["webhook"] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["kube-apiserver"] = &clientcmdapi.AuthInfo{ClientCertificateData: clientCertPEM, ClientKeyData: clientKeyPEM}
	cfg.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "webhook", AuthInfo: "kube-apiserver"}
	cfg.CurrentContext = "webhook"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing token webhook configuration: %w", err)
	}
	return nil
}

// dial connects to an address where the control plane listens.
func (c *Cluster) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.ns.Name != "" {
		return c.ns.DialContext(ctx, network, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// startDaemon starts a daemon, inside the cluster namespace when there is one, and
// records it in the state file.
func (c *Cluster) startDaemon(name string, argv []string) (*process.Process, error) {
	if c.ns.Name != "" {
		argv = c.ns.Wrap(argv)
	}
	p, err := process.Start(process.Spec{Name: name, Argv: argv, LogFile: filepath.Join(c.logDir(), name+".log")})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.state.Daemons[name] = p.Identity()
	err = writeState(c.opts.StateDir, &c.state)
	c.mu.Unlock()
	return p, err
}

// recordComponent records (or updates) a control-plane daemon in the state file.
func (c *Cluster) recordComponent(name, health, want, log string, restarts int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	comp := Component{Name: name, Health: health, Want: want, Log: log, Restarts: restarts}
	i := slices.IndexFunc(c.state.Components, func(x Component) bool { return x.Name == name })
	if i < 0 {
		c.state.Components = append(c.state.Components, comp)
	} else {
		c.state.Components[i] = comp
	}
	if err := writeState(c.opts.StateDir, &c.state); err != nil {
		c.opts.Log.Error("recording control-plane component in the state file failed", "component", name, "err", err)
	}
}

// launch starts a daemon that the cluster cannot run without (etcd, kube-apiserver):
// its exit, unless asked for, is reported on Failed.
func (c *Cluster) launch(name string, argv []string) (*process.Process, error) {
	p, err := c.startDaemon(name, argv)
	if p == nil {
		return nil, err
	}
	go func() {
		<-p.Done()
		c.mu.Lock()
		expected := c.expected[p]
		c.mu.Unlock()
		if !expected {
			c.fail(fmt.Errorf("%w\nlast lines of %s:\n%s", p.Err(), p.LogFile(), p.LogTail(15)))
		}
	}()
	return p, err
}

func (c *Cluster) fail(err error) {
	select {
	case c.failed <- err:
	default:
	}
}

// Failed delivers an error when a daemon exits, or the API forwarding fails, without
// being asked to stop.
func (c *Cluster) Failed() <-chan error { return c.failed }

// stopDaemon stops p on purpose.
func (c *Cluster) stopDaemon(p *process.Process, grace time.Duration) {
	if p == nil {
		return
	}
	c.mu.Lock()
	c.expected[p] = true
	c.mu.Unlock()
	if grace == 0 {
		p.Kill()
	} else {
		p.Stop(grace)
	}
}

// Stop stops kube-scheduler and kube-controller-manager, then the API server, then
// etcd, stops forwarding, deletes the cluster namespace and removes the state file. The
// state directory itself, with logs, stays.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	apiserver, etcd := c.apiserver, c.etcd
	components := c.components
	c.components = nil
	if c.webhookListener != nil {
		_ = c.webhookListener.Close()
		c.webhookListener = nil
	}
	c.mu.Unlock()
	for _, k := range slices.Backward(components) {
		k.shutdown()
	}
	c.stopDaemon(apiserver, 10*time.Second)
	c.stopDaemon(etcd, 10*time.Second)
	if c.fwdCancel != nil {
		c.fwdCancel()
		<-c.fwdDone
	}
	var errs []error
	if c.ns.Name != "" {
		if err := netns.Delete(ctx, c.ns.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(filepath.Join(c.opts.StateDir, StateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.opts.Name }

// StateDir is the cluster's state directory.
func (c *Cluster) StateDir() string { return c.opts.StateDir }

// Endpoint is the API server's URL as seen from the host.
func (c *Cluster) Endpoint() string { return c.endpoint }

// InternalEndpoint is the API server's URL as instances in the cluster namespace reach
// it (the same as Endpoint in loopback mode).
func (c *Cluster) InternalEndpoint() string { return "https://" + c.apiListen.String() }

// CA is the cluster certificate authority.
func (c *Cluster) CA() *pki.CA { return c.ca }

// CAFile is the path of the cluster CA certificate.
func (c *Cluster) CAFile() string { return c.pki.CA.Cert }

// PKI returns the paths of the cluster's certificates and keys.
func (c *Cluster) PKI() PKI { return c.pki }

// Namespace is the cluster network namespace (zero in loopback mode).
func (c *Cluster) Namespace() netns.NS { return c.ns }

// Options returns the options the cluster runs with, defaults filled in.
func (c *Cluster) Options() Options { return c.opts }

// RESTConfig returns a client configuration with cluster-admin rights.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host: c.endpoint,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   c.pki.CA.Cert,
			CertFile: c.pki.Admin.Cert,
			KeyFile:  c.pki.Admin.Key,
		},
		QPS:   100,
		Burst: 200,
	}
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		var lc net.ListenConfig
		l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// bridgeMAC is the bridge's MAC, derived from its address as instances' are
// (0e:00 and the IPv4 bytes).
func bridgeMAC(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("0e:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}
