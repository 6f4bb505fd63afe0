// Package events records Kubernetes Events for nodejoin-controller's decisions.
package events

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Component is the source that nodejoin-controller's Events name.
const Component = "nodejoin-controller"

// Record creates an Event about obj in the default namespace (where Events of
// cluster-scoped objects go): Normal, or Warning when normal is false.
func Record(ctx context.Context, client kubernetes.Interface, obj corev1.ObjectReference, normal bool, reason, msg string) error {
	typ := corev1.EventTypeNormal
	if !normal {
		typ = corev1.EventTypeWarning
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: obj.Name + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: obj,
		Reason:         reason, Message: msg, Type: typ, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: Component},
	}
	_, err := client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
