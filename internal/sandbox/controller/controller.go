// Package controller runs nodejoin-controller inside the process that runs a local
// cluster, with the local cloud it asks about instances: the STS that verifies node
// tokens, and the EC2 and IAM endpoints that the CSR approver and the node initializer
// check nodes against. It is the one place that wires the controller's manager for the
// sandbox; tests use it instead of wiring their own.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/csr"
	"github.com/nodejoin/nodejoin/internal/inventory"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/manager"
	"github.com/nodejoin/nodejoin/internal/nodegroup"
	"github.com/nodejoin/nodejoin/internal/nodegroup/eksbackend"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// The local cloud's account and region, unless Config says otherwise.
const (
	DefaultAccountID = "000000000000"
	DefaultRegion    = "us-west-2"
)

// MinCertLifetime is the shortest Config.CertLifetime (csr.MinConfiguredDuration).
const MinCertLifetime = csr.MinConfiguredDuration

// LogFile is the controller's and the local cloud's log, in the cluster's state
// directory, unless Config.Log says otherwise.
const LogFile = "logs/nodejoin-controller.log"

// Config says which cluster the controller serves.
type Config struct {
	// Cluster is the control plane, started with Options.TokenWebhook. Required.
	Cluster *controlplane.Cluster
	// AccountID and Region are the local cloud's. Default DefaultAccountID and
	// DefaultRegion.
	AccountID, Region string
	// Log receives the controller's and the local cloud's logs. Default: LogFile.
	Log *slog.Logger
	// NoAddons turns off the add-ons (kube-proxy, CoreDNS) the controller otherwise
	// applies, as EKS does at cluster creation.
	NoAddons bool
	// Launcher launches the instances of the local cloud's Auto Scaling groups; nil
	// leaves every launch failing (a Failed scaling activity).
	Launcher localaws.Launcher
	// NodeInstanceProfile is an instance profile (named after its role) the local
	// account holds for node groups' instances, and the NodeGroup controller's default;
	// "" for none.
	NodeInstanceProfile string
	// InstanceLimit caps the local account's running instances (0: no cap): Auto
	// Scaling's launches beyond it fail with EC2's InstanceLimitExceeded message.
	InstanceLimit int
	// NoNodeGroups turns off the NodeGroup controller, which otherwise manages
	// NodeGroups through the local cloud's launch templates and Auto Scaling groups.
	NoNodeGroups bool
	// DHCPDomainName is the domain-name of the local VPC's DHCP options ("" for the
	// default): instances' metadata names them in it (localaws.WithDHCPDomainName).
	DHCPDomainName string
	// CertLifetime, when set, is the lifetime of kubelet client and serving
	// certificates (csr.Signer's ClientMaxDuration and Duration), short enough for a
	// test to watch kubelets renew them; 0 keeps the signer's defaults.
	CertLifetime time.Duration
	// Deployed leaves kubelet CSRs and token reviews to the controller's chart, deployed
	// on the control-plane node: its pods approve (kube-controller-manager signs) and
	// serve the token webhook kube-apiserver calls.
	Deployed bool
}

// Controller is nodejoin-controller and the local cloud, running: the token webhook
// kube-apiserver calls, the CSR approver and signer, the node initializer, nodejoin's
// roles and CRD.
type Controller struct {
	cloud *localaws.Cloud
	// aws is how the host reaches the local AWS's edge.
	aws AWSAccess
	// ec2URL is the local AWS's edge (every service, EC2 included) as instances reach
	// it (the bridge address in the cluster namespace); ec2Done reports that
	// endpoint's end. Empty and nil in loopback mode.
	ec2URL  string
	ec2Done chan error
	// stsURL is the local STS over HTTPS as pods on the control-plane node reach it
	// (the deployed token webhook's --sts-endpoint); stsDone reports its end.
	stsURL  string
	stsDone chan error
	failed  chan struct{} // closed when the controller or the control plane stopped
	done    chan struct{} // closed when the controller stopped
	err     error         // set before done closes
	cancel  context.CancelFunc
	logf    *os.File // nil unless Start opened LogFile
	once    sync.Once

	mu    sync.Mutex
	cpErr error // the control plane's failure
	// authenticated holds every username the webhook has accepted a token of.
	authenticated sync.Map
	// eks is the local EKS's state (access entries, node groups) over the cluster's API.
	eks *eksbackend.Backend
}

