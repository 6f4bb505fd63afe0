package csr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

// IssuedConfigMapName is the kube-system ConfigMap that records, by instance ID, the
// CSR through which a bootstrap token got the instance's client certificate.
const IssuedConfigMapName = "nodejoin-bootstrap-client-certificates"

// ConfigMapRecord is an IssuedRecord kept in a ConfigMap, so that it survives restarts
// and a new leader. Writes carry the ConfigMap's resourceVersion: two claims at once
// conflict instead of both succeeding. Claims made at the same time are written
// together (group commit): during a burst of joining nodes every CSR worker claims in
// this one ConfigMap, and one write per claim would make them conflict with each other.
type ConfigMapRecord struct {
	Client kubernetes.Interface
	// Namespace and Name of the ConfigMap; defaults kube-system, IssuedConfigMapName.
	Namespace, Name string
	// Instances, when set, lets Prune forget the instances that are gone; without it
	// the record only grows.
	Instances InstancesByID

	mu      sync.Mutex
	pending []*claimRequest
	writing bool
	// last is the ConfigMap as this record last read or wrote it, or nil. A batch
	// starts from it instead of reading the ConfigMap again: its write carries last's
	// resourceVersion, so a ConfigMap changed by anyone else meanwhile conflicts, and
	// the batch reads it again. Holder answers from it too. Guarded by mu; the object
	// is never changed once stored.
	last *corev1.ConfigMap
}

// claimRequest is one Claim waiting for the write that carries it.
type claimRequest struct {
	instanceID, csrName string
	holder              string
	err                 error
	done                chan struct{}
}

func (r *ConfigMapRecord) names() (string, string) {
	ns, name := r.Namespace, r.Name
	if ns == "" {
		ns = metav1.NamespaceSystem
	}
	if name == "" {
		name = IssuedConfigMapName
	}
	return ns, name
}

// Holder returns the CSR recorded for the instance, or "" when none is. It answers
// from the copy of the ConfigMap this record last read or wrote, when it has one, and
// reads the ConfigMap only when it has none or that copy names a holder: a claim since
// made by another writer (a former leader) is not in the copy, but Claim, which every
// signing goes through, finds it by the conflict of its write; and a holder the copy
// names is read again before anyone is refused for it, since a person may have removed
// the entry to let the instance join again. During a burst of joining nodes this saves
// every bootstrap CSR's decision a read of a ConfigMap that grows with the cluster.
func (r *ConfigMapRecord) Holder(ctx context.Context, instanceID string) (string, error) {
	if cm := r.cached(); cm != nil && cm.Data[instanceID] == "" {
		return "", nil
	}
	ns, name := r.names()
	cm, err := r.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
	}
	return cm.Data[instanceID], nil
}

