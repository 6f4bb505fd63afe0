package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/authn"
)

// errEntriesNotSynced is returned until the NodeAccessEntry cache has been filled: until
// then nobody is admitted through an access entry (deny by default).
var errEntriesNotSynced = errors.New("NodeAccessEntries not loaded yet")

// RoleIDs gives a role's unique ID (IAM GetRole's RoleId); inventory.EC2 is one.
type RoleIDs interface {
	RoleID(ctx context.Context, roleARN string) (string, error)
}

// accessEntries serves the NodeAccessEntries in the manager's cache as role mappings.
type accessEntries struct {
	cache    cache.Cache
	informer cache.Informer
	log      *slog.Logger
	// client and roles, when roles is set, pin an entry's role ID on first use.
	client client.Client
	roles  RoleIDs
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

// pin returns the Pin of an entry's mapping: it asks IAM for the role's unique ID and
// records it on the entry (RoleIDAnnotation), conditioned on the entry's UID and
// resourceVersion, so that a replica that raced another, or an entry re-created
// meanwhile, fails (retried by kube-apiserver) rather than overwriting a pin.
func (a *accessEntries) pin(e *nodejoinv1alpha1.NodeAccessEntry) func(ctx context.Context) (string, error) {
	name, uid, rv, arn := e.Name, e.UID, e.ResourceVersion, e.Spec.PrincipalARN
	return func(ctx context.Context) (string, error) {
		id, err := a.roles.RoleID(ctx, arn)
		if err != nil {
			return "", err
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid": uid, "resourceVersion": rv, "annotations": map[string]string{nodejoinv1alpha1.RoleIDAnnotation: id},
		}})
		if err != nil {
			return "", err
		}
		obj := &nodejoinv1alpha1.NodeAccessEntry{}
		obj.Name = name
		if err := a.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return "", fmt.Errorf("recording the role ID on NodeAccessEntry %s: %w", name, err)
		}
		a.log.Info("role ID pinned", "entry", name, "role", arn, "roleID", id)
		return id, nil
	}
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
	mappings := authn.EntryMappings(entries, func(name string, err error) {
		a.log.Warn("NodeAccessEntry ignored", "entry", name, "err", fmt.Sprint(err))
	})
	if a.roles != nil {
		byName := map[string]*nodejoinv1alpha1.NodeAccessEntry{}
		for _, e := range entries {
			byName["NodeAccessEntry "+e.Name] = e
		}
		for i := range mappings {
			if e := byName[mappings[i].Source]; e != nil && mappings[i].RoleID == "" {
				mappings[i].Pin = a.pin(e)
			}
		}
	}
	return mappings, nil
}
