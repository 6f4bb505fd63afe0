package manager

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/internal/rbac"
)

// What the CSR controller of `nodejoin-controller run` does (--csr).
const (
	// CSRSign approves and signs kubelet CSRs with --ca-cert and --ca-key: the key is
	// in the controller's pod.
	CSRSign = "sign"
	// CSRApprove approves or denies only; kube-controller-manager's kubelet signers
	// (csrsigning) sign what was approved, so no CA key is in the controller's pod.
	CSRApprove = "approve"
	// CSROff runs no CSR controller: a replica for the add-ons or node groups alone,
	// under a service account of its own.
	CSROff = "off"
)

// csrOptions are run's flags for the CSR controller's part and its Lease.
type csrOptions struct {
	mode      string
	leaseName string
}

func (c *csrOptions) register(f *pflag.FlagSet) {
	f.StringVar(&c.mode, "csr", CSRSign, `kubelet CSRs: "sign" (approve and sign with --ca-cert/--ca-key), "approve" (approve or deny; kube-controller-manager's kubelet signers sign, and no CA key is needed), "off" (no CSR controller: add-ons or node groups alone)`)
	f.StringVar(&c.leaseName, "leader-election-id", rbac.LeaseName, "name of the leader-election Lease (one per set of replicas doing the same work)")
}

func (c *csrOptions) validate() error {
	switch c.mode {
	case CSRSign, CSRApprove, CSROff:
	default:
		return fmt.Errorf("--csr %q: want %s, %s or %s", c.mode, CSRSign, CSRApprove, CSROff)
	}
	if c.leaseName == "" {
		return fmt.Errorf("--leader-election-id is empty")
	}
	return nil
}

// signs says whether the controller signs certificates itself, and so needs the CA key.
func (c *csrOptions) signs() bool { return c.mode == CSRSign }

// config sets what the CSR controller runs with: a Signer when it signs (set by the
// caller, which loads the CA), approval alone, or nothing.
func (c *csrOptions) config(cfg *Config) {
	cfg.ApproveOnly = c.mode == CSRApprove
}

// csrController says whether the leader runs the CSR controller: to sign, or only to
// approve.
func (cfg *Config) csrController() bool { return cfg.Signer != nil || cfg.ApproveOnly }

// runsNothing says whether no part is configured: no CSR controller, no webhook, no
// add-ons and no node groups.
func (cfg *Config) runsNothing() bool {
	return !cfg.csrController() && cfg.WebhookListener == nil && cfg.Addons == nil && cfg.NodeGroups == nil
}