// cached returns the copy of the ConfigMap last read or written by a claim, or nil.
// Callers only read it.
func (r *ConfigMapRecord) cached() *corev1.ConfigMap {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// keep stores the copy the next claim starts from (nil: read it again).
func (r *ConfigMapRecord) keep(cm *corev1.ConfigMap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = cm
}

// Claim records csrName for the instance unless another CSR holds it, and returns the
// holder. The claims of all callers waiting at the time go into one write; the caller
// that finds no write under way makes it, and the others wait for it.
func (r *ConfigMapRecord) Claim(ctx context.Context, instanceID, csrName string) (string, error) {
	req := &claimRequest{instanceID: instanceID, csrName: csrName, done: make(chan struct{})}
	r.mu.Lock()
	r.pending = append(r.pending, req)
	lead := !r.writing
	r.writing = true
	r.mu.Unlock()
	if lead {
		r.flush(ctx)
	}
	select {
	case <-req.done:
		return req.holder, req.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// flush writes pending claims, batch after batch, until none are left.
func (r *ConfigMapRecord) flush(ctx context.Context) {
	// The batch holds other callers' claims too: it is not cut short by this caller's
	// context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for {
		r.mu.Lock()
		batch := r.pending
		r.pending = nil
		if len(batch) == 0 {
			r.writing = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		err := retry.RetryOnConflict(claimBackoff, func() error { return r.claimAll(ctx, batch) })
		for _, req := range batch {
			if err != nil {
				req.holder, req.err = "", err
			}
			close(req.done)
		}
	}
}

// claimBackoff spaces the attempts of a write that conflicts with another writer (a
// former leader, another controller), jittered so that they do not collide again.
var claimBackoff = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: time.Second}

// claimAll records each claim of the batch whose instance has no holder yet (the first
// claim of an instance in the batch wins) in the ConfigMap as last written, or else as
// read now, then writes it once, carrying that copy's resourceVersion. Each request's
// holder is set. During a burst this saves each batch a read: the next batch starts
// from the copy the last write returned.
func (r *ConfigMapRecord) claimAll(ctx context.Context, batch []*claimRequest) (err error) {
	ns, name := r.names()
	cms := r.Client.CoreV1().ConfigMaps(ns)
	// Only the flushing caller writes last (one flush runs at a time); Holder reads it,
	// and goes on reading the copy while this write is under way. A write that fails
	// (a conflict: someone else changed the ConfigMap) drops the copy.
	defer func() {
		if err != nil {
			r.keep(nil)
		}
	}()
	cm, exists := r.cached(), true
	if cm == nil {
		var err error
		cm, err = cms.Get(ctx, name, metav1.GetOptions{})
		exists = err == nil
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		case err != nil:
			return fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
		}
	} else {
		cm = cm.DeepCopy()
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	changed := false
	for _, req := range batch {
		if holder := cm.Data[req.instanceID]; holder != "" {
			req.holder = holder
			continue
		}
		cm.Data[req.instanceID] = req.csrName
		req.holder = req.csrName
		changed = true
	}
	var written *corev1.ConfigMap
	switch {
	case !changed:
		if exists {
			r.keep(cm)
		}
		return nil
	case !exists:
		written, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Created meanwhile by another writer: read it again.
			return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
		}
		if err != nil {
			return fmt.Errorf("creating ConfigMap %s/%s: %w", ns, name, err)
		}
	default:
		written, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return err
		}
		if err != nil {
			return fmt.Errorf("updating ConfigMap %s/%s: %w", ns, name, err)
		}
	}
	r.keep(written)
	return nil
}

// InstancesByID finds an instance by ID, or inventory.ErrNotFound; inventory.EC2 and
// inventory.File are such.
type InstancesByID interface {
	Instance(ctx context.Context, id string) (*inventory.Instance, error)
}

// Prune forgets the instances that are gone, terminated or unknown to the inventory,
// and returns how many it forgot. An instance ID is never used again, so a gone
// instance's entry protects nothing; without pruning the ConfigMap grows with every
// instance that ever joined through a bootstrap token until it reaches the API
// server's object size limit (1 MiB, some 20,000 instances), and then no bootstrap
// token joins any node. An instance the inventory cannot answer for (an error) or
// that is in any other state (pending, stopped, shutting-down) is kept. The write
// carries the resourceVersion read, so a claim made meanwhile conflicts and the
// pruning reads again.
func (r *ConfigMapRecord) Prune(ctx context.Context) (int, error) {
	if r.Instances == nil {
		return 0, nil
	}
	ns, name := r.names()
	cms := r.Client.CoreV1().ConfigMaps(ns)
	removed := 0
	err := retry.RetryOnConflict(claimBackoff, func() error {
		removed = 0
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading ConfigMap %s/%s: %w", ns, name, err)
		}
		for _, id := range slices.Sorted(maps.Keys(cm.Data)) {
			inst, err := r.Instances.Instance(ctx, id)
			switch {
			case errors.Is(err, inventory.ErrNotFound), err == nil && inst.State == "terminated":
				delete(cm.Data, id)
				removed++
			case ctx.Err() != nil:
				return ctx.Err()
			}
		}
		if removed == 0 {
			return nil
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("updating ConfigMap %s/%s: %w", ns, name, err)
		}
		return err
	})
	if removed > 0 {
		// The next claim reads the ConfigMap as pruned instead of conflicting with it.
		r.keep(nil)
	}
	if err != nil {
		return 0, err
	}
	return removed, nil
}

// NewNodeRegistered returns a Policy.NodeRegistered that asks the API server.
func NewNodeRegistered(client kubernetes.Interface) func(context.Context, string) (bool, error) {
	return func(ctx context.Context, name string) (bool, error) {
		_, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
}
