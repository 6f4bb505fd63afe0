package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/authn"
)

// errEntriesNotSynced is returned until the NodeAccessEntry cache has been filled: until
// then nobody is admitted through an access entry (deny by default).
var errEntriesNotSynced = errors.New("NodeAccessEntries not loaded yet")

// accessEntries serves the NodeAccessEntries in the manager's cache as role mappings.
type accessEntries struct {
	cache    cache.Cache
	informer cache.Informer
	log      *slog.Logger
}

// newAccessEntries asks the cache to watch NodeAccessEntries; the watch starts with
// the manager.
func newAccessEntries(ctx context.Context, c cache.Cache, log *slog.Logger) (*accessEntries, error) {
	inf, err := c.GetInformer(ctx, &nodejoinv1alpha1.NodeAccessEntry{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("watching NodeAccessEntries: %w", err)
	}
	return &accessEntries{cache: c, informer: inf, log: log}, nil
}

// Ready is the readiness check: ready once the entries are loaded.
func (a *accessEntries) Ready(*http.Request) error {
	if !a.informer.HasSynced() {
		return errEntriesNotSynced
	}
	return nil
}

// Mappings implements the source of role mappings for the webhook.
func (a *accessEntries) Mappings(ctx context.Context) ([]authn.RoleMapping, error) {
	if !a.informer.HasSynced() {
		return nil, errEntriesNotSynced
	}
	var list nodejoinv1alpha1.NodeAccessEntryList
	if err := a.cache.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing NodeAccessEntries: %w", err)
	}
	entries := make([]*nodejoinv1alpha1.NodeAccessEntry, len(list.Items))
	for i := range list.Items {
		entries[i] = &list.Items[i]
	}
	return authn.EntryMappings(entries, func(name string, err error) {
		a.log.Warn("NodeAccessEntry ignored", "entry", name, "err", fmt.Sprint(err))
	}), nil
}
