package eksapi

import "context"

type vpcCallerKey struct{}

// WithVPCCaller marks a request as made from inside the cluster's VPC (the cluster
// namespace, where instances run). EKS resolves a cluster's endpoint to its private
// address there and to its public one elsewhere; the local EKS does the same, since
// the host cannot reach the API server's in-namespace address.
func WithVPCCaller(ctx context.Context) context.Context {
	return context.WithValue(ctx, vpcCallerKey{}, true)
}

// VPCCaller tells whether a request was made from inside the cluster's VPC.
func VPCCaller(ctx context.Context) bool {
	v, _ := ctx.Value(vpcCallerKey{}).(bool)
	return v
}
