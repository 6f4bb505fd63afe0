// Package resource is the CloudFormation engine's resource types: for each type a
// stack may hold (AWS::IAM::Role, AWS::EC2::LaunchTemplate, AWS::EKS::Nodegroup, …) a
// Provisioner that creates, updates and deletes it by calling the account's own
// services through aws-sdk-go-v2 clients (Clients), the same calls a user's AWS CLI
// makes, so that a stack's resources are exactly what the API would have made. It
// imports no package of the local AWS.
package resource

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// Clients are the service clients the provisioners call.
type Clients struct {
	EC2         *ec2.Client
	IAM         *iam.Client
	AutoScaling *autoscaling.Client
	EKS         *eks.Client
}

// Call is one operation on one resource of a stack.
type Call struct {
	StackName, StackID, LogicalID string
	Region, AccountID             string
	// Type is the resource type, such as AWS::IAM::Role.
	Type string
	// Properties are the resource's properties with every intrinsic resolved: maps
	// (map[string]any), lists ([]any) and scalars, which are all strings (numbers in
	// their shortest decimal form, booleans "true"/"false"), as CloudFormation passes
	// them to resource handlers.
	Properties map[string]any
	// CreationPolicy and UpdatePolicy are the resource's policies, resolved as
	// Properties are (nil when absent).
	CreationPolicy, UpdatePolicy map[string]any
	// Tags are the stack's tags and CloudFormation's own (aws:cloudformation:stack-name,
	// aws:cloudformation:stack-id, aws:cloudformation:logical-id), which a resource that
	// takes tags carries as AWS tags them.
	Tags map[string]string
	// Signals are the resource's cfn-signal signals; nil when the engine takes none.
	Signals Signals
	// Event records an event of the resource in the stack's events, as AWS writes them
	// during long operations (such as a rolling update's batches), with the resource's
	// status (e.g. UPDATE_IN_PROGRESS) and the reason. Never nil.
	Event func(status, reason string)
}

// Signals are the SUCCESS and FAILURE signals instances send for a resource
// (SignalResource).
type Signals interface {
	// Wait returns once count SUCCESS signals arrived after since from instances that
	// accept (nil: any) names as their UniqueId; an error naming the instance and its
	// reason as soon as one of those sends FAILURE; or an error saying how many of count
	// arrived when timeout passes or ctx ends.
	Wait(ctx context.Context, since time.Time, count int, accept func(uniqueID string) bool, timeout time.Duration) error
}

// Result is what a resource is once made: its physical ID (what Ref returns) and its
// attributes (what Fn::GetAtt returns).
type Result struct {
	PhysicalID string
	Attributes map[string]string
}

// ErrReplace is what Update returns when the change needs a new resource: the engine
// then creates one with Create and deletes the old one once the stack's update
// completes, as CloudFormation replaces resources.
var ErrReplace = errors.New("the change requires replacement")

// Provisioner makes, changes and removes resources of one type.
type Provisioner interface {
	Create(ctx context.Context, c *Call) (Result, error)
	// Update changes the resource made as old (with oldProps) to c.Properties.
	Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error)
	// Delete removes the resource; one already gone is no error.
	Delete(ctx context.Context, c *Call, r Result) error
}

// Provisioners are the supported resource types and their provisioners.
func Provisioners(cl Clients) map[string]Provisioner {
	out := map[string]Provisioner{}
	for _, group := range []map[string]Provisioner{iamTypes(cl), ec2Types(cl), computeTypes(cl), eksTypes(cl)} {
		maps.Copy(out, group)
	}
	return out
}

// Types lists the supported resource types, sorted.
func Types() []string {
	return slices.Sorted(maps.Keys(Provisioners(Clients{})))
}
