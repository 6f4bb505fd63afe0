package resource

// This file holds the IAM resource types (AWS::IAM::Role, AWS::IAM::InstanceProfile,
// AWS::IAM::Policy, AWS::IAM::ManagedPolicy) and what the IAM and EC2 types share:
// reading properties, naming resources as CloudFormation does, and reporting a
// service's refusal as CloudFormation's resource handlers do.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
)

// iamTypes are the IAM resource types.
func iamTypes(cl Clients) map[string]Provisioner {
	return map[string]Provisioner{
		"AWS::IAM::Role":            iamRole{cl.IAM},
		"AWS::IAM::InstanceProfile": iamInstanceProfile{cl.IAM},
		"AWS::IAM::Policy":          iamPolicy{cl.IAM},
		"AWS::IAM::ManagedPolicy":   iamManagedPolicy{cl.IAM},
	}
}

// ---- what the IAM and EC2 types share

// svcProps are a resource's resolved properties.
type svcProps map[string]any

func (p svcProps) str(k string) string { s, _ := p[k].(string); return s }

func (p svcProps) has(k string) bool { _, ok := p[k]; return ok }

func (p svcProps) list(k string) []any { l, _ := p[k].([]any); return l }

func (p svcProps) strs(k string) []string {
	var out []string
	for _, v := range p.list(k) {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// int32 reads an integer property (properties arrive as strings).
func (p svcProps) int32(k string) (*int32, error) {
	s := p.str(k)
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return nil, svcInvalid("Properties validation failed: #/%s: expected type: Integer, found: %q", k, s)
	}
	v := int32(n)
	return &v, nil
}

// svcPropertyError is a template's fault in a resource's properties, in
// CloudFormation's wording (which begins with a capital: it is shown as it is, as the
// resource's status reason).
type svcPropertyError string

func (e svcPropertyError) Error() string { return string(e) }

func svcInvalid(format string, args ...any) error {
	return svcPropertyError(fmt.Sprintf(format, args...))
}

// check refuses properties a type does not know and required ones that are absent, with
// CloudFormation's wording.
func (p svcProps) check(c *Call, required []string, known ...string) error {
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if !slices.Contains(known, k) && !slices.Contains(required, k) {
			return svcInvalid("Encountered unsupported property %s", k)
		}
	}
	for _, k := range required {
		if _, ok := p[k]; !ok {
			return svcInvalid("Properties validation failed for resource %s with message: #: required key [%s] not found", c.LogicalID, k)
		}
	}
	return nil
}

// doc reads a policy document property: a JSON object (CloudFormation's usual form) or
// a string holding one.
func (p svcProps) doc(k string) (string, error) {
	switch v := p[k].(type) {
	case string:
		return v, nil
	case map[string]any:
		b, err := json.Marshal(v)
		return string(b), err
	}
	return "", svcInvalid("Properties validation failed: #/%s: expected type: JSONObject", k)
}

// svcTags reads a Tags property: a list of {Key, Value}.
func (p svcProps) tags() map[string]string {
	out := map[string]string{}
	for _, t := range p.list("Tags") {
		if m, ok := t.(map[string]any); ok {
			k, _ := m["Key"].(string)
			v, _ := m["Value"].(string)
			out[k] = v
		}
	}
	return out
}

// svcName is the name CloudFormation gives a resource whose template names none:
// <stack>-<logical ID>-<12 random upper-case letters and digits>, the first two cut so
// that the whole fits max characters.
func svcName(c *Call, limit int) string {
	suffix := physicalSuffix(12)
	prefix := c.StackName + "-" + c.LogicalID
	if room := limit - len(suffix) - 1; len(prefix) > room {
		prefix = prefix[:room]
	}
	return prefix + "-" + suffix
}

// svcError is a service's refusal as CloudFormation's resource handlers report it: the
// service's own message, its service and status code. The stack engine shows it in the
// resource's event.
type svcError struct {
	service string
	status  int
	api     smithy.APIError
	err     error
}