// Start starts the local cloud and nodejoin-controller for cfg.Cluster and returns once
// the controller serves. They run until Stop, or until the controller fails (Failed).
// This is the one place that wires manager.Config.
//
//nolint:gocyclo // a flat sequence of wiring steps, each failing with its own error.
func Start(ctx context.Context, cfg Config) (*Controller, error) {
	cl := cfg.Cluster
	if cfg.AccountID == "" {
		cfg.AccountID = DefaultAccountID
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	logPath := filepath.Join(cl.StateDir(), LogFile)
	c := &Controller{failed: make(chan struct{}), done: make(chan struct{})}
	if cfg.Log == nil {
		var err error
		if c.logf, err = os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return nil, fmt.Errorf("opening %s: %w", logPath, err)
		}
		cfg.Log = slog.New(slog.NewTextHandler(c.logf, nil))
	}
	log := cfg.Log
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	fail := func(err error) (*Controller, error) {
		c.cancel()
		c.closeLog()
		if c.logf != nil {
			err = fmt.Errorf("%w (log: %s)", err, logPath)
		}
		return nil, err
	}
	// The edge's port and the administrator's key are chosen once, when the cluster
	// starts, and recorded in its state directory with the AWS CLI's files.
	rec, err := loadAWSRecord(cl.StateDir())
	if err != nil {
		return fail(fmt.Errorf("the local AWS's access: %w", err))
	}
	if c.cloud, err = localaws.StartCloud(ctx, cfg.AccountID, cl.CA(), log, localaws.WithRegion(cfg.Region),
		localaws.WithDHCPDomainName(cfg.DHCPDomainName), localaws.WithAdminKey(rec.AccessKeyID, rec.SecretAccessKey),
		localaws.WithEdge(fmt.Sprintf("127.0.0.1:%d", rec.Port))); err != nil {
		return fail(err)
	}
	// The local EC2 signs instance identity documents with a key of the cluster's, kept
	// in its state directory with the certificate the webhook checks proofs against.
	if c.cloud.IdentitySigner, err = localaws.LoadOrCreateIdentitySigner(cl.StateDir()); err != nil {
		return fail(fmt.Errorf("the local EC2's instance identity key: %w", err))
	}
	if c.aws, err = writeAWSFiles(cl.StateDir(), cl.Name(), cfg.Region, cl.CAFile(), c.cloud, rec); err != nil {
		return fail(err)
	}
	// The VPC exists from the start, as on AWS: its node-range subnet is there before
	// the first instance, so that eksctl and the AWS CLI find the VPC of a cluster
	// that has no node yet. The instance provider finds it there.
	if opts := cl.Options(); opts.NodeCIDR.IsValid() {
		if _, ok := c.cloud.EC2.SubnetOf(localaws.DefaultSubnetID); !ok {
			if err := c.cloud.EC2.AddSubnet(localaws.Subnet{ID: localaws.DefaultSubnetID, VPCID: localaws.DefaultVPCID,
				AvailabilityZone: cfg.Region + "a", CIDR: opts.NodeCIDR, Tags: map[string]string{"Name": cl.Name()}}); err != nil {
				return fail(fmt.Errorf("node range %s as the VPC's subnet: %w", opts.NodeCIDR, err))
			}
		}
	}
	// An instance's console is what its nodeadm printed, as a real instance's serial
	// console shows its boot: EC2 GetConsoleOutput, from which CloudFormation reads a
	// node's own reason for a failed join.
	instancesDir := filepath.Join(cl.StateDir(), "instances")
	c.cloud.EC2.SetConsoleSource(func(id string) ([]byte, bool) {
		recs, err := instance.ReadRecords(instancesDir)
		if err != nil {
			return nil, false
		}
		for _, r := range recs {
			if r.ID == id {
				b, err := os.ReadFile(filepath.Join(r.Dir, instance.NodeadmLog))
				return b, err == nil
			}
		}
		return nil, false
	})
	if cfg.Launcher != nil {
		c.cloud.AutoScaling.SetLauncher(cfg.Launcher)
	}
	c.cloud.AutoScaling.SetInstanceLimit(cfg.InstanceLimit)
	if p := cfg.NodeInstanceProfile; p != "" {
		if err := c.cloud.IAM.AddInstanceProfile(p, p); err != nil {
			return fail(err)
		}
	}
	if err := c.serveInVPC(ctx, cl, log); err != nil {
		return fail(err)
	}
	inv := inventory.NewEC2(c.cloud.ControllerConfig(cfg.Region), inventory.EC2Options{EC2Endpoint: c.cloud.EC2URL, IAMEndpoint: c.cloud.IAMURL})
	ready := make(chan struct{})
	mcfg := manager.Config{
		REST:        cl.RESTConfig(),
		Log:         log,
		Signer:      &csr.Signer{CA: cl.CA(), Duration: cfg.CertLifetime, ClientMaxDuration: cfg.CertLifetime},
		Nodes:       inv,
		Instances:   inv,
		ClusterName: cl.Name(),
		InstallRBAC: true,
		InstallCRDs: true,
		// STANDARD access entries' policies are bound (the administrator's below).
		AccessPolicies: true,
		// No cloud controller manager runs here: nodejoin-controller initializes Nodes.
		InitializeNodes: true,
		OnStarted:       func() { close(ready) },
	}
	if cfg.Deployed {
		// The chart's pods approve CSRs and serve the token webhook, and the chart owns
		// nodejoin's core roles.
		mcfg.Signer, mcfg.ChartRBAC = nil, true
	} else if err := c.webhookConfig(cl, cfg.Region, &mcfg); err != nil {
		return fail(err)
	}
	if !cfg.NoAddons {
		// kube-proxy reaches the API server at its address in the cluster namespace.
		opts := cl.Options()
		mcfg.Addons = &addons.Options{Enabled: []string{addons.KubeProxy, addons.CoreDNS}, APIServer: cl.InternalEndpoint(), ServiceCIDR: opts.ServiceCIDR}
		if c.ec2URL != "" {
			// Local instances: the VPC network add-on, pods on VPC addresses (the node
			// range, as kube-proxy's clusterCIDR is the VPC's on EKS).
			mcfg.Addons.Enabled = addons.Names
			mcfg.Addons.PodCIDR = opts.NodeCIDR
			mcfg.Addons.AWSNode = AWSNodeOptions(cl.Name(), c.ec2URL, cfg.Region)
		}
	}
	amis, err := c.serveEKS(cl, cfg, log)
	if err != nil {
		return fail(err)
	}
	if !cfg.NoNodeGroups {
		if mcfg.NodeGroups, err = c.nodeGroups(cl, cfg); err != nil {
			return fail(err)
		}
		mcfg.NodeGroups.AMIs = amis
		mcfg.NodeGroups.ReleaseImage = func(ami string) (v1alpha1.AMIFamily, bool) {
			rel, ok := c.cloud.EC2.Releases().ByImageID(ami)
			return v1alpha1.AMIFamily(rel.Family), ok
		}
	}
	go func() {
		c.err = manager.Run(ctx, mcfg)
		close(c.done)
		c.fail()
	}()
	go func() {
		select {
		case err := <-cl.Failed():
			c.mu.Lock()
			c.cpErr = err
			c.mu.Unlock()
			c.fail()
		case <-c.done:
		}
	}()
	select {
	case <-ready:
		// As EKS does for a cluster's creator (bootstrapClusterCreatorAdminPermissions):
		// the administrator's IAM user gets a STANDARD access entry with
		// AmazonEKSClusterAdminPolicy, so that `aws eks get-token` tokens of its key
		// reach cluster-admin through the token webhook.
		if err := c.eks.EnsureClusterCreatorAdmin(ctx, c.cloud.Admin.ARN); err != nil {
			_ = c.Stop()
			return nil, fmt.Errorf("the administrator's access entry: %w", err)
		}
		return c, nil
	case <-c.done:
		_ = c.cloud.Wait()
		return fail(fmt.Errorf("nodejoin-controller: %w", c.err))
	}
}

