package sandbox

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
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
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/cpnode"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// Names of what deployControllerStep installs.
const (
	// ControllerRelease is the Helm release of nodejoin-controller's chart, in
	// ControllerNamespace.
	ControllerRelease   = "nodejoin-controller"
	ControllerNamespace = "kube-system"
	// controllerAWSSecret holds the pods' AWS key for the inventory's EC2 and IAM calls
	// (on AWS: the node's role or IRSA; the local account has a key for the controller).
	controllerAWSSecret = "nodejoin-controller-aws"
	// The approver's ports on the control-plane node, whose network the pods share:
	// clear of kube-apiserver's, kube-controller-manager's and kube-scheduler's.
	controllerMetricsPort = 10380
	controllerHealthPort  = 10381
	// What the token webhook's pods mount: its serving certificate, the CA of
	// kube-apiserver's client certificate, the CA of the in-VPC STS, and the local EC2's
	// instance identity certificate.
	webhookServing       = "nodejoin-webhook-tls"
	webhookClientCA      = "nodejoin-webhook-client-ca"
	webhookSTSCA         = "nodejoin-sts-ca"
	webhookIdentityCerts = "nodejoin-instance-identity"
)

// deployControllerStep installs nodejoin-controller's chart on the control-plane node
// (Options.ControlPlaneNode) with the pinned helm, as a user installs it on a
// self-managed cluster: the locally built image, the approver alone
// (kube-controller-manager's kubelet signers sign, so no CA key is in any pod), placed
// on the control-plane node. From then on every worker's CSRs are approved by its pod;
// this process keeps the local AWS and what EKS runs on its side (the token webhook,
// add-ons, node groups).
type deployControllerStep struct{}

func (deployControllerStep) Name() string { return "deploying nodejoin-controller" }

func (deployControllerStep) Run(ctx context.Context, s *state) error {
	sb := s.sandbox
	if !sb.opts.ControlPlaneNode {
		return nil
	}
	return s.progress.Timed("installing nodejoin-controller's chart on the control-plane node", func() error {
		binDir := sb.binDir()
		helm, err := toolbin.Find(binDir, toolbin.Helm)
		if err != nil {
			return fmt.Errorf("%w (it is built by `make tools`)", err)
		}
		client, err := kubernetes.NewForConfig(sb.cluster.RESTConfig())
		if err != nil {
			return err
		}
		if err := ensureControllerAWSKey(ctx, client); err != nil {
			return err
		}
		if err := ensureWebhookMaterial(ctx, client, sb); err != nil {
			return err
		}
		// The pods reach kube-apiserver at its Service address, which the node's
		// kube-proxy programs: before it runs, they would fail and restart.
		if err := waitKubeProxy(ctx, client, sb.cpNode.Name()); err != nil {
			return err
		}
		dir := filepath.Join(sb.opts.StateDir, "chart")
		if err := writeChart(dir); err != nil {
			return err
		}
		values, err := json.MarshalIndent(controllerValues(sb.opts.Name, sb.controller, controller.DefaultRegion), "", "  ")
		if err != nil {
			return err
		}
		valuesFile := filepath.Join(sb.opts.StateDir, "controller-values.json")
		if err := atomicfile.WriteFile(valuesFile, append(values, '\n'), 0o600); err != nil {
			return err
		}
		// --wait: the release is done when its Deployment is available, its pod Ready on
		// the control-plane node.
		cmd := exec.CommandContext(ctx, helm, "upgrade", "--install", ControllerRelease, filepath.Join(dir, "nodejoin-controller"),
			"--namespace", ControllerNamespace, "--kubeconfig", sb.cluster.KubeconfigPath(),
			"--values", valuesFile, "--wait", "--timeout", "3m")
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(dir, ".cache"),
			"HELM_CONFIG_HOME="+filepath.Join(dir, ".config"), "HELM_DATA_HOME="+filepath.Join(dir, ".data"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("helm upgrade --install %s: %w\n%s", ControllerRelease, err, strings.TrimSpace(string(out)))
		}
		s.progress.Note("nodejoin-controller runs as a Deployment in " + ControllerNamespace + " on the control-plane node (values: " + valuesFile + ")")
		return nil
	})
}

