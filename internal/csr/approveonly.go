package csr

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// claimBeforeApproval records a bootstrap client certificate's instance before the
// approval is written when this controller does not sign (Signer nil): then another
// signer issues every approved CSR at once, so approving is issuing, and two CSRs for
// one instance must not both be approved. With a Signer the claim is made before
// signing instead (Settle), and d is returned as it is.
func (c *Controller) claimBeforeApproval(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d *Decision) (*Decision, error) {
	if c.Signer != nil || !d.Approve || d.ClaimInstance == "" {
		return d, nil
	}
	holder, err := c.Policy.Issued.Claim(ctx, d.ClaimInstance, csr.Name)
	if err != nil {
		return nil, fmt.Errorf("recording the client certificate of instance %s: %w", d.ClaimInstance, err)
	}
	if holder != csr.Name {
		return deny(ReasonAlreadyJoined, "instance %s already got a client certificate through a bootstrap token (CSR %s)", d.ClaimInstance, holder), nil
	}
	return d, nil
}
