package csr

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// IssuedConfigMapName is the kube-system ConfigMap that records, by instance ID, the
// CSR through which a bootstrap token got the instance's client certificate.
const IssuedConfigMapName = "nodejoin-bootstrap-client-certificates"

// ConfigMapRecord is an IssuedRecord kept in a ConfigMap, so that it survives restarts
// and a new leader. Writes carry the ConfigMap's resourceVersion: two claims at once
// conflict instead of both succeeding.
type ConfigMapRecord struct {
	Client kubernetes.Interface
	// Namespace and Name of the ConfigMap; defaults kube-system, IssuedConfigMapName.
	Namespace, Name string
}

func (r *ConfigMapRecord) names() (string, string) {
	ns, name := r.Namespace, r.Name
	if ns == "" {
		ns = metav1.NamespaceSystem
	}
	if name == "" {
		name = IssuedConfigMapName
	}
	return ns, name
}

// IssuedFor returns the CSR recorded for the instance, or "".
func (r *ConfigMapRecord) IssuedFor(ctx context.Context, instanceID string) (string, error) {
	ns, name := r.names()
	cm, err := r.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
	}
	return cm.Data[instanceID], nil
}

// Claim records csrName for the instance unless another CSR holds it, and returns the
// holder. A conflict with another writer is returned as an error (retry).
func (r *ConfigMapRecord) Claim(ctx context.Context, instanceID, csrName string) (string, error) {
	ns, name := r.names()
	cms := r.Client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{instanceID: csrName}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("creating ConfigMap %s/%s: %w", ns, name, err)
		}
		return csrName, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
	}
	if holder := cm.Data[instanceID]; holder != "" {
		return holder, nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[instanceID] = csrName
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("updating ConfigMap %s/%s: %w", ns, name, err)
	}
	return csrName, nil
}

// NewNodeRegistered returns a Policy.NodeRegistered that asks the API server.
func NewNodeRegistered(client kubernetes.Interface) func(context.Context, string) (bool, error) {
	return func(ctx context.Context, name string) (bool, error) {
		_, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
}
