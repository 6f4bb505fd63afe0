package csr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Controller approves or denies kubelet CSRs with a Policy and issues approved ones
// with a Signer. It is a controller-runtime reconciler: SetupWithManager watches the
// CSRs of the two kubelet signers, and several workers settle different CSRs at once
// (never one CSR twice at a time). Each write carries the CSR's resourceVersion, so two
// controllers racing on one CSR, or a worker acting on a stale cached copy, conflict
// instead of deciding or issuing twice; a conflict reads the CSR again.
type Controller struct {
	// Client writes decisions and certificates.
	Client kubernetes.Interface
	Policy *Policy
	// Signer issues approved CSRs; nil approves and denies only (another signer, such
	// as kube-controller-manager's csrsigning, issues every approved CSR).
	Signer *Signer
	// Replica names this replica (its leader-election identity, the pod's name when
	// deployed): a decision's condition message ends with it, so that `nodejoin
	// diagnose node` and `kubectl describe csr` show which replica decided. "" adds
	// nothing.
	Replica string
	Log     *slog.Logger
	// OnIssued, when set, is called after a certificate was stored on a CSR.
	OnIssued func(csrName string)
	// Metrics, when set, records decisions and latencies.
	Metrics *Metrics
	// Recorder, when set, records an Event about each decision and issued certificate.
	Recorder events.EventRecorder
	// Signers, when set, limits the controller to CSRs of these of the two kubelet
	// signers; CSRs of the others are left to another approver and signer (such as
	// kube-controller-manager's for client certificates, as upstream clusters have it).
	Signers []string
	// PruneInterval is how often the record of bootstrap joins forgets the instances
	// that are gone (ConfigMapRecord.Prune), while this controller runs; default
	// DefaultPruneInterval, negative: never.
	PruneInterval time.Duration

	// reader reads CSRs from the manager's cache.
	reader client.Reader

	// superseded holds, by CSR name, the resourceVersions that this controller's own
	// writes replaced, until the cache shows another version: see Reconcile.
	mu         sync.Mutex
	superseded map[string][]string
}

// supersede records that a write of this controller replaced the CSR's version rv.
func (c *Controller) supersede(name, rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.superseded == nil {
		c.superseded = map[string][]string{}
	}
	c.superseded[name] = append(c.superseded[name], rv)
}

// outdated reports whether a copy of a CSR is a version that this controller's own
// write replaced. Otherwise it forgets the CSR's replaced versions: the copy is newer
// than them, or the CSR is gone (csr nil).
func (c *Controller) outdated(name string, csr *certificatesv1.CertificateSigningRequest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if csr != nil && slices.Contains(c.superseded[name], csr.ResourceVersion) {
		return true
	}
	delete(c.superseded, name)
	return false
}

// SetupWithManager registers the controller with mgr, settling up to workers CSRs at
// once (at least one).
func (c *Controller) SetupWithManager(mgr ctrl.Manager, workers int) error {
	c.reader = mgr.GetClient()
	signers := c.Signers
	if len(signers) == 0 {
		signers = []string{SignerKubeletServing, SignerKubeletClient}
	}
	for _, s := range signers {
		if s != SignerKubeletServing && s != SignerKubeletClient {
			return fmt.Errorf("signer %q: want %s or %s", s, SignerKubeletServing, SignerKubeletClient)
		}
	}
	kubelets := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certificatesv1.CertificateSigningRequest)
		return ok && slices.Contains(signers, csr.Spec.SignerName)
	})
	if err := c.addPruner(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("certificatesigningrequest").
		Watches(&certificatesv1.CertificateSigningRequest{}, servingFirst(), builder.WithPredicates(kubelets)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(c)
}

// DefaultPruneInterval is Controller.PruneInterval's default: at ten minutes, with the
// instances of a day's churn, the record holds the live instances and those gone in the
// last ten minutes.
const DefaultPruneInterval = 10 * time.Minute

// pruner is an IssuedRecord that forgets instances that are gone (ConfigMapRecord).
type pruner interface {
	Prune(ctx context.Context) (int, error)
}

// addPruner runs the record's pruning every PruneInterval, on the leader (a Runnable
// needs leader election unless it says otherwise), when the record prunes.
func (c *Controller) addPruner(mgr ctrl.Manager) error {
	p, ok := c.Policy.Issued.(pruner)
	if !ok || c.PruneInterval < 0 {
		return nil
	}
	every := c.PruneInterval
	if every == 0 {
		every = DefaultPruneInterval
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			n, err := p.Prune(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				c.logger().Warn("pruning the record of bootstrap joins failed, retrying later", "err", err)
			case n > 0:
				c.logger().Info("the record of bootstrap joins forgot instances that are gone", "instances", n)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}))
}

