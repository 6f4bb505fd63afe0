package sandbox

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodejoin/nodejoin/internal/chartinstall"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/cpnode"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// ControllerNamespace is where the controller's chart is installed.
const ControllerNamespace = chartinstall.Namespace

// deployControllerStep installs nodejoin-controller's chart on the control-plane nodes
// (Options.ControlPlaneNodes) with the pinned helm (internal/chartinstall), as a user
// installs it on a self-managed cluster. From then on every worker's token is
// reviewed and its CSRs approved by those pods; this process keeps the local AWS and
// what EKS runs on its side (add-ons, node groups, access policies).
type deployControllerStep struct{}

func (deployControllerStep) Name() string { return "deploying nodejoin-controller" }

func (deployControllerStep) Run(ctx context.Context, s *state) error {
	sb := s.sandbox
	if !sb.opts.ControlPlaneNode {
		return nil
	}
	return s.progress.Timed("installing nodejoin-controller's chart on the control-plane nodes", func() error {
		helm, err := toolbin.Find(sb.binDir(), toolbin.Helm)
		if err != nil {
			return fmt.Errorf("%w (it is built by `make tools`)", err)
		}
		client, err := kubernetes.NewForConfig(sb.cluster.RESTConfig())
		if err != nil {
			return err
		}
		cfg := chartinstall.Config{Helm: helm, Kubeconfig: sb.cluster.KubeconfigPath(), Client: client, Dir: sb.opts.StateDir,
			Cluster: sb.opts.Name, Region: controller.DefaultRegion, AWSURL: sb.controller.EC2InternalURL(),
			STSURL: sb.controller.STSInternalURL(), STSHosts: sb.controller.TokenSTSHosts(controller.DefaultRegion),
			WebhookService: sb.cluster.Options().TokenWebhookService, IdentityCert: sb.controller.Cloud().IdentitySigner.Cert,
			// The nodes have no pod network: the pods use theirs.
			Tolerations: []corev1.Toleration{{Key: cpnode.HostNetworkOnlyTaint.Key, Operator: corev1.TolerationOpExists, Effect: cpnode.HostNetworkOnlyTaint.Effect}}}
		for _, n := range sb.cpNodes {
			cfg.Nodes = append(cfg.Nodes, n.Name())
		}
		p := sb.cluster.PKI()
		for path, into := range map[string]*[]byte{p.TokenWebhook.Cert: &cfg.WebhookCert, p.TokenWebhook.Key: &cfg.WebhookKey,
			p.TokenWebhookClientCA: &cfg.WebhookClientCA, sb.cluster.CAFile(): &cfg.STSCA} {
			if *into, err = os.ReadFile(path); err != nil {
				return fmt.Errorf("the token webhook's files: %w", err)
			}
		}
		values, err := chartinstall.Install(ctx, cfg)
		if err != nil {
			return err
		}
		s.progress.Note("nodejoin-controller runs as a Deployment in " + ControllerNamespace + " on " + strings.Join(cfg.Nodes, ", ") + " (values: " + values + ")")
		return nil
	})
}
