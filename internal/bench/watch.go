package bench

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// csrSeen is what the watcher saw of one CSR, with the times (on this process's clock)
// at which it first saw each state.
type csrSeen struct {
	name, signer string
	created      time.Time
	approved     time.Time
	issued       time.Time
	denied       bool
	failed       bool
	// certs holds the hash of every distinct certificate the CSR carried: more than one
	// means it was issued twice.
	certs map[[32]byte]bool
}

// recorder watches CSRs and Nodes and records when each changed state: the figures
// come from what it saw, the same way for nodejoin-controller and for the baseline.
type recorder struct {
	mu    sync.Mutex
	csrs  map[types.UID]*csrSeen
	ready map[string]time.Time // node name → first seen Ready
}

func newRecorder() *recorder {
	return &recorder{csrs: map[types.UID]*csrSeen{}, ready: map[string]time.Time{}}
}

// start runs informers on CSRs and Nodes until ctx ends; it returns once both have
// listed.
func (r *recorder) start(ctx context.Context, client kubernetes.Interface) error {
	f := informers.NewSharedInformerFactory(client, 0)
	csrs := f.Certificates().V1().CertificateSigningRequests().Informer()
	nodes := f.Core().V1().Nodes().Informer()
	if _, err := csrs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.csr(o) },
		UpdateFunc: func(_, o any) { r.csr(o) },
	}); err != nil {
		return err
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.node(o) },
		UpdateFunc: func(_, o any) { r.node(o) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return &syncError{what: typ.String()}
		}
	}
	return nil
}

type syncError struct{ what string }

func (e *syncError) Error() string { return "watching " + e.what + ": the cache did not fill" }

func (r *recorder) csr(o any) {
	c, ok := o.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.csrs[c.UID]
	if s == nil {
		s = &csrSeen{name: c.Name, signer: c.Spec.SignerName, created: now, certs: map[[32]byte]bool{}}
		r.csrs[c.UID] = s
	}
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved:
			if s.approved.IsZero() {
				s.approved = now
			}
		case certificatesv1.CertificateDenied:
			s.denied = true
		case certificatesv1.CertificateFailed:
			s.failed = true
		}
	}
	if len(c.Status.Certificate) > 0 {
		if s.issued.IsZero() {
			s.issued = now
			if s.approved.IsZero() {
				// The approval and the certificate came in one event (a relist).
				s.approved = now
			}
		}
		s.certs[sha256.Sum256(c.Status.Certificate)] = true
	}
}

func (r *recorder) node(o any) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			r.mu.Lock()
			if _, seen := r.ready[n.Name]; !seen {
				r.ready[n.Name] = time.Now()
			}
			r.mu.Unlock()
			return
		}
	}
}

// snapshot copies what was recorded.
func (r *recorder) snapshot() ([]csrSeen, map[string]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]csrSeen, 0, len(r.csrs))
	for _, s := range r.csrs {
		c := *s
		c.certs = nil
		if len(s.certs) > 1 {
			c.certs = map[[32]byte]bool{}
			for k := range s.certs {
				c.certs[k] = true
			}
		}
		out = append(out, c)
	}
	ready := make(map[string]time.Time, len(r.ready))
	for k, v := range r.ready {
		ready[k] = v
	}
	return out, ready
}