// controllerValues are the chart's values for the local cluster name, whose local AWS
// ctl serves.
func controllerValues(name string, ctl *controller.Controller, region string) map[string]any {
	awsURL := ctl.EC2InternalURL()
	secretEnv := func(env, key string) map[string]any {
		return map[string]any{"name": env, "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": controllerAWSSecret, "key": key}}}
	}
	return map[string]any{
		// Loaded into the control-plane node from bin/images, never pulled.
		"image": map[string]any{"repository": "nodejoin.io/nodejoin-controller", "tag": "dev", "pullPolicy": "Never"},
		// One control-plane node, whose network the pods share: one replica.
		"replicas":    1,
		"hostNetwork": true,
		"placement": map[string]any{
			"tolerations": []any{map[string]any{"key": cpnode.HostNetworkOnlyTaint.Key, "operator": "Exists", "effect": string(cpnode.HostNetworkOnlyTaint.Effect)}},
		},
		"inventory": map[string]any{"source": "ec2", "ec2": map[string]any{"region": region, "endpoint": awsURL, "iamEndpoint": awsURL}},
		"csr":       map[string]any{"mode": "approve"},
		// The token webhook at the address kube-apiserver's webhook kubeconfig names
		// (the control-plane node's, whose network the pods share), for kube-apiserver's
		// client certificate only; tokens are verified by the local STS inside the
		// cluster namespace, never sent to AWS.
		"webhook": map[string]any{
			"enabled": true, "clusterID": name, "region": region, "stsHosts": ctl.TokenSTSHosts(region),
			"stsEndpoint": ctl.STSInternalURL(), "stsCAConfigMap": webhookSTSCA,
			"instanceProofs":    map[string]any{"certConfigMap": webhookIdentityCerts},
			"servingSecret":     webhookServing,
			"clientCAConfigMap": webhookClientCA,
		},
		"extraEnv": []any{
			secretEnv("AWS_ACCESS_KEY_ID", "access-key-id"), secretEnv("AWS_SECRET_ACCESS_KEY", "secret-access-key"),
			map[string]any{"name": "AWS_REGION", "value": region},
		},
		"metricsPort": controllerMetricsPort,
		"healthPort":  controllerHealthPort,
	}
}

// waitKubeProxy waits until kube-proxy's pod on node is Ready.
func waitKubeProxy(ctx context.Context, client kubernetes.Interface, node string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ControllerNamespace).List(ctx, metav1.ListOptions{
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

// ensureControllerAWSKey writes the Secret with the local controller's AWS key.
func ensureControllerAWSKey(ctx context.Context, client kubernetes.Interface) error {
	id, secret := localaws.ControllerKey()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: controllerAWSSecret, Namespace: ControllerNamespace},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"access-key-id": id, "secret-access-key": secret},
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := client.CoreV1().Secrets(ControllerNamespace).Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = client.CoreV1().Secrets(ControllerNamespace).Update(ctx, sec, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("the controller's AWS key (Secret %s/%s): %w", ControllerNamespace, controllerAWSSecret, err)
	}
	return nil
}

// writeChart writes the embedded chart under dir, replacing what an earlier start left.
func writeChart(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.CopyFS(dir, charts.NodejoinController)
}

// ensureWebhookMaterial writes what the token webhook's pods mount: the serving
// certificate kube-apiserver's webhook kubeconfig trusts (the cluster's, for the
// control-plane node's address), the CA of kube-apiserver's client certificate, the
// CA of the in-VPC STS and the local EC2's instance identity certificate.
func ensureWebhookMaterial(ctx context.Context, client kubernetes.Interface, sb *Sandbox) error {
	p := sb.cluster.PKI()
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("the token webhook's files: %w", err)
		}
		return b, nil
	}
	crt, err := read(p.TokenWebhook.Cert)
	if err != nil {
		return err
	}
	key, err := read(p.TokenWebhook.Key)
	if err != nil {
		return err
	}
	clientCA, err := read(p.TokenWebhookClientCA)
	if err != nil {
		return err
	}
	stsCA, err := read(sb.cluster.CAFile())
	if err != nil {
		return err
	}
	identity := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: sb.controller.Cloud().IdentitySigner.Cert.Raw})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: webhookServing, Namespace: ControllerNamespace},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}
	if _, err := client.CoreV1().Secrets(ControllerNamespace).Create(ctx, sec, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = client.CoreV1().Secrets(ControllerNamespace).Update(ctx, sec, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("the token webhook's Secret %s/%s: %w", ControllerNamespace, webhookServing, err)
		}
	} else if err != nil {
		return fmt.Errorf("the token webhook's Secret %s/%s: %w", ControllerNamespace, webhookServing, err)
	}
	for name, data := range map[string]map[string]string{
		webhookClientCA:      {"ca.crt": string(clientCA)},
		webhookSTSCA:         {"ca.crt": string(stsCA)},
		webhookIdentityCerts: {"certs.pem": string(identity)},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ControllerNamespace}, Data: data}
		_, err := client.CoreV1().ConfigMaps(ControllerNamespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = client.CoreV1().ConfigMaps(ControllerNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("the token webhook's ConfigMap %s/%s: %w", ControllerNamespace, name, err)
		}
	}
	return nil
}
