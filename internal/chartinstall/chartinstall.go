// Package chartinstall installs nodejoin-controller's Helm chart into a local cluster
// (sandbox's control-plane nodes)
// with the pinned helm, as a user installs it on a self-managed cluster: the locally
// built image, replicas on the control-plane nodes' network, the approver (kube-
// controller-manager's kubelet signers sign, so no CA key is in any pod) and the token
// webhook behind its Service, with the Secrets and ConfigMaps its pods mount.
package chartinstall

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodejoin/nodejoin/charts"
	"github.com/nodejoin/nodejoin/internal/addons"
	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/localaws"
)

// Names of what Install installs.
const (
	// Release is the Helm release of nodejoin-controller's chart, in Namespace.
	Release   = "nodejoin-controller"
	Namespace = "kube-system"
	// awsSecret holds the pods' AWS key for the inventory's EC2 and IAM calls (on AWS:
	// the node's role or IRSA; the local account has a key for the controller).
	awsSecret = "nodejoin-controller-aws"
	// The approver's ports on the control-plane nodes, whose network the pods share:
	// clear of kube-apiserver's, kube-controller-manager's and kube-scheduler's.
	metricsPort = 10380
	healthPort  = 10381
	// What the token webhook's pods mount: its serving certificate, the CA of
	// kube-apiserver's client certificate, the CA of the in-VPC STS, and the local EC2's
	// instance identity certificate.
	webhookServing       = "nodejoin-webhook-tls"
	webhookClientCA      = "nodejoin-webhook-client-ca"
	webhookSTSCA         = "nodejoin-sts-ca"
	webhookIdentityCerts = "nodejoin-instance-identity"
)

// Config says what to install where.
type Config struct {
	// Helm is the pinned helm binary; Kubeconfig the cluster administrator's.
	Helm, Kubeconfig string
	Client           kubernetes.Interface
	// Dir receives the chart (Dir/chart) and its values (Dir/controller-values.json).
	Dir string
	// Nodes are the control-plane nodes: a replica runs on each, on the node's network,
	// tolerating Tolerations beside the control-plane taint.
	Nodes       []string
	Tolerations []corev1.Toleration
	// Cluster is the cluster's name, which nodes' tokens are bound to; Region the local
	// AWS's.
	Cluster, Region string
	// AWSURL is the local AWS's edge as the pods reach it (EC2 and IAM for the
	// inventory); STSURL its STS over TLS, STSCA that endpoint's CA (PEM); STSHosts
	// the STS hosts nodes' tokens may name.
	AWSURL, STSURL string
	STSCA          []byte
	STSHosts       []string
	// WebhookService is the fixed ClusterIP of the webhook's Service, which
	// kube-apiserver's webhook kubeconfig names.
	WebhookService netip.Addr
	// WebhookCert and WebhookKey (PEM) are the webhook's serving certificate, the one
	// kube-apiserver trusts; WebhookClientCA the CA of kube-apiserver's client one.
	WebhookCert, WebhookKey, WebhookClientCA []byte
	// IdentityCert signs the local EC2's instance identity documents.
	IdentityCert *x509.Certificate
}

