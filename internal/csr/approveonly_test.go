package csr

import (
	"context"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Without a Signer the controller approves and leaves the certificate to another
// signer: the CSR ends Approved with no certificate, and no CA key is needed.
func TestApproveOnlyLeavesSigningToAnotherSigner(t *testing.T) {
	user := "system:node:" + nodeA
	c := servingCSR(t, user, []string{"system:nodes"}, reqSpec{cn: user, orgs: []string{"system:nodes"}, dns: []string{nodeA}, ips: []string{"198.18.0.11"}})
	clientset := fake.NewClientset(c)
	ctrl := &Controller{
		Client: clientset,
		Policy: &Policy{Inventory: instances, Review: func(context.Context, *certificatesv1.CertificateSigningRequest, string) (bool, error) {
			return true, nil
		}},
	}
	if err := ctrl.Settle(t.Context(), c.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	got, err := clientset.CertificatesV1().CertificateSigningRequests().Get(t.Context(), c.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !Signable(got) {
		t.Errorf("conditions %+v, certificate %d bytes: want Approved and unsigned", got.Status.Conditions, len(got.Status.Certificate))
	}
	// Settling the approved CSR again writes nothing: kube-controller-manager signs it.
	n := len(clientset.Actions())
	if err := ctrl.Settle(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	if extra := clientset.Actions()[n:]; len(extra) != 0 {
		t.Errorf("settling an approved CSR again sent %v", extra)
	}
}

// When approving is issuing (no Signer of its own), the instance of a bootstrap client
// CSR is claimed before the approval: a second CSR for the same instance is denied,
// where it would otherwise be approved and signed by kube-controller-manager too.
func TestApproveOnlyClaimsTheInstanceBeforeApproving(t *testing.T) {
	ctrl := &Controller{Client: fake.NewClientset(), Policy: &Policy{Issued: &ConfigMapRecord{Client: fake.NewClientset()}}}
	approve := &Decision{Approve: true, Reason: ReasonApproved, Message: "ok", ClaimInstance: "i-0123456789abcdef0"}
	first := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-first"}}
	second := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-second"}}
	for _, tt := range []struct {
		csr        *certificatesv1.CertificateSigningRequest
		approve    bool
		wantReason string
	}{
		{first, true, ReasonApproved},
		{first, true, ReasonApproved}, // the same CSR again: still its own claim
		{second, false, ReasonAlreadyJoined},
	} {
		d, err := ctrl.claimBeforeApproval(t.Context(), tt.csr, approve)
		if err != nil {
			t.Fatal(err)
		}
		if d.Approve != tt.approve || d.Reason != tt.wantReason {
			t.Errorf("%s: %+v, want approve=%v reason %s", tt.csr.Name, d, tt.approve, tt.wantReason)
		}
	}
	// With a Signer the claim waits for signing.
	ctrl.Signer = &Signer{}
	if d, _ := ctrl.claimBeforeApproval(t.Context(), second, approve); d != approve {
		t.Errorf("with a Signer the decision changed: %+v", d)
	}
}