// servingPriority is the work queue priority of serving CSRs; client CSRs get 0.
const servingPriority = 1

// servingFirst queues CSRs by name, serving CSRs ahead of client CSRs. A serving CSR
// comes from a node that already joined and waits only for it, while a client CSR's
// node still has to register before it asks for its serving certificate: with first
// in, first out, a burst of joining nodes queues every serving CSR behind every client
// CSR, and no node is done before nearly all of the client certificates are issued.
// As controller-runtime's own handler does, copies seen on the first list or on a
// resync (nothing changed) queue behind every new event, each kind in the same order.
func servingFirst() handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object, unchanged bool) {
		item := reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetName()}}
		pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
		if !ok {
			q.Add(item)
			return
		}
		p := 0
		if csr, ok := o.(*certificatesv1.CertificateSigningRequest); ok && csr.Spec.SignerName == SignerKubeletServing {
			p = servingPriority
		}
		if unchanged {
			p += handler.LowPriority
		}
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: &p}, item)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object, e.IsInInitialList)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectNew, e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion())
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: e.Object.GetName()}})
		},
	}
}

// NewAccessReview returns an AccessReview that asks the API server with a
// SubjectAccessReview on behalf of the CSR's requester.
func NewAccessReview(client kubernetes.Interface) AccessReview {
	return func(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, subresource string) (bool, error) {
		extra := map[string]authorizationv1.ExtraValue{}
		for k, v := range csr.Spec.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: csr.Spec.Username, UID: csr.Spec.UID, Groups: csr.Spec.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Verb: "create", Subresource: subresource,
			},
		}}
		out, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("SubjectAccessReview: %w", err)
		}
		if !out.Status.Allowed {
			// A kube-apiserver that has just started answers reviews before its
			// authorizer has loaded the RBAC policy, and denies everything then (found
			// by `nodejoin bench join --fault apiserver-restart`). A denial counts only
			// from a server that reports itself ready (its informers synced); otherwise
			// the CSR is retried. Nothing is approved without an allowed review.
			if _, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
				return false, fmt.Errorf("SubjectAccessReview denied while kube-apiserver is not ready, retrying: %w", err)
			}
		}
		return out.Status.Allowed, nil
	}
}

func (c *Controller) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// conflictRecheck is how soon a CSR whose write conflicted is read again, should no
// watch event bring its newer version sooner.
const conflictRecheck = time.Second

// Reconcile settles the CSR a request names, read from the manager's cache.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var csr certificatesv1.CertificateSigningRequest
	if err := c.reader.Get(ctx, req.NamespacedName, &csr); err != nil {
		if apierrors.IsNotFound(err) {
			c.outdated(req.Name, nil)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if c.outdated(csr.Name, &csr) {
		// The cache still holds a version that this controller replaced (the watch
		// lags behind its writes during a burst); the event of the newer version
		// brings the CSR back. Settling this copy would review and sign the CSR again
		// only to conflict.
		return reconcile.Result{}, nil
	}
	err := c.Settle(ctx, &csr)
	switch {
	case err == nil:
		return reconcile.Result{}, nil
	case ctx.Err() != nil:
		// Stopping: whoever leads next settles it.
		return reconcile.Result{}, ctx.Err()
	case apierrors.IsConflict(err):
		// Another writer, or a cached copy older than the CSR: read it again.
		c.logger().Debug("CSR changed meanwhile, reading it again", "csr", csr.Name)
		return reconcile.Result{RequeueAfter: conflictRecheck}, nil
	default:
		c.logger().Warn("CSR not settled, retrying", "csr", csr.Name, "err", err)
		return reconcile.Result{}, err
	}
}

func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved || cond.Type == certificatesv1.CertificateDenied {
			return true
		}
	}
	return false
}