// AWSNodeOptions configure aws-node for a cluster's local instances: they share the
// host's filesystem, so one host directory (the instances' root base) is mounted, and
// each node's directories are found through its symlink there by $(NODE_NAME)
// (instance.NodesDir); ipamd calls the local EC2 at ec2URL.
func AWSNodeOptions(cluster, ec2URL, region string) addons.AWSNodeOptions {
	base := instance.RootBase(cluster)
	node := path.Join(base, instance.NodesDir, "$(NODE_NAME)")
	return addons.AWSNodeOptions{
		SharedHostDir: base,
		CNIBinDir:     path.Join(node, instance.CNIBinDir),
		CNIConfDir:    path.Join(node, instance.CNIConfDir),
		StateDir:      path.Join(node, "var/run/aws-node"),
		LogDir:        path.Join(node, "var/log/aws-routed-eni"),
		Region:        region,
		EC2Endpoint:   ec2URL,
	}
}

// EC2InternalURL is the local AWS's edge as instances reach it, serving every service:
// AWS_ENDPOINT_URL_EC2 of the network add-on, AWS_ENDPOINT_URL of nodeadm. Empty
// without a cluster namespace.
func (c *Controller) EC2InternalURL() string { return c.ec2URL }

// AWS is how the host reaches the local AWS: the edge's HTTPS endpoint, its CA and
// the AWS CLI profile of the account's administrator.
func (c *Controller) AWS() AWSAccess { return c.aws }