func (e *svcError) Error() string {
	if e.status == 0 {
		return fmt.Sprintf("%s (Service: %s, Error Code: %s)", e.api.ErrorMessage(), e.service, e.api.ErrorCode())
	}
	return fmt.Sprintf("%s (Service: %s, Status Code: %d, Error Code: %s)", e.api.ErrorMessage(), e.service, e.status, e.api.ErrorCode())
}

func (e *svcError) Unwrap() error { return e.err }

// svcFail turns a service's refusal into a svcError; other errors (a cancelled
// context, a transport failure) pass unchanged.
func svcFail(service string, err error) error {
	var api smithy.APIError
	if err == nil || !errors.As(err, &api) {
		return err
	}
	out := &svcError{service: service, api: api, err: err}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		out.status = resp.HTTPStatusCode()
	}
	return out
}

// svcCode is the AWS error code of err, "" for none.
func svcCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// svcGone tells whether err says the resource is already gone: Delete's success.
func svcGone(err error, codes ...string) bool {
	return err == nil || slices.Contains(codes, svcCode(err))
}

// iamTags are the tags of an IAM resource: the stack's (CloudFormation's own
// aws:cloudformation:* tags are not applied to IAM entities, whose aws: prefix is
// reserved) and the resource's own.
func iamTags(c *Call, p svcProps) []iamtypes.Tag {
	all := map[string]string{}
	for k, v := range c.Tags {
		if !strings.HasPrefix(k, "aws:") {
			all[k] = v
		}
	}
	maps.Copy(all, p.tags())
	var out []iamtypes.Tag
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(all[k])})
	}
	return out
}

// ---- AWS::IAM::Role

type iamRole struct{ c *iam.Client }

var roleProps = []string{"RoleName", "Path", "Description", "MaxSessionDuration", "ManagedPolicyArns", "Policies", "Tags", "PermissionsBoundary"}

// inlinePolicies reads a Policies property: {PolicyName, PolicyDocument} each.
func inlinePolicies(p svcProps) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range p.list("Policies") {
		m, _ := v.(map[string]any)
		item := svcProps(m)
		name := item.str("PolicyName")
		doc, err := item.doc("PolicyDocument")
		if name == "" || err != nil {
			return nil, svcInvalid("Properties validation failed: #/Policies/%d: required keys PolicyName and PolicyDocument (a JSON object)", k)
		}
		out[name] = doc
	}
	return out, nil
}

func (t iamRole) Create(ctx context.Context, c *Call) (Result, error) {
	p := svcProps(c.Properties)
	if err := p.check(c, []string{"AssumeRolePolicyDocument"}, roleProps...); err != nil {
		return Result{}, err
	}
	trust, err := p.doc("AssumeRolePolicyDocument")
	if err != nil {
		return Result{}, err
	}
	inline, err := inlinePolicies(p)
	if err != nil {
		return Result{}, err
	}
	session, err := p.int32("MaxSessionDuration")
	if err != nil {
		return Result{}, err
	}
	name := p.str("RoleName")
	if name == "" {
		name = svcName(c, 64)
	}
	in := &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trust), MaxSessionDuration: session,
		Tags: iamTags(c, p)}
	if p.has("Path") {
		in.Path = aws.String(p.str("Path"))
	}
	if p.has("Description") {
		in.Description = aws.String(p.str("Description"))
	}
	if p.has("PermissionsBoundary") {
		in.PermissionsBoundary = aws.String(p.str("PermissionsBoundary"))
	}
	if _, err := t.c.CreateRole(ctx, in); err != nil {
		return Result{}, svcFail("Iam", err)
	}
	if err := t.applyPolicies(ctx, name, nil, inline, nil, p.strs("ManagedPolicyArns")); err != nil {
		_ = t.Delete(ctx, c, Result{PhysicalID: name})
		return Result{}, err
	}
	return t.result(ctx, name)
}

