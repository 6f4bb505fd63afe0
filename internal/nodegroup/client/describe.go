package client

import (
	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/nodegroup/eksbackend"
)

// Description is a group in the shape of `aws eks describe-nodegroup`'s output.
type Description struct {
	Nodegroup Nodegroup `json:"nodegroup"`
}

// Nodegroup is EKS's Nodegroup, as the local EKS serves it.
type Nodegroup = eksapi.Nodegroup

// Account says where the group lives, for its ARN and role.
type Account = eksbackend.Account

// Describe renders ng as `aws eks describe-nodegroup` would, through the local EKS's
// own mapping, so that the CLI and the EKS API print the same group.
func Describe(ng *v1alpha1.NodeGroup, a Account) Description {
	return Description{Nodegroup: eksbackend.Nodegroup(ng, a)}
}

// DesiredSize is the group's desired size: the spec's, or its minimum.
func DesiredSize(ng *v1alpha1.NodeGroup) int32 {
	if d := ng.Spec.Scaling.DesiredSize; d != nil {
		return *d
	}
	return ng.Spec.Scaling.MinSize
}

// InstanceTypes are the group's instance types, with the default.
func InstanceTypes(ng *v1alpha1.NodeGroup) []string {
	if len(ng.Spec.Template.InstanceTypes) == 0 {
		return []string{"m5.large"}
	}
	return append([]string{}, ng.Spec.Template.InstanceTypes...)
}

// AMIType is the EKS amiType of the group, as the local EKS reports it: its family's,
// or CUSTOM for an image that is no release the EKS API recorded.
func AMIType(ng *v1alpha1.NodeGroup) string {
	t, _ := eksbackend.Release(ng, nil)
	return t
}