// Settle decides an undecided CSR, then issues it if it is approved and unsigned. A CSR
// approved by anyone else (a person, another controller, or this controller before a
// restart) is decided again before it is signed, as EKS's signer does: an approval is
// never trusted on its own, and a CSR the policy no longer approves is marked Failed
// with the policy's reason instead of being signed.
//
//nolint:gocyclo // one CSR's states in order (decided, approved, signed, recorded), read top to bottom.
func (c *Controller) Settle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	var approval *Decision
	if !decided(csr) && len(csr.Status.Certificate) == 0 {
		d, err := c.Policy.Decide(ctx, csr)
		if err != nil || d == nil {
			return err
		}
		if d, err = c.claimBeforeApproval(ctx, csr, d); err != nil {
			return err
		}
		msg := d.Message
		if c.Replica != "" {
			msg += " (decided by nodejoin-controller replica " + c.Replica + ")"
		}
		cond := certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: d.Reason, Message: msg,
			LastUpdateTime: metav1.Now(),
		}
		if d.Approve {
			cond.Type = certificatesv1.CertificateApproved
		}
		csr.Status.Conditions = append(csr.Status.Conditions, cond)
		updated, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("recording the decision on %s: %w", csr.Name, err)
		}
		c.supersede(csr.Name, csr.ResourceVersion)
		c.Metrics.decided(csr, d, time.Now())
		c.logger().Info("CSR decided", "csr", csr.Name, "signer", csr.Spec.SignerName, "requester", csr.Spec.Username, "approved", d.Approve, "reason", d.Reason, "message", d.Message)
		if !d.Approve {
			c.event(updated, false, "Decide", d.Reason, d.Message)
		}
		// An approval gets its event with the certificate (below): one Event per
		// joining CSR instead of two halves the Events a burst of nodes writes. The
		// Approved condition on the CSR records the decision either way.
		csr = updated
		if d.Approve {
			approval = d
		}
	}
	if c.Signer == nil {
		// Approval only: kube-controller-manager's signer issues what was approved.
		if approval != nil {
			c.event(csr, true, "Decide", "Approved", "approved ("+approval.Message+"); kube-controller-manager's signer issues the certificate")
		}
		return nil
	}
	if !Signable(csr) {
		return nil
	}
	if approval == nil {
		d, err := c.Policy.Decide(ctx, csr)
		if err != nil {
			return fmt.Errorf("deciding approved %s again before signing: %w", csr.Name, err)
		}
		if d == nil {
			return nil
		}
		if !d.Approve {
			return c.fail(ctx, csr, d)
		}
		approval = d
	}
	if id := approval.ClaimInstance; id != "" {
		// Claimed before signing, so two CSRs approved at once for one instance
		// cannot both be signed.
		holder, err := c.Policy.Issued.Claim(ctx, id, csr.Name)
		if err != nil {
			return fmt.Errorf("recording the client certificate of instance %s: %w", id, err)
		}
		if holder != csr.Name {
			return c.fail(ctx, csr, deny(ReasonAlreadyJoined, "instance %s already got a client certificate through a bootstrap token (CSR %s)", id, holder))
		}
	}
	cert, err := c.Signer.Sign(csr)
	if errors.Is(err, ErrNotSignable) {
		return nil
	}
	if err != nil {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "SignerValidationFailure", Message: err.Error(), LastUpdateTime: metav1.Now(),
		})
		_, uerr := c.Client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
		if uerr == nil {
			c.supersede(csr.Name, csr.ResourceVersion)
		}
		return errors.Join(err, uerr)
	}
	csr.Status.Certificate = cert
	issued, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("issuing %s: %w", csr.Name, err)
	}
	c.supersede(csr.Name, csr.ResourceVersion)
	c.logger().Info("CSR issued", "csr", csr.Name, "signer", csr.Spec.SignerName, "requester", csr.Spec.Username)
	c.Metrics.issued(csr, time.Now())
	if c.OnIssued != nil {
		c.OnIssued(csr.Name)
	}
	c.event(issued, true, "Issue", "Issued", "approved ("+approval.Message+"), certificate issued by nodejoin-controller")
	return nil
}

// fail marks an approved CSR Failed with the reason and message of the policy's denial,
// so that it is never signed.
func (c *Controller) fail(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d *Decision) error {
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: d.Reason, Message: d.Message, LastUpdateTime: metav1.Now(),
	})
	failed, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("marking %s failed: %w", csr.Name, err)
	}
	c.supersede(csr.Name, csr.ResourceVersion)
	c.logger().Warn("approved CSR refused at signing", "csr", csr.Name, "signer", csr.Spec.SignerName, "requester", csr.Spec.Username, "reason", d.Reason, "message", d.Message)
	c.event(failed, false, "Sign", d.Reason, d.Message)
	return nil
}

// event records a Kubernetes Event on the CSR, when a recorder is set; the recorder
// sends it in the background.
func (c *Controller) event(csr *certificatesv1.CertificateSigningRequest, normal bool, action, reason, msg string) {
	if c.Recorder == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if !normal {
		typ = corev1.EventTypeWarning
	}
	c.Recorder.Eventf(csr, nil, typ, reason, action, "%s", msg)
}