func (t iamRole) result(ctx context.Context, name string) (Result, error) {
	out, err := t.c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		return Result{}, svcFail("Iam", err)
	}
	return Result{PhysicalID: name, Attributes: map[string]string{"Arn": aws.ToString(out.Role.Arn), "RoleId": aws.ToString(out.Role.RoleId)}}, nil
}

// applyPolicies brings a role's inline policies from oldInline to inline and its
// managed policies from oldManaged to managed.
func (t iamRole) applyPolicies(ctx context.Context, name string, oldInline, inline map[string]string, oldManaged, managed []string) error {
	for _, k := range slices.Sorted(maps.Keys(inline)) {
		if old, ok := oldInline[k]; ok && old == inline[k] {
			continue
		}
		if _, err := t.c.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(k), PolicyDocument: aws.String(inline[k])}); err != nil {
			return svcFail("Iam", err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(oldInline)) {
		if _, ok := inline[k]; !ok {
			if _, err := t.c.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(k)}); !svcGone(err, "NoSuchEntity") {
				return svcFail("Iam", err)
			}
		}
	}
	for _, arn := range managed {
		if !slices.Contains(oldManaged, arn) {
			if _, err := t.c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(name), PolicyArn: aws.String(arn)}); err != nil {
				return svcFail("Iam", err)
			}
		}
	}
	for _, arn := range oldManaged {
		if !slices.Contains(managed, arn) {
			if _, err := t.c.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(name), PolicyArn: aws.String(arn)}); !svcGone(err, "NoSuchEntity") {
				return svcFail("Iam", err)
			}
		}
	}
	return nil
}

func (t iamRole) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	p, was := svcProps(c.Properties), svcProps(oldProps)
	if err := p.check(c, []string{"AssumeRolePolicyDocument"}, roleProps...); err != nil {
		return Result{}, err
	}
	// The local IAM has no PutRolePermissionsBoundary: a new boundary makes a new role.
	if p.str("RoleName") != was.str("RoleName") || p.str("Path") != was.str("Path") || p.str("PermissionsBoundary") != was.str("PermissionsBoundary") {
		return Result{}, ErrReplace
	}
	name := old.PhysicalID
	trust, err := p.doc("AssumeRolePolicyDocument")
	if err != nil {
		return Result{}, err
	}
	if oldTrust, _ := was.doc("AssumeRolePolicyDocument"); trust != oldTrust {
		if _, err := t.c.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(name), PolicyDocument: aws.String(trust)}); err != nil {
			return Result{}, svcFail("Iam", err)
		}
	}
	if p.str("Description") != was.str("Description") || p.str("MaxSessionDuration") != was.str("MaxSessionDuration") {
		session, err := p.int32("MaxSessionDuration")
		if err != nil {
			return Result{}, err
		}
		if session == nil {
			session = aws.Int32(3600)
		}
		if _, err := t.c.UpdateRole(ctx, &iam.UpdateRoleInput{RoleName: aws.String(name), Description: aws.String(p.str("Description")), MaxSessionDuration: session}); err != nil {
			return Result{}, svcFail("Iam", err)
		}
	}
	inline, err := inlinePolicies(p)
	if err != nil {
		return Result{}, err
	}
	oldInline, _ := inlinePolicies(was)
	if err := t.applyPolicies(ctx, name, oldInline, inline, was.strs("ManagedPolicyArns"), p.strs("ManagedPolicyArns")); err != nil {
		return Result{}, err
	}
	if err := t.retag(ctx, name, iamTags(c, was), iamTags(c, p)); err != nil {
		return Result{}, err
	}
	return t.result(ctx, name)
}

