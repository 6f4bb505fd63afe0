package csr

import (
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// versioned makes a fake clientset keep resourceVersions as kube-apiserver does: every
// create and update stores a new one, and an update carrying another version than the
// stored one conflicts (one carrying none replaces any). (The fake's tracker leaves them as given.)
func versioned(client *fake.Clientset) *fake.Clientset {
	var mu sync.Mutex
	next := 100
	client.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		// Create and update actions alike carry the object (their interfaces are the same).
		withObject, ok := action.(interface{ GetObject() runtime.Object })
		if !ok || action.GetVerb() != "create" && action.GetVerb() != "update" {
			return false, nil, nil
		}
		obj := withObject.GetObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if action.GetVerb() == "update" {
			gvr := action.GetResource()
			stored, err := client.Tracker().Get(gvr, action.GetNamespace(), m.GetName())
			if err != nil {
				return false, nil, nil // the tracker answers NotFound itself
			}
			sm, err := meta.Accessor(stored)
			if err != nil {
				return false, nil, nil
			}
			if rv := m.GetResourceVersion(); rv != "" && rv != sm.GetResourceVersion() {
				return true, nil, apierrors.NewConflict(schema.GroupResource{Group: gvr.Group, Resource: gvr.Resource}, m.GetName(),
					fmt.Errorf("resourceVersion %q is not the stored %q", m.GetResourceVersion(), sm.GetResourceVersion()))
			}
		}
		next++
		m.SetResourceVersion(strconv.Itoa(next))
		return false, nil, nil
	})
	return client
}
