package manager

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	sigsyaml "sigs.k8s.io/yaml"
)

// ApplyCRD applies a CustomResourceDefinition from its manifest with server-side apply
// (field manager Component, taking over fields others set), and waits until the API
// server reports it Established, so that its objects can be listed.
func ApplyCRD(ctx context.Context, client dynamic.Interface, manifest []byte) error {
	var want unstructured.Unstructured
	if err := sigsyaml.Unmarshal(manifest, &want.Object); err != nil {
		return fmt.Errorf("decoding CRD manifest: %w", err)
	}
	crds := client.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	name := want.GetName()
	if _, err := crds.Apply(ctx, name, &want, metav1.ApplyOptions{FieldManager: Component, Force: true}); err != nil {
		return fmt.Errorf("applying CustomResourceDefinition %s: %w", name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, &crd); err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
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
