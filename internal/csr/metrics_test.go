package csr

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodejoin/nodejoin/internal/pki"
)

// Settle records a decision and an issuance in the metrics.
func TestReconcileRecordsMetrics(t *testing.T) {
	user := "system:node:" + nodeA
	c := servingCSR(t, user, []string{"system:nodes"}, reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}, ips: []string{"198.18.0.11"}})
	c.CreationTimestamp = metav1.NewTime(time.Now().Add(-2 * time.Second))
	client := fake.NewClientset(c)
	ca, err := pki.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ctrl := &Controller{
		Client: client,
		Policy: &Policy{Inventory: instances, Review: func(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
			return true, nil
		}},
		Signer:  &Signer{CA: ca},
		Metrics: NewMetrics(reg),
	}
	if err := ctrl.Settle(t.Context(), c.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(ctrl.Metrics.Decisions.WithLabelValues(SignerKubeletServing, "approved", ReasonApproved)); got != 1 {
		t.Errorf("approved decisions = %v", got)
	}
	if n := testutil.CollectAndCount(ctrl.Metrics.CreateToDecision); n != 1 {
		t.Errorf("create-to-decision series = %d", n)
	}
	if n := testutil.CollectAndCount(ctrl.Metrics.ApproveToIssue); n != 1 {
		t.Errorf("approve-to-issue series = %d", n)
	}
	got, err := client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), c.Name, metav1.GetOptions{})
	if err != nil || len(got.Status.Certificate) == 0 {
		t.Errorf("certificate not stored: %v", err)
	}
}
