package csr

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection configures RunElected.
type LeaderElection struct {
	// Namespace and Name of the Lease. Defaults kube-system, nodejoin-controller.
	Namespace, Name string
	// Identity names this replica (its pod or host name).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod; defaults 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// RunElected runs the controller only while this replica holds the Lease, so that of
// several replicas one decides and signs at a time. It returns when ctx ends; the Lease
// is released then, so a successor need not wait for it to expire.
func (c *Controller) RunElected(ctx context.Context, le LeaderElection) error {
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
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     c.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	runErr := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				c.logger().Info("leading", "identity", le.Identity)
				if err := c.Start(ctx); err != nil {
					runErr <- err
				}
			},
			OnStoppedLeading: func() { c.logger().Info("stopped leading", "identity", le.Identity) },
		},
		Name: le.Name,
	})
	if err != nil {
		return err
	}
	elector.Run(ctx)
	select {
	case err := <-runErr:
		return err
	default:
		return nil
	}
}
