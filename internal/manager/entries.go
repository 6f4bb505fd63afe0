package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/authn"
)

// errEntriesNotSynced is returned until the NodeAccessEntry cache has been filled: until
// then nobody is admitted through an access entry (deny by default).
var errEntriesNotSynced = errors.New("NodeAccessEntries not loaded yet")

// accessEntries watches NodeAccessEntry objects and serves them as role mappings.
type accessEntries struct {
	informer cache.SharedIndexInformer
	log      *slog.Logger
}

func newAccessEntries(client dynamic.Interface, log *slog.Logger) *accessEntries {
	f := dynamicinformer.NewDynamicSharedInformerFactory(client, 10*time.Minute)
	return &accessEntries{informer: f.ForResource(nodejoinv1alpha1.NodeAccessEntryResource).Informer(), log: log}
}

// Start runs the watch until ctx ends.
func (a *accessEntries) Start(ctx context.Context) error {
	a.informer.Run(ctx.Done())
	return nil
}

// Mappings implements the source of role mappings for the webhook.
func (a *accessEntries) Mappings(context.Context) ([]authn.RoleMapping, error) {
	if !a.informer.HasSynced() {
		return nil, errEntriesNotSynced
	}
	var entries []*nodejoinv1alpha1.NodeAccessEntry
	for _, obj := range a.informer.GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var e nodejoinv1alpha1.NodeAccessEntry
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &e); err != nil {
			a.log.Warn("NodeAccessEntry ignored", "entry", u.GetName(), "err", err)
			continue
		}
		entries = append(entries, &e)
	}
	return authn.EntryMappings(entries, func(name string, err error) {
		a.log.Warn("NodeAccessEntry ignored", "entry", name, "err", fmt.Sprint(err))
	}), nil
}
