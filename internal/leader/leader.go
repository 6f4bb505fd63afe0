// Package leader runs work only while this replica holds a Lease, so that of several
// replicas of nodejoin-controller one decides, signs and cleans up at a time.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election configures Run.
type Election struct {
	// Namespace and Name of the Lease. Defaults kube-system, nodejoin-controller.
	Namespace, Name string
	// Identity names this replica (its pod or host name). Required.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod; defaults 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Run calls lead with a context that ends when leadership ends, each time this replica
// becomes the leader, until ctx ends; the Lease is released then, so a successor need not
// wait for it to expire. An error from lead ends Run with that error.
func Run(ctx context.Context, client kubernetes.Interface, le Election, log *slog.Logger, lead func(ctx context.Context) error) error {
	if le.Namespace == "" {
		le.Namespace = metav1.NamespaceSystem
	}
	if le.Name == "" {
		le.Name = "nodejoin-controller"
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration, le.RenewDeadline, le.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if le.Identity == "" {
		return fmt.Errorf("leader election needs an identity for this replica")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				log.Info("leading", "identity", le.Identity, "lease", le.Namespace+"/"+le.Name)
				if err := lead(lctx); err != nil && lctx.Err() == nil {
					runErr <- err
					cancel()
				}
			},
			OnStoppedLeading: func() { log.Info("stopped leading", "identity", le.Identity) },
		},
		Name: le.Name,
	})
	if err != nil {
		return err
	}
	// A replica that loses the Lease keeps trying to win it back until ctx ends.
	for ctx.Err() == nil {
		elector.Run(ctx)
	}
	select {
	case err := <-runErr:
		return err
	default:
		return nil
	}
}
