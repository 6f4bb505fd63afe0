// Package netagent is the command line of nodejoin-netagent, the aws-node DaemonSet's
// image: `init` (the init container) and `ipamd` (the main container).
package netagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
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

// Run runs nodejoin-netagent with args.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "nodejoin-netagent",
		Short: "The node network add-on: install the CNI plugins, then keep a warm pool of VPC addresses for pods",
		Example: `  # The init container: plugins into the node's CNI bin dir, sysctls
  nodejoin-netagent init --plugins-from /opt/nodejoin/cni --cni-bin-dir /host/opt/cni/bin

  # The main container: IPAM daemon; writes 10-aws.conflist once ready
  nodejoin-netagent ipamd --cni-bin-dir /host/opt/cni/bin --cni-conf-dir /host/etc/cni/net.d --state-dir /var/run/aws-node --log-dir /host/var/log/aws-routed-eni`,
	}
	root.AddCommand(initCommand(), ipamdCommand())
	return cli.Execute(ctx, root, args, stdout, stderr)
}

// paths are the flags both subcommands take (the DaemonSet passes the same set).
type paths struct {
	cniBinDir, cniConfDir, stateDir, logDir, pluginsFrom string
}

func (p *paths) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&p.cniBinDir, "cni-bin-dir", "/opt/cni/bin", "the node's CNI plugin directory")
	fs.StringVar(&p.cniConfDir, "cni-conf-dir", "/etc/cni/net.d", "the node's CNI configuration directory (10-aws.conflist goes here)")
	fs.StringVar(&p.stateDir, "state-dir", "/var/run/aws-node", "ipamd's socket and allocation checkpoint")
	fs.StringVar(&p.logDir, "log-dir", "/var/log/aws-routed-eni", "the plugin's log directory on the node")
	fs.StringVar(&p.pluginsFrom, "plugins-from", "", "the directory in the image holding the CNI plugins to install")
}

func initCommand() *cobra.Command {
	var p paths
	var primaryIF, procSys string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Install the CNI plugins into the node's CNI bin dir atomically and set the kernel parameters pod networking needs",
		Example: `  nodejoin-netagent init --plugins-from /opt/nodejoin/cni --cni-bin-dir /host/opt/cni/bin
  nodejoin-netagent init --plugins-from ./plugins --cni-bin-dir /opt/cni/bin --primary-interface eth0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := logging.FromContext(cmd.Context())
			if p.pluginsFrom == "" {
				return errors.New("--plugins-from is required: the directory in the image holding the CNI plugins")
			}
			self, _ := os.Executable()
			rep, err := hostsetup.InstallPlugins(p.pluginsFrom, p.cniBinDir, filepath.Base(self))
			if err != nil {
				return err
			}
			log.Info("CNI plugins installed", "dir", p.cniBinDir, "installed", rep.Installed, "unchanged", rep.Unchanged)
			if primaryIF == "" {
				if primaryIF, err = primaryInterface(cmd.Context()); err != nil {
					return err
				}
			}
			changed, err := hostsetup.ApplySysctls(hostsetup.ProcSys{Root: procSys}, hostsetup.Sysctls(primaryIF, envTrue("DISABLE_TCP_EARLY_DEMUX")))
			if err != nil {
				return err
			}
			log.Info("CNI init container done", "primaryInterface", primaryIF, "sysctlsChanged", changed)
			return nil
		},
	}
	p.bind(cmd)
	cmd.Flags().StringVar(&primaryIF, "primary-interface", "", "the node's primary interface (default: the one with the MAC instance metadata gives)")
	cmd.Flags().StringVar(&procSys, "proc-sys", "/proc/sys", "where kernel parameters are set (tests point it elsewhere)")
	_ = cmd.Flags().MarkHidden("proc-sys")
	return cmd
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

func ipamdCommand() *cobra.Command {
	var p paths
	var metricsAddr, introspectionAddr string
	cmd := &cobra.Command{
		Use:   "ipamd",
		Short: "Run the IPAM daemon: warm pool of VPC addresses from the instance's ENIs, served to the CNI plugin; writes the CNI configuration once ready",
		Long: `ipamd reads the instance from instance metadata, keeps a warm pool of secondary IPv4
addresses on its ENIs through the EC2 API (credentials from the default chain; the
endpoint from AWS_ENDPOINT_URL_EC2 if set), serves them to the CNI plugin on
<state-dir>/ipamd.sock and writes <cni-conf-dir>/10-aws.conflist only once the pool
is filled and the socket serves; the file is removed at start and at shutdown.

Environment knobs, as the VPC CNI names them: WARM_ENI_TARGET (1), WARM_IP_TARGET,
MINIMUM_IP_TARGET, MAX_ENI, IP_COOLDOWN_PERIOD (30), AWS_VPC_ENI_MTU / POD_MTU (9001),
AWS_VPC_K8S_CNI_VETHPREFIX (eni), AWS_VPC_K8S_PLUGIN_LOG_FILE, AWS_VPC_K8S_PLUGIN_LOG_LEVEL,
CLUSTER_NAME, DISABLE_LEAKED_ENI_CLEANUP.`,
		Example: `  nodejoin-netagent ipamd --cni-bin-dir /host/opt/cni/bin --cni-conf-dir /host/etc/cni/net.d --state-dir /var/run/aws-node
  WARM_IP_TARGET=2 MINIMUM_IP_TARGET=10 nodejoin-netagent ipamd --metrics-addr 127.0.0.1:61678`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := logging.FromContext(ctx)
			knobs, err := ipamd.KnobsFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			// Checked when the container mounts the bin dir and says where (the VPC CNI's
			// main container installs its plugin there itself).
			if cmd.Flags().Changed("cni-bin-dir") {
				if _, err := os.Stat(filepath.Join(p.cniBinDir, PluginName)); err != nil {
					return fmt.Errorf("the CNI plugin %s is not in %s (%w): the init container (nodejoin-netagent init) installs it", PluginName, p.cniBinDir, err)
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
				Knobs: knobs, CNIConfDir: p.cniConfDir, StateDir: p.stateDir, LogDir: p.logDir,
				MetricsAddr: metricsAddr, IntrospectionAddr: introspectionAddr,
				Metadata: md, EC2: sdk, Host: hostnet.Linux{},
				Logger: log,
			})
			if err != nil {
				return err
			}
			return d.Run(ctx)
		},
	}
	p.bind(cmd)
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", ipamd.DefaultMetricsAddr, "Prometheus metrics (/metrics); empty to disable")
	cmd.Flags().StringVar(&introspectionAddr, "introspection-addr", ipamd.DefaultIntrospectionAddr, "readiness (/healthz) and state (/v1/state); empty to disable")
	return cmd
}