// Install writes the pods' Secrets and ConfigMaps, waits for kube-proxy on every
// control-plane node (the pods reach kube-apiserver at its Service address), then runs
// `helm upgrade --install --wait`. It returns the values file.
func Install(ctx context.Context, cfg Config) (string, error) {
	if err := ensureAWSKey(ctx, cfg.Client); err != nil {
		return "", err
	}
	if err := ensureWebhookMaterial(ctx, cfg); err != nil {
		return "", err
	}
	for _, n := range cfg.Nodes {
		if err := waitKubeProxy(ctx, cfg.Client, n); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(cfg.Dir, "chart")
	if err := writeChart(dir); err != nil {
		return "", err
	}
	values, err := json.MarshalIndent(chartValues(cfg), "", "  ")
	if err != nil {
		return "", err
	}
	valuesFile := filepath.Join(cfg.Dir, "controller-values.json")
	if err := atomicfile.WriteFile(valuesFile, append(values, '\n'), 0o600); err != nil {
		return "", err
	}
	// --wait: the release is done when its Deployment is available, its pods Ready on
	// the control-plane nodes.
	cmd := exec.CommandContext(ctx, cfg.Helm, "upgrade", "--install", Release, filepath.Join(dir, "nodejoin-controller"),
		"--namespace", Namespace, "--kubeconfig", cfg.Kubeconfig, "--values", valuesFile, "--wait", "--timeout", "3m")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(dir, ".cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, ".config"), "HELM_DATA_HOME="+filepath.Join(dir, ".data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("helm upgrade --install %s: %w\n%s", Release, err, strings.TrimSpace(string(out)))
	}
	return valuesFile, nil
}

// chartValues are the chart's values for cfg.
func chartValues(cfg Config) map[string]any {
	secretEnv := func(env, key string) map[string]any {
		return map[string]any{"name": env, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": awsSecret, "key": key}}}
	}
	return map[string]any{
		// Loaded into the control-plane node from bin/images, never pulled.
		"image": map[string]any{"repository": "nodejoin.io/nodejoin-controller", "tag": "dev", "pullPolicy": "Never"},
		// A replica on each control-plane node, whose network it shares.
		"replicas":    len(cfg.Nodes),
		"hostNetwork": true,
		"placement": map[string]any{
			"tolerations": cfg.Tolerations,
		},
		"inventory": map[string]any{"source": "ec2", "ec2": map[string]any{"region": cfg.Region, "endpoint": cfg.AWSURL, "iamEndpoint": cfg.AWSURL}},
		"csr":       map[string]any{"mode": "approve"},
		// The token webhook behind its Service at the fixed address kube-apiserver's
		// webhook kubeconfig names (kube-proxy on the first control-plane node routes
		// it to the replicas), for kube-apiserver's client certificate only; tokens are
		// verified by the local STS inside the cluster namespace, never sent to AWS.
		"webhook": map[string]any{
			"enabled": true, "clusterID": cfg.Cluster, "region": cfg.Region, "stsHosts": cfg.STSHosts,
			"stsEndpoint": cfg.STSURL, "stsCAConfigMap": webhookSTSCA,
			"instanceProofs":    map[string]any{"certConfigMap": webhookIdentityCerts},
			"servingSecret":     webhookServing,
			"clientCAConfigMap": webhookClientCA,
			"service":           map[string]any{"clusterIP": cfg.WebhookService.String()},
		},
		"extraEnv": []any{
			secretEnv("AWS_ACCESS_KEY_ID", "access-key-id"), secretEnv("AWS_SECRET_ACCESS_KEY", "secret-access-key"),
			map[string]any{"name": "AWS_REGION", "value": cfg.Region},
		},
		"metricsPort": metricsPort,
		"healthPort":  healthPort,
	}
}

// waitKubeProxy waits until kube-proxy's pod on node is Ready.
func waitKubeProxy(ctx context.Context, client kubernetes.Interface, node string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: addons.Label + "=" + addons.KubeProxy, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // asked again until the timeout, which names it
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			last = "pod " + p.Name + " is " + string(p.Status.Phase)
		}
		if len(pods.Items) == 0 {
			last = "no kube-proxy pod yet"
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-proxy on %s: %s", node, last)
	}
	return nil
}

// ensureAWSKey writes the Secret with the local controller's AWS key.
func ensureAWSKey(ctx context.Context, client kubernetes.Interface) error {
	id, secret := localaws.ControllerKey()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: awsSecret, Namespace: Namespace},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"access-key-id": id, "secret-access-key": secret},
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := putSecret(ctx, client, sec); err != nil {
		return fmt.Errorf("the controller's AWS key (Secret %s/%s): %w", Namespace, awsSecret, err)
	}
	return nil
}

// putSecret creates sec, or replaces the one an earlier start wrote.
func putSecret(ctx context.Context, client kubernetes.Interface, sec *corev1.Secret) error {
	_, err := client.CoreV1().Secrets(sec.Namespace).Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = client.CoreV1().Secrets(sec.Namespace).Update(ctx, sec, metav1.UpdateOptions{})
	}
	return err
}

// writeChart writes the embedded chart under dir, replacing what an earlier start left.
func writeChart(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.CopyFS(dir, charts.NodejoinController)
}

// ensureWebhookMaterial writes what the token webhook's pods mount: the serving
// certificate kube-apiserver's webhook kubeconfig trusts (the cluster CA's, for the
// webhook Service's address), the CA of kube-apiserver's client certificate, the
// CA of the in-VPC STS and the local EC2's instance identity certificate.
func ensureWebhookMaterial(ctx context.Context, cfg Config) error {
	client := cfg.Client
	crt, key, clientCA, stsCA := cfg.WebhookCert, cfg.WebhookKey, cfg.WebhookClientCA, cfg.STSCA
	identity := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cfg.IdentityCert.Raw})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: webhookServing, Namespace: Namespace},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	if err := putSecret(ctx, client, sec); err != nil {
		return fmt.Errorf("the token webhook's Secret %s/%s: %w", Namespace, webhookServing, err)
	}
	for name, data := range map[string]map[string]string{
		webhookClientCA:      {"ca.crt": string(clientCA)},
		webhookSTSCA:         {"ca.crt": string(stsCA)},
		webhookIdentityCerts: {"certs.pem": string(identity)},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, Data: data}
		_, err := client.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = client.CoreV1().ConfigMaps(Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("the token webhook's ConfigMap %s/%s: %w", Namespace, name, err)
		}
	}
	return nil
}
