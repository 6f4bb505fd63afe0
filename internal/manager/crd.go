package manager

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// EnsureCRD creates or updates a CustomResourceDefinition from its manifest and waits
// until the API server reports it Established, so that its objects can be listed.
func EnsureCRD(ctx context.Context, client dynamic.Interface, manifest []byte) error {
	var want unstructured.Unstructured
	if err := sigsyaml.Unmarshal(manifest, &want.Object); err != nil {
		return fmt.Errorf("decoding CRD manifest: %w", err)
	}
	crds := client.Resource(crdResource)
	name := want.GetName()
	cur, err := crds.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = crds.Create(ctx, &want, metav1.CreateOptions{})
	case err == nil:
		want.SetResourceVersion(cur.GetResourceVersion())
		_, err = crds.Update(ctx, &want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s: %w", name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CustomResourceDefinition %s to be established: %w", name, err)
	}
	return nil
}