// nodeGroups configures the NodeGroup controller for the local cloud: its EC2 and Auto
// Scaling endpoints through aws-sdk-go-v2, exactly as against AWS; groups span the
// local VPC's zones, and their user data points nodes at the API server's address in
// the cluster namespace.
func (c *Controller) nodeGroups(cl *controlplane.Cluster, cfg Config) (*nodegroup.Options, error) {
	caPEM, err := os.ReadFile(cl.CAFile())
	if err != nil {
		return nil, fmt.Errorf("reading the cluster CA for node groups' user data: %w", err)
	}
	awsCfg := c.cloud.ControllerConfig(cfg.Region)
	subnets := subnetIDs(c.cloud.AutoScaling.Subnets())
	return &nodegroup.Options{
		EC2:         ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(c.cloud.EC2URL) }),
		AutoScaling: autoscaling.NewFromConfig(awsCfg, func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(c.cloud.AutoScalingURL) }),
		Cluster: userdata.Cluster{Name: cl.Name(), Endpoint: cl.InternalEndpoint(), CertificateAuthority: caPEM,
			ServiceCIDR: cl.Options().ServiceCIDR.String()},
		Subnets:         subnets,
		InstanceProfile: cfg.NodeInstanceProfile,
	}, nil
}

// Cloud is the local cloud: the EC2 inventory to launch instances into, and STS.
func (c *Controller) Cloud() *localaws.Cloud { return c.cloud }

// Authenticated reports whether the webhook has accepted a token of user. Only this
// process's webhook is known: with Config.Deployed it is always false, and a node's
// authentication shows from its registration instead (joinstatus).
func (c *Controller) Authenticated(user string) bool {
	_, ok := c.authenticated.Load(user)
	return ok
}

func (c *Controller) fail() { c.once.Do(func() { close(c.failed) }) }

// Failed is closed when the controller or the cluster's control plane stopped on its
// own (and once Stop stopped the controller); Err then says why.
func (c *Controller) Failed() <-chan struct{} { return c.failed }

// Err says why the controller or the control plane stopped, once Failed is closed.
func (c *Controller) Err() error {
	<-c.failed
	c.mu.Lock()
	cpErr := c.cpErr
	c.mu.Unlock()
	if cpErr != nil {
		return cpErr
	}
	<-c.done
	if c.err == nil {
		return errors.New("nodejoin-controller stopped")
	}
	return fmt.Errorf("nodejoin-controller: %w", c.err)
}

// Stop stops the controller and the local cloud.
func (c *Controller) Stop() error {
	c.cancel()
	<-c.done
	err := errors.Join(c.err, c.cloud.Wait())
	for _, done := range []chan error{c.ec2Done, c.stsDone} {
		if done != nil {
			err = errors.Join(err, <-done)
		}
	}
	c.closeLog()
	return err
}

func (c *Controller) closeLog() {
	if c.logf != nil {
		_ = c.logf.Close()
	}
}