// retag brings a role's tags from old to now.
func (t iamRole) retag(ctx context.Context, name string, old, now []iamtypes.Tag) error {
	var gone []string
	for _, o := range old {
		if !slices.ContainsFunc(now, func(n iamtypes.Tag) bool { return aws.ToString(n.Key) == aws.ToString(o.Key) }) {
			gone = append(gone, aws.ToString(o.Key))
		}
	}
	if len(gone) > 0 {
		if _, err := t.c.UntagRole(ctx, &iam.UntagRoleInput{RoleName: aws.String(name), TagKeys: gone}); err != nil {
			return svcFail("Iam", err)
		}
	}
	if len(now) > 0 {
		if _, err := t.c.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(name), Tags: now}); err != nil {
			return svcFail("Iam", err)
		}
	}
	return nil
}

// Delete removes what holds the role (its instance profiles, managed and inline
// policies), as CloudFormation's handler does, then the role.
func (t iamRole) Delete(ctx context.Context, _ *Call, r Result) error {
	name := aws.String(r.PhysicalID)
	profiles, err := t.c.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: name})
	if svcCode(err) == "NoSuchEntity" {
		return nil
	}
	if err != nil {
		return svcFail("Iam", err)
	}
	for _, ip := range profiles.InstanceProfiles {
		if _, err := t.c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: ip.InstanceProfileName, RoleName: name}); !svcGone(err, "NoSuchEntity") {
			return svcFail("Iam", err)
		}
	}
	attached, err := t.c.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: name})
	if err != nil {
		return svcFail("Iam", err)
	}
	for _, ap := range attached.AttachedPolicies {
		if _, err := t.c.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: name, PolicyArn: ap.PolicyArn}); !svcGone(err, "NoSuchEntity") {
			return svcFail("Iam", err)
		}
	}
	inline, err := t.c.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: name})
	if err != nil {
		return svcFail("Iam", err)
	}
	for _, pn := range inline.PolicyNames {
		if _, err := t.c.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: name, PolicyName: aws.String(pn)}); !svcGone(err, "NoSuchEntity") {
			return svcFail("Iam", err)
		}
	}
	if _, err := t.c.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: name}); !svcGone(err, "NoSuchEntity") {
		return svcFail("Iam", err)
	}
	return nil
}

// ---- AWS::IAM::InstanceProfile

type iamInstanceProfile struct{ c *iam.Client }

func (t iamInstanceProfile) Create(ctx context.Context, c *Call) (Result, error) {
	p := svcProps(c.Properties)
	if err := p.check(c, []string{"Roles"}, "InstanceProfileName", "Path"); err != nil {
		return Result{}, err
	}
	roles := p.strs("Roles")
	if len(roles) > 1 {
		return Result{}, svcInvalid("Properties validation failed: #/Roles: expected maximum item count: 1, found: %d", len(roles))
	}
	name := p.str("InstanceProfileName")
	if name == "" {
		name = svcName(c, 128)
	}
	in := &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name)}
	if p.has("Path") {
		in.Path = aws.String(p.str("Path"))
	}
	out, err := t.c.CreateInstanceProfile(ctx, in)
	if err != nil {
		return Result{}, svcFail("Iam", err)
	}
	for _, role := range roles {
		if _, err := t.c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)}); err != nil {
			_ = t.Delete(ctx, c, Result{PhysicalID: name})
			return Result{}, svcFail("Iam", err)
		}
	}
	return Result{PhysicalID: name, Attributes: map[string]string{"Arn": aws.ToString(out.InstanceProfile.Arn)}}, nil
}

