package manager

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/rbac"
)

// install applies nodejoin's roles and CRD, as configured.
func (cfg *Config) install(ctx context.Context, client kubernetes.Interface) error {
	if cfg.InstallRBAC {
		if !cfg.ChartRBAC {
			if err := rbac.Apply(ctx, client, cfg.Controller, Component); err != nil {
				return fmt.Errorf("installing RBAC: %w", err)
			}
		}
		if cfg.addonObjects != nil && cfg.Controller != nil {
			if err := rbac.ApplyObjects(ctx, client, rbac.ForAddons(cfg.Controller), Component); err != nil {
				return fmt.Errorf("installing the add-ons' RBAC: %w", err)
			}
		}
		if cfg.NodeGroups != nil && cfg.Controller != nil {
			if err := rbac.ApplyObjects(ctx, client, rbac.ForNodeGroups(cfg.Controller), Component); err != nil {
				return fmt.Errorf("installing the node groups' RBAC: %w", err)
			}
		}
		if cfg.AccessPolicies {
			if err := rbac.ApplyObjects(ctx, client, rbac.ForAccessPolicies(cfg.Controller), Component); err != nil {
				return fmt.Errorf("installing the access policies' RBAC: %w", err)
			}
		}
	}
	if cfg.InstallCRDs {
		dyn, err := dynamic.NewForConfig(cfg.REST)
		if err != nil {
			return err
		}
		if err := ApplyCRD(ctx, dyn, nodejoinv1alpha1.NodeAccessEntryCRD); err != nil {
			return err
		}
		if cfg.NodeGroups != nil {
			return ApplyCRD(ctx, dyn, nodejoinv1alpha1.NodeGroupCRD)
		}
	}
	return nil
}

// replicaName is this replica's leader-election identity, "" for a single replica.
func replicaName(le *LeaderElection) string {
	if le == nil {
		return ""
	}
	return le.Identity
}
