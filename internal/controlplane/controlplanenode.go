package controlplane

// The control-plane node: a kubelet on the control-plane host (in the cluster
// namespace, beside kube-apiserver), so that the cluster can run its own add-ons —
// nodejoin-controller first — on control-plane nodes, as kubeadm clusters do.
//
// Its kubelet joins the one way that needs no controller: this package issues its
// client certificate directly from the cluster CA, for system:node:<name> in group
// system:nodes, and writes the kubeconfig that names it. That is kubeadm's
// `kubeadm init` phase "kubeconfig kubelet" (kubelet.conf): the first node of a
// cluster cannot use TLS bootstrapping, because what approves and signs bootstrap
// CSRs (here nodejoin-controller) is to run on that very node. It is done once, by
// the process that holds the CA key anyway; every other node still joins through the
// token webhook and the CSR approver. The kubelet then renews this certificate itself
// through a CSR, like any node.
//
// kube-apiserver's Node authorizer and NodeRestriction admission treat the certificate
// as any node's: it may create and update only its own Node and read only what its
// pods need. The kubelet refuses node-role.kubernetes.io/ labels in --node-labels, so
// MarkControlPlane sets the role label with the administrator's rights afterwards,
// as kubeadm's "mark-control-plane" phase does; the NoSchedule taint is registered
// by the kubelet itself (--register-with-taints) so that no pod lands there before it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/pki"
)

// ControlPlaneRoleLabel marks a control-plane node; the chart's node selector and
// kubeadm's kube-controller-manager placement select it.
const ControlPlaneRoleLabel = "node-role.kubernetes.io/control-plane"

// ControlPlaneTaint keeps ordinary pods off control-plane nodes; only pods that
// tolerate it (nodejoin-controller's, the network add-on's) run there.
var ControlPlaneTaint = corev1.Taint{Key: ControlPlaneRoleLabel, Effect: corev1.TaintEffectNoSchedule}

// controlPlaneKubeletValidity is how long the first certificate lasts: a year, as
// kubeadm's; the kubelet renews it through a CSR well before.
const controlPlaneKubeletValidity = 365 * 24 * time.Hour

// KubeletClientCert is the kubelet's client certificate and key as one PEM file, the
// form the kubelet's own rotation writes (kubelet-client-current.pem).
type KubeletClientCert struct {
	// NodeName is the Node the kubelet registers: the certificate's
	// system:node:<NodeName>.
	NodeName string
	// CertPath receives the certificate and key (mode 0600).
	CertPath string
	// KubeconfigPath receives the kubelet's kubeconfig (--kubeconfig), naming CertPath
	// and the cluster CA, and the API at Server.
	KubeconfigPath string
	// Server is the API's URL as the kubelet reaches it. Default InternalEndpoint.
	Server string
	// ServingCertPath, when set, receives a serving certificate and key for the
	// kubelet's own API (kubelet-server-current.pem), for NodeName and Addresses: the
	// kubelet rotates it through a kubelet-serving CSR later, but needs no approver
	// to start with, as a kubeadm control-plane kubelet does not.
	ServingCertPath string
	// Addresses are the node's addresses, in its serving certificate.
	Addresses []netip.Addr
}

// WriteControlPlaneKubelet issues the control-plane node kubelet's client certificate
// from the cluster CA and writes its kubeconfig: the one first bootstrap, explained at
// the top of this file. Never use it for a worker: they join through the webhook.
func (c *Cluster) WriteControlPlaneKubelet(k KubeletClientCert) error {
	if err := ValidNodeName(k.NodeName); err != nil {
		return err
	}
	if k.CertPath == "" || k.KubeconfigPath == "" {
		return fmt.Errorf("control-plane node %s: certificate and kubeconfig paths are both required", k.NodeName)
	}
	if c.ca == nil {
		return fmt.Errorf("control-plane node %s: cluster %s holds no CA key", k.NodeName, c.opts.Name)
	}
	kp, err := c.ca.Issue(pki.Request{
		CommonName: "system:node:" + k.NodeName, Organization: []string{"system:nodes"},
		Usage: pki.ClientAuth, Validity: controlPlaneKubeletValidity,
	})
	if err != nil {
		return err
	}
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(k.CertPath), filepath.Dir(k.KubeconfigPath)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := atomicfile.WriteFile(k.CertPath, append(kp.CertPEM(), keyPEM...), 0o600); err != nil {
		return fmt.Errorf("writing the control-plane kubelet's certificate: %w", err)
	}
	if k.ServingCertPath != "" {
		ips := make([]net.IP, 0, len(k.Addresses))
		for _, a := range k.Addresses {
			ips = append(ips, net.IP(a.AsSlice()))
		}
		// The subject the kubelet-serving signer requires of a CSR, so that the
		// kubelet's renewal asks for the same name.
		serving, err := c.ca.Issue(pki.Request{
			CommonName: "system:node:" + k.NodeName, Organization: []string{"system:nodes"},
			DNSNames: []string{k.NodeName}, IPs: ips, Usage: pki.ServerAuth, Validity: controlPlaneKubeletValidity,
		})
		if err != nil {
			return err
		}
		skey, err := serving.KeyPEM()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(k.ServingCertPath), 0o700); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(k.ServingCertPath, append(serving.CertPEM(), skey...), 0o600); err != nil {
			return fmt.Errorf("writing the control-plane kubelet's serving certificate: %w", err)
		}
	}
	server := k.Server
	if server == "" {
		server = c.InternalEndpoint()
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: c.pki.CA.Cert}
	cfg.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{ClientCertificate: k.CertPath, ClientKey: k.CertPath}
	cfg.Contexts["kubelet"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "kubelet"}
	cfg.CurrentContext = "kubelet"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(k.KubeconfigPath, data, 0o600)
}

var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)

// ValidNodeName checks that name can be a Node's name and a certificate's
// system:node:<name>: a DNS subdomain.
func ValidNodeName(name string) error {
	if !nodeNameRE.MatchString(name) || len(name) > 253 {
		return fmt.Errorf("node name %q: want a DNS subdomain (lower-case letters, digits, '-' and '.')", name)
	}
	return nil
}

// MarkControlPlane gives the Node the control-plane role label and makes sure it has
// the control-plane taint, with the administrator's client, as kubeadm's
// mark-control-plane phase does (the kubelet may not set a node-role label itself).
func MarkControlPlane(ctx context.Context, client kubernetes.Interface, nodeName string) error {
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return markControlPlane(ctx, client, nodeName) }); err != nil {
		return fmt.Errorf("marking %s as a control-plane node: %w", nodeName, err)
	}
	return nil
}

func markControlPlane(ctx context.Context, client kubernetes.Interface, nodeName string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	taints := node.Spec.Taints
	has := false
	for _, t := range taints {
		if t.Key == ControlPlaneTaint.Key && t.Effect == ControlPlaneTaint.Effect {
			has = true
		}
	}
	if !has {
		taints = append(taints, ControlPlaneTaint)
	}
	// A merge patch with the node's resourceVersion: a concurrent change (the kubelet's
	// own status) makes it fail with a conflict instead of dropping a taint.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": map[string]string{ControlPlaneRoleLabel: ""}, "resourceVersion": node.ResourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