func (t iamInstanceProfile) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	p, was := svcProps(c.Properties), svcProps(oldProps)
	if err := p.check(c, []string{"Roles"}, "InstanceProfileName", "Path"); err != nil {
		return Result{}, err
	}
	if p.str("InstanceProfileName") != was.str("InstanceProfileName") || p.str("Path") != was.str("Path") {
		return Result{}, ErrReplace
	}
	roles, oldRoles := p.strs("Roles"), was.strs("Roles")
	if len(roles) > 1 {
		return Result{}, svcInvalid("Properties validation failed: #/Roles: expected maximum item count: 1, found: %d", len(roles))
	}
	if !slices.Equal(roles, oldRoles) {
		name := aws.String(old.PhysicalID)
		for _, role := range oldRoles {
			if _, err := t.c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String(role)}); !svcGone(err, "NoSuchEntity") {
				return Result{}, svcFail("Iam", err)
			}
		}
		for _, role := range roles {
			if _, err := t.c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: name, RoleName: aws.String(role)}); err != nil {
				return Result{}, svcFail("Iam", err)
			}
		}
	}
	return old, nil
}

func (t iamInstanceProfile) Delete(ctx context.Context, _ *Call, r Result) error {
	name := aws.String(r.PhysicalID)
	out, err := t.c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: name})
	if svcCode(err) == "NoSuchEntity" {
		return nil
	}
	if err != nil {
		return svcFail("Iam", err)
	}
	for _, role := range out.InstanceProfile.Roles {
		if _, err := t.c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: name, RoleName: role.RoleName}); !svcGone(err, "NoSuchEntity") {
			return svcFail("Iam", err)
		}
	}
	if _, err := t.c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: name}); !svcGone(err, "NoSuchEntity") {
		return svcFail("Iam", err)
	}
	return nil
}

// ---- AWS::IAM::Policy: an inline policy put onto roles

type iamPolicy struct{ c *iam.Client }

// policyTargets refuses the groups and users an IAM policy may name: the local
// account has roles only.
func policyTargets(p svcProps) error {
	for _, k := range []string{"Groups", "Users"} {
		if len(p.list(k)) > 0 {
			return svcInvalid("Properties validation failed: #/%s: the local account has no IAM %s; name Roles", k, strings.ToLower(k))
		}
	}
	return nil
}

func (t iamPolicy) Create(ctx context.Context, c *Call) (Result, error) {
	p := svcProps(c.Properties)
	if err := p.check(c, []string{"PolicyName", "PolicyDocument"}, "Roles", "Groups", "Users"); err != nil {
		return Result{}, err
	}
	if err := policyTargets(p); err != nil {
		return Result{}, err
	}
	doc, err := p.doc("PolicyDocument")
	if err != nil {
		return Result{}, err
	}
	for _, role := range p.strs("Roles") {
		if _, err := t.c.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(p.str("PolicyName")), PolicyDocument: aws.String(doc)}); err != nil {
			_ = t.Delete(ctx, c, Result{})
			return Result{}, svcFail("Iam", err)
		}
	}
	return Result{PhysicalID: svcName(c, 128)}, nil
}

func (t iamPolicy) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	p, was := svcProps(c.Properties), svcProps(oldProps)
	if err := p.check(c, []string{"PolicyName", "PolicyDocument"}, "Roles", "Groups", "Users"); err != nil {
		return Result{}, err
	}
	if err := policyTargets(p); err != nil {
		return Result{}, err
	}
	doc, err := p.doc("PolicyDocument")
	if err != nil {
		return Result{}, err
	}
	oldDoc, _ := was.doc("PolicyDocument")
	name, oldName := p.str("PolicyName"), was.str("PolicyName")
	for _, role := range was.strs("Roles") {
		if name != oldName || !slices.Contains(p.strs("Roles"), role) {
			if _, err := t.c.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(oldName)}); !svcGone(err, "NoSuchEntity") {
				return Result{}, svcFail("Iam", err)
			}
		}
	}
	for _, role := range p.strs("Roles") {
		if name == oldName && doc == oldDoc && slices.Contains(was.strs("Roles"), role) {
			continue
		}
		if _, err := t.c.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(name), PolicyDocument: aws.String(doc)}); err != nil {
			return Result{}, svcFail("Iam", err)
		}
	}
	return old, nil
}

