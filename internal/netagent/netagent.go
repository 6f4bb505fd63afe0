// Package netagent is nodejoin-netagent, the aws-node DaemonSet's image: its init
// container installs the CNI plugins and sets the kernel parameters pod networking
// needs; its main container runs the IPAM daemon. Each has options whose flags it binds.
package netagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/internal/logging"
	"github.com/nodejoin/nodejoin/internal/netagent/cniplugin"
	"github.com/nodejoin/nodejoin/internal/netagent/hostsetup"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/hostnet"
)

// PluginName is the CNI plugin's binary, which must be installed before the conflist
// that names it is written.
const PluginName = cniplugin.PluginType

// Paths are the flags both containers take (the DaemonSet passes the same set).
type Paths struct {
	cniBinDir, cniConfDir, stateDir, logDir, pluginsFrom string
}

// AddFlags binds the paths to fs.
func (p *Paths) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.cniBinDir, "cni-bin-dir", "/opt/cni/bin", "the node's CNI plugin directory")
	fs.StringVar(&p.cniConfDir, "cni-conf-dir", "/etc/cni/net.d", "the node's CNI configuration directory (10-aws.conflist goes here)")
	fs.StringVar(&p.stateDir, "state-dir", "/var/run/aws-node", "ipamd's socket and allocation checkpoint")
	fs.StringVar(&p.logDir, "log-dir", "/var/log/aws-routed-eni", "the plugin's log directory on the node")
	fs.StringVar(&p.pluginsFrom, "plugins-from", "", "the directory in the image holding the CNI plugins to install")
}

// InitOptions are the options of `nodejoin-netagent init`.
type InitOptions struct {
	Paths
	primaryIF, procSys string
}

// AddFlags binds the options to fs.
func (o *InitOptions) AddFlags(fs *pflag.FlagSet) {
	o.Paths.AddFlags(fs)
	fs.StringVar(&o.primaryIF, "primary-interface", "", "the node's primary interface (default: the one with the MAC instance metadata gives)")
	fs.StringVar(&o.procSys, "proc-sys", "/proc/sys", "where kernel parameters are set (tests point it elsewhere)")
	_ = fs.MarkHidden("proc-sys")
}

// Run installs the CNI plugins into the node's CNI bin dir atomically and sets the
// kernel parameters.
func (o *InitOptions) Run(ctx context.Context) error {
	log := logging.FromContext(ctx)
	if o.pluginsFrom == "" {
		return errors.New("--plugins-from is required: the directory in the image holding the CNI plugins")
	}
	self, _ := os.Executable()
	rep, err := hostsetup.InstallPlugins(o.pluginsFrom, o.cniBinDir, filepath.Base(self))
	if err != nil {
		return err
	}
	log.Info("CNI plugins installed", "dir", o.cniBinDir, "installed", rep.Installed, "unchanged", rep.Unchanged)
	if o.primaryIF == "" {
		if o.primaryIF, err = primaryInterface(ctx); err != nil {
			return err
		}
	}
	changed, err := hostsetup.ApplySysctls(hostsetup.ProcSys{Root: o.procSys}, hostsetup.Sysctls(o.primaryIF, envTrue("DISABLE_TCP_EARLY_DEMUX")))
	if err != nil {
		return err
	}
	log.Info("CNI init container done", "primaryInterface", o.primaryIF, "sysctlsChanged", changed)
	return nil
}

// IPAMDOptions are the options of `nodejoin-netagent ipamd`.
type IPAMDOptions struct {
	Paths
	metricsAddr, introspectionAddr string
}

// AddFlags binds the options to fs.
func (o *IPAMDOptions) AddFlags(fs *pflag.FlagSet) {
	o.Paths.AddFlags(fs)
	fs.StringVar(&o.metricsAddr, "metrics-addr", ipamd.DefaultMetricsAddr, "Prometheus metrics (/metrics); empty to disable")
	fs.StringVar(&o.introspectionAddr, "introspection-addr", ipamd.DefaultIntrospectionAddr, "readiness (/healthz) and state (/v1/state); empty to disable")
}

// Run runs the IPAM daemon until ctx ends; fs is the flag set AddFlags bound, parsed.
func (o *IPAMDOptions) Run(ctx context.Context, fs *pflag.FlagSet) error {
	log := logging.FromContext(ctx)
	knobs, err := ipamd.KnobsFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	// Checked when the container mounts the bin dir and says where (the VPC CNI's
	// main container installs its plugin there itself).
	if fs.Changed("cni-bin-dir") {
		if _, err := os.Stat(filepath.Join(o.cniBinDir, PluginName)); err != nil {
			return fmt.Errorf("the CNI plugin %s is not in %s (%w): the init container (nodejoin-netagent init) installs it", PluginName, o.cniBinDir, err)
		}
	}
	md := cloud.IMDS{Client: imdsClient()}
	inst, err := md.Instance(ctx)
	if err != nil {
		return err
	}
	sdk, err := cloud.NewSDK(ctx, inst.Region)
	if err != nil {
		return err
	}
	d, err := ipamd.New(ipamd.Options{
		Knobs: knobs, CNIConfDir: o.cniConfDir, StateDir: o.stateDir, LogDir: o.logDir,
		MetricsAddr: o.metricsAddr, IntrospectionAddr: o.introspectionAddr,
		Metadata: md, EC2: sdk, Host: hostnet.Linux{},
		Logger: log,
	})
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

func envTrue(name string) bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(name)))
	return v == "true" || v == "1"
}

// imdsClient talks to instance metadata ($AWS_EC2_METADATA_SERVICE_ENDPOINT, else the
// instance's own), retrying for about a minute as an instance's can come up late.
func imdsClient() *imds.Client {
	return imds.New(imds.Options{
		Endpoint: os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 60
			o.MaxBackoff = time.Second
		}),
	})
}

// primaryInterface finds the interface whose MAC is the instance's primary MAC.
func primaryInterface(ctx context.Context) (string, error) {
	inst, err := (cloud.IMDS{Client: imdsClient()}).Instance(ctx)
	if err != nil {
		return "", fmt.Errorf("finding the primary interface (or pass --primary-interface): %w", err)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing interfaces: %w", err)
	}
	for _, i := range ifs {
		if strings.EqualFold(i.HardwareAddr.String(), inst.PrimaryMAC) {
			return i.Name, nil
		}
	}
	return "", fmt.Errorf("no interface has the primary MAC %s that instance metadata gives: pass --primary-interface", inst.PrimaryMAC)
}
