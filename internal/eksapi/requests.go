package eksapi

import (
	"encoding/json"
	"errors"
	"fmt"
)

// CreateNodegroupRequest is CreateNodegroup's body (the cluster is in the path).
type CreateNodegroupRequest struct {
	NodegroupName      string            `json:"nodegroupName"`
	ScalingConfig      *ScalingConfig    `json:"scalingConfig,omitempty"`
	DiskSize           *int32            `json:"diskSize,omitempty"`
	Subnets            []string          `json:"subnets"`
	InstanceTypes      []string          `json:"instanceTypes,omitempty"`
	AmiType            string            `json:"amiType,omitempty"`
	RemoteAccess       Unsupported       `json:"remoteAccess,omitempty"`
	NodeRole           string            `json:"nodeRole"`
	Labels             map[string]string `json:"labels,omitempty"`
	Taints             []Taint           `json:"taints,omitempty"`
	Tags               map[string]string `json:"tags,omitempty"`
	ClientRequestToken string            `json:"clientRequestToken,omitempty"`
	LaunchTemplate     *LaunchTemplate   `json:"launchTemplate,omitempty"`
	UpdateConfig       *UpdateConfig     `json:"updateConfig,omitempty"`
	NodeRepairConfig   Unsupported       `json:"nodeRepairConfig,omitempty"`
	WarmPoolConfig     Unsupported       `json:"warmPoolConfig,omitempty"`
	CapacityType       string            `json:"capacityType,omitempty"`
	Version            string            `json:"version,omitempty"`
	ReleaseVersion     string            `json:"releaseVersion,omitempty"`
}

// Unsupported is a structure the local EKS refuses whatever it holds; it is decoded only
// to see that it was given, so that the refusal names it.
type Unsupported = json.RawMessage

// UpdateNodegroupConfigRequest is UpdateNodegroupConfig's body.
type UpdateNodegroupConfigRequest struct {
	Labels             *UpdateLabels  `json:"labels,omitempty"`
	Taints             *UpdateTaints  `json:"taints,omitempty"`
	ScalingConfig      *ScalingConfig `json:"scalingConfig,omitempty"`
	UpdateConfig       *UpdateConfig  `json:"updateConfig,omitempty"`
	NodeRepairConfig   Unsupported    `json:"nodeRepairConfig,omitempty"`
	WarmPoolConfig     Unsupported    `json:"warmPoolConfig,omitempty"`
	ClientRequestToken string         `json:"clientRequestToken,omitempty"`
}

// UpdateLabels adds or updates some labels and removes others.
type UpdateLabels struct {
	AddOrUpdateLabels map[string]string `json:"addOrUpdateLabels,omitempty"`
	RemoveLabels      []string          `json:"removeLabels,omitempty"`
}

// UpdateTaints adds or updates some taints and removes others.
type UpdateTaints struct {
	AddOrUpdateTaints []Taint `json:"addOrUpdateTaints,omitempty"`
	RemoveTaints      []Taint `json:"removeTaints,omitempty"`
}

// UpdateNodegroupVersionRequest is UpdateNodegroupVersion's body.
type UpdateNodegroupVersionRequest struct {
	Version            string          `json:"version,omitempty"`
	ReleaseVersion     string          `json:"releaseVersion,omitempty"`
	LaunchTemplate     *LaunchTemplate `json:"launchTemplate,omitempty"`
	Force              bool            `json:"force,omitempty"`
	ClientRequestToken string          `json:"clientRequestToken,omitempty"`
}

// CreateAccessEntryRequest is CreateAccessEntry's body.
type CreateAccessEntryRequest struct {
	PrincipalArn       string            `json:"principalArn"`
	KubernetesGroups   []string          `json:"kubernetesGroups,omitempty"`
	Tags               map[string]string `json:"tags,omitempty"`
	ClientRequestToken string            `json:"clientRequestToken,omitempty"`
	Username           string            `json:"username,omitempty"`
	Type               string            `json:"type,omitempty"`
}

// UpdateAccessEntryRequest is UpdateAccessEntry's body.
type UpdateAccessEntryRequest struct {
	KubernetesGroups   []string `json:"kubernetesGroups,omitempty"`
	ClientRequestToken string   `json:"clientRequestToken,omitempty"`
	Username           string   `json:"username,omitempty"`
}

// AssociateAccessPolicyRequest is AssociateAccessPolicy's body.
type AssociateAccessPolicyRequest struct {
	PolicyArn   string       `json:"policyArn"`
	AccessScope *AccessScope `json:"accessScope"`
}

// The error codes of EKS the local EKS answers with.
const (
	CodeResourceNotFound = "ResourceNotFoundException"
	CodeResourceInUse    = "ResourceInUseException"
	CodeInvalidParameter = "InvalidParameterException"
	CodeInvalidRequest   = "InvalidRequestException"
	CodeServer           = "ServerException"
)

// Error is an answer in EKS's error codes. A Backend returns one for anything the
// caller did wrong; any other error is the server's own fault (ServerException).
type Error struct {
	Code, Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFound reports a cluster, node group, update or access entry that is not there.
func NotFound(format string, args ...any) *Error {
	return Errorf(CodeResourceNotFound, format, args...)
}

// InUse reports a resource that exists already or is busy.
func InUse(format string, args ...any) *Error { return Errorf(CodeResourceInUse, format, args...) }

// InvalidParameter reports a parameter the local EKS refuses, naming it.
func InvalidParameter(format string, args ...any) *Error {
	return Errorf(CodeInvalidParameter, format, args...)
}

// InvalidRequest reports a request that cannot apply to the resource as it is.
func InvalidRequest(format string, args ...any) *Error {
	return Errorf(CodeInvalidRequest, format, args...)
}

// AsError returns err's Error, if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// AMITypes are the AMI types the local EKS runs: the x86_64 images of the families nodejoin renders
// user data for. Arm, GPU, Neuron and CUSTOM types are refused by name.
var AMITypes = []string{
	"AL2023_x86_64_STANDARD", "AL2_x86_64", "BOTTLEROCKET_x86_64",
	"WINDOWS_CORE_2019_x86_64", "WINDOWS_FULL_2019_x86_64",
	"WINDOWS_CORE_2022_x86_64", "WINDOWS_FULL_2022_x86_64",
	"WINDOWS_CORE_2025_x86_64", "WINDOWS_FULL_2025_x86_64",
}

// TaintEffects are EKS's taint effect names.
var TaintEffects = []string{"NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE"}

// CheckSizes checks that a node group's sizes fit together, in EKS's words. Backends
// call it after merging a partial scalingConfig with the group's.
func CheckSizes(s ScalingConfig) error {
	get := func(p *int32) int32 {
		if p == nil {
			return -1
		}
		return *p
	}
	lo, hi, d := get(s.MinSize), get(s.MaxSize), get(s.DesiredSize)
	switch {
	case lo >= 0 && hi >= 0 && lo > hi:
		return InvalidParameter("scalingConfig: minimum capacity %d can't be greater than maximum capacity %d", lo, hi)
	case d >= 0 && lo >= 0 && d < lo:
		return InvalidParameter("scalingConfig: desired capacity %d can't be lower than minimum capacity %d", d, lo)
	case d >= 0 && hi >= 0 && d > hi:
		return InvalidParameter("scalingConfig: desired capacity %d can't be greater than maximum capacity %d", d, hi)
	}
	return nil
}
