package csr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/nodejoin/nodejoin/internal/events"
)

// Controller approves or denies kubelet CSRs with a Policy and issues approved ones
// with a Signer. Each write carries the CSR's resourceVersion, so two controllers
// racing on one CSR conflict instead of deciding or issuing twice.
type Controller struct {
	Client kubernetes.Interface
	Policy *Policy
	Signer *Signer
	Log    *slog.Logger
	// OnIssued, when set, is called after a certificate was stored on a CSR.
	OnIssued func(csrName string)
	// Metrics, when set, records decisions and latencies.
	Metrics *Metrics
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
		return out.Status.Allowed, nil
	}
}

func (c *Controller) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// Start runs the controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(c.Client, 10*time.Minute)
	informer := factory.Certificates().V1().CertificateSigningRequests()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && (csr.Spec.SignerName == SignerKubeletServing || csr.Spec.SignerName == SignerKubeletClient) {
			queue.Add(csr.Name)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return ctx.Err()
	}
	lister := informer.Lister()
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		name, shutdown := queue.Get()
		if shutdown {
			return nil
		}
		csr, err := lister.Get(name)
		if err == nil {
			err = c.Reconcile(ctx, csr.DeepCopy())
		} else if apierrors.IsNotFound(err) {
			err = nil
		}
		if err != nil && ctx.Err() == nil {
			c.logger().Warn("CSR not settled, retrying", "csr", name, "err", err)
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
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

// Reconcile decides an undecided CSR, then issues it if it is approved and unsigned.
func (c *Controller) Reconcile(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if !decided(csr) && len(csr.Status.Certificate) == 0 {
		d, err := c.Policy.Decide(ctx, csr)
		if err != nil || d == nil {
			return err
		}
		cond := certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: d.Reason, Message: d.Message,
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
		c.Metrics.decided(csr, d, time.Now())
		c.logger().Info("CSR decided", "csr", csr.Name, "signer", csr.Spec.SignerName, "requester", csr.Spec.Username, "approved", d.Approve, "reason", d.Reason, "message", d.Message)
		c.event(ctx, updated, d.Approve, d.Reason, d.Message)
		csr = updated
	}
	if !Signable(csr) {
		return nil
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
		return errors.Join(err, uerr)
	}
	csr.Status.Certificate = cert
	issued, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("issuing %s: %w", csr.Name, err)
	}
	c.logger().Info("CSR issued", "csr", csr.Name, "signer", csr.Spec.SignerName, "requester", csr.Spec.Username)
	c.Metrics.issued(csr, time.Now())
	if c.OnIssued != nil {
		c.OnIssued(csr.Name)
	}
	c.event(ctx, issued, true, "Issued", "certificate issued by nodejoin-controller")
	return nil
}

// event records a Kubernetes Event on the CSR; failures to record are only logged.
func (c *Controller) event(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, normal bool, reason, msg string) {
	ref := corev1.ObjectReference{
		Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1", Name: csr.Name, UID: csr.UID, ResourceVersion: csr.ResourceVersion,
	}
	if err := events.Record(ctx, c.Client, ref, normal, reason, msg); err != nil {
		c.logger().Warn("recording event failed", "csr", csr.Name, "err", err)
	}
}