// Delete takes the policy off its roles (c.Properties, the resource's last ones).
func (t iamPolicy) Delete(ctx context.Context, c *Call, _ Result) error {
	p := svcProps(c.Properties)
	for _, role := range p.strs("Roles") {
		if _, err := t.c.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(p.str("PolicyName"))}); !svcGone(err, "NoSuchEntity") {
			return svcFail("Iam", err)
		}
	}
	return nil
}

// ---- AWS::IAM::ManagedPolicy

type iamManagedPolicy struct{ c *iam.Client }

var managedPolicyProps = []string{"ManagedPolicyName", "Path", "Description", "Roles", "Groups", "Users"}

func (t iamManagedPolicy) Create(ctx context.Context, c *Call) (Result, error) {
	p := svcProps(c.Properties)
	if err := p.check(c, []string{"PolicyDocument"}, managedPolicyProps...); err != nil {
		return Result{}, err
	}
	if err := policyTargets(p); err != nil {
		return Result{}, err
	}
	doc, err := p.doc("PolicyDocument")
	if err != nil {
		return Result{}, err
	}
	name := p.str("ManagedPolicyName")
	if name == "" {
		name = svcName(c, 128)
	}
	in := &iam.CreatePolicyInput{PolicyName: aws.String(name), PolicyDocument: aws.String(doc)}
	if p.has("Path") {
		in.Path = aws.String(p.str("Path"))
	}
	if p.has("Description") {
		in.Description = aws.String(p.str("Description"))
	}
	out, err := t.c.CreatePolicy(ctx, in)
	if err != nil {
		return Result{}, svcFail("Iam", err)
	}
	arn := aws.ToString(out.Policy.Arn)
	r := Result{PhysicalID: arn}
	if err := t.attach(ctx, arn, nil, p.strs("Roles")); err != nil {
		_ = t.Delete(ctx, c, r)
		return Result{}, err
	}
	return r, nil
}

// attach brings the roles a policy is attached to from old to now.
func (t iamManagedPolicy) attach(ctx context.Context, arn string, old, now []string) error {
	for _, role := range old {
		if !slices.Contains(now, role) {
			if _, err := t.c.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(role), PolicyArn: aws.String(arn)}); !svcGone(err, "NoSuchEntity") {
				return svcFail("Iam", err)
			}
		}
	}
	for _, role := range now {
		if !slices.Contains(old, role) {
			if _, err := t.c.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(role), PolicyArn: aws.String(arn)}); err != nil {
				return svcFail("Iam", err)
			}
		}
	}
	return nil
}

// Update attaches and detaches roles in place; any other change makes a new policy
// (the local IAM keeps one version of a policy).
func (t iamManagedPolicy) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	p, was := svcProps(c.Properties), svcProps(oldProps)
	if err := p.check(c, []string{"PolicyDocument"}, managedPolicyProps...); err != nil {
		return Result{}, err
	}
	if err := policyTargets(p); err != nil {
		return Result{}, err
	}
	doc, _ := p.doc("PolicyDocument")
	oldDoc, _ := was.doc("PolicyDocument")
	for _, k := range []string{"ManagedPolicyName", "Path", "Description"} {
		if p.str(k) != was.str(k) {
			return Result{}, ErrReplace
		}
	}
	if doc != oldDoc {
		return Result{}, ErrReplace
	}
	return old, t.attach(ctx, old.PhysicalID, was.strs("Roles"), p.strs("Roles"))
}

// Delete detaches the policy from the roles it names (c.Properties) and deletes it.
func (t iamManagedPolicy) Delete(ctx context.Context, c *Call, r Result) error {
	if err := t.attach(ctx, r.PhysicalID, svcProps(c.Properties).strs("Roles"), nil); err != nil {
		return err
	}
	if _, err := t.c.DeletePolicy(ctx, &iam.DeletePolicyInput{PolicyArn: aws.String(r.PhysicalID)}); !svcGone(err, "NoSuchEntity") {
		return svcFail("Iam", err)
	}
	return nil
}
