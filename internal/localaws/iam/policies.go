package iam

// This file holds the policy actions: managed policies attached to roles
// (AttachRolePolicy, DetachRolePolicy, ListAttachedRolePolicies), inline policies
// (PutRolePolicy, GetRolePolicy, DeleteRolePolicy, ListRolePolicies) and customer
// managed policies (CreatePolicy, GetPolicy, DeletePolicy). AWS managed policies
// (arn:aws:iam::aws:policy/…) are taken to exist, whatever their name: the local account
// does not evaluate permissions, so their documents are not needed.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// policy is a customer managed policy.
type policy struct {
	name, path, id, arn, doc, description string
	created                               time.Time
	tags                                  tagList
}

// Quotas of IAM's that templates meet.
const (
	maxManagedPerRole   = 10
	maxInlinePerRole    = 10240
	maxManagedPolicyLen = 6144
)

// policySize is a document's size as IAM's quotas count it: without white space.
func policySize(doc string) int {
	n := 0
	for _, r := range doc {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

// policyRef is what a policy ARN names.
type policyRef struct {
	arn, name, path string
	awsManaged      bool
}

// parsePolicyARN reads a managed policy's ARN: arn:aws:iam::aws:policy/PATH/NAME (AWS's)
// or arn:aws:iam::ACCOUNT:policy/PATH/NAME.
func parsePolicyARN(arn string) (policyRef, *protocol.Error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" || !strings.HasPrefix(parts[5], "policy/") {
		return policyRef{}, protocol.Errorf(http.StatusBadRequest, "InvalidInput", "ARN %s is not valid: a managed policy's ARN is arn:aws:iam::ACCOUNT:policy/NAME.", arn)
	}
	res := strings.TrimPrefix(parts[5], "policy")
	cut := strings.LastIndex(res, "/")
	ref := policyRef{arn: arn, name: res[cut+1:], path: res[:cut+1], awsManaged: parts[4] == "aws"}
	if ref.name == "" || !nameRE.MatchString(ref.name) {
		return policyRef{}, protocol.Errorf(http.StatusBadRequest, "InvalidInput", "ARN %s is not valid: the policy name is not a valid IAM name.", arn)
	}
	return ref, nil
}

func noSuchPolicy(arn string) *protocol.Error {
	return protocol.Errorf(http.StatusNotFound, "NoSuchEntity", "Policy %s does not exist or is not attachable.", arn)
}

// existingPolicy checks that a policy ARN names a policy. Locked.
func (i *IAM) existingPolicy(arn string) (policyRef, *protocol.Error) {
	ref, aerr := parsePolicyARN(arn)
	if aerr != nil {
		return ref, aerr
	}
	if !ref.awsManaged && i.policies[arn] == nil {
		return ref, noSuchPolicy(arn)
	}
	return ref, nil
}

func (i *IAM) attachRolePolicy(r *protocol.Request) (any, *protocol.Error) {
	var arn string
	return i.withRole(r.Params, requiredInto(r.Params, "PolicyArn", &arn), func(rec *role, _ bool) (any, *protocol.Error) {
		if _, aerr := i.existingPolicy(arn); aerr != nil {
			return nil, aerr
		}
		if slices.Contains(rec.managed, arn) {
			return nil, nil
		}
		if len(rec.managed) >= maxManagedPerRole {
			return nil, limitExceeded("Cannot exceed quota for PoliciesPerRole: %d (role %s)", maxManagedPerRole, rec.name)
		}
		rec.managed = append(rec.managed, arn)
		return nil, nil
	})
}

func (i *IAM) detachRolePolicy(r *protocol.Request) (any, *protocol.Error) {
	var arn string
	return i.withRole(r.Params, requiredInto(r.Params, "PolicyArn", &arn), func(rec *role, _ bool) (any, *protocol.Error) {
		if _, aerr := parsePolicyARN(arn); aerr != nil {
			return nil, aerr
		}
		k := slices.Index(rec.managed, arn)
		if k < 0 {
			return nil, protocol.Errorf(http.StatusNotFound, "NoSuchEntity", "Policy %s was not found.", arn)
		}
		rec.managed = slices.Delete(rec.managed, k, k+1)
		return nil, nil
	})
}

type attachedPolicyXML struct {
	PolicyName string `xml:"PolicyName"`
	PolicyArn  string `xml:"PolicyArn"`
}

type attachedPoliciesResult struct {
	XMLName          xml.Name
	AttachedPolicies []attachedPolicyXML `xml:"AttachedPolicies>member"`
	IsTruncated      bool                `xml:"IsTruncated"`
}

func (i *IAM) listAttachedRolePolicies(r *protocol.Request) (any, *protocol.Error) {
	return i.withRole(r.Params, func() *protocol.Error {
		if p, ok := r.Params.Str("PathPrefix"); ok && !strings.HasPrefix(p, "/") {
			return constraint("pathPrefix", p, "Member must begin with /")
		}
		return readMaxItems(r.Params)
	}, func(rec *role, _ bool) (any, *protocol.Error) {
		prefix, _ := r.Params.Str("PathPrefix")
		out := attachedPoliciesResult{XMLName: result(r.Action)}
		for _, arn := range rec.managed {
			ref, _ := parsePolicyARN(arn)
			if strings.HasPrefix(ref.path, prefix) {
				out.AttachedPolicies = append(out.AttachedPolicies, attachedPolicyXML{ref.name, arn})
			}
		}
		return out, nil
	})
}

func (i *IAM) putRolePolicy(r *protocol.Request) (any, *protocol.Error) {
	var name, doc string
	return i.withRole(r.Params, func() *protocol.Error {
		var aerr *protocol.Error
		if name, aerr = requiredName(r.Params, "PolicyName", 128); aerr != nil {
			return aerr
		}
		if doc, aerr = required(r.Params, "PolicyDocument"); aerr != nil {
			return aerr
		}
		return checkPolicy(doc, permissionsPolicy)
	}, func(rec *role, _ bool) (any, *protocol.Error) {
		total := policySize(doc)
		for n, d := range rec.inline {
			if n != name {
				total += policySize(d)
			}
		}
		if total > maxInlinePerRole {
			return nil, limitExceeded("Maximum policy size of %d bytes exceeded for role %s", maxInlinePerRole, rec.name)
		}
		rec.inline[name] = doc
		return nil, nil
	})
}

type rolePolicyResult struct {
	XMLName        xml.Name
	RoleName       string `xml:"RoleName"`
	PolicyName     string `xml:"PolicyName"`
	PolicyDocument string `xml:"PolicyDocument"`
}

// withInline reads PolicyName and runs do on the role's inline policy of that name.
func (i *IAM) withInline(r *protocol.Request, do func(rec *role, name, doc string) (any, *protocol.Error)) (any, *protocol.Error) {
	var name string
	return i.withRole(r.Params, func() *protocol.Error {
		var aerr *protocol.Error
		name, aerr = requiredName(r.Params, "PolicyName", 128)
		return aerr
	}, func(rec *role, _ bool) (any, *protocol.Error) {
		doc, ok := rec.inline[name]
		if !ok {
			return nil, protocol.Errorf(http.StatusNotFound, "NoSuchEntity", "The role policy with name %s cannot be found.", name)
		}
		return do(rec, name, doc)
	})
}

func (i *IAM) getRolePolicy(r *protocol.Request) (any, *protocol.Error) {
	return i.withInline(r, func(rec *role, name, doc string) (any, *protocol.Error) {
		return rolePolicyResult{XMLName: result(r.Action), RoleName: rec.name, PolicyName: name, PolicyDocument: encodeDoc(doc)}, nil
	})
}

func (i *IAM) deleteRolePolicy(r *protocol.Request) (any, *protocol.Error) {
	return i.withInline(r, func(rec *role, name, _ string) (any, *protocol.Error) {
		delete(rec.inline, name)
		return nil, nil
	})
}

type rolePoliciesResult struct {
	XMLName     xml.Name
	PolicyNames []string `xml:"PolicyNames>member"`
	IsTruncated bool     `xml:"IsTruncated"`
}

func (i *IAM) listRolePolicies(r *protocol.Request) (any, *protocol.Error) {
	return i.withRole(r.Params, func() *protocol.Error { return readMaxItems(r.Params) }, func(rec *role, _ bool) (any, *protocol.Error) {
		return rolePoliciesResult{XMLName: result(r.Action), PolicyNames: slices.Sorted(maps.Keys(rec.inline))}, nil
	})
}

type policyXML struct {
	PolicyName                    string   `xml:"PolicyName"`
	PolicyID                      string   `xml:"PolicyId"`
	ARN                           string   `xml:"Arn"`
	Path                          string   `xml:"Path"`
	DefaultVersionID              string   `xml:"DefaultVersionId"`
	AttachmentCount               int      `xml:"AttachmentCount"`
	PermissionsBoundaryUsageCount int      `xml:"PermissionsBoundaryUsageCount"`
	IsAttachable                  bool     `xml:"IsAttachable"`
	Description                   string   `xml:"Description,omitempty"`
	CreateDate                    string   `xml:"CreateDate"`
	UpdateDate                    string   `xml:"UpdateDate"`
	Tags                          []tagXML `xml:"Tags>member,omitempty"`
}

type policyResult struct {
	XMLName xml.Name
	Policy  policyXML `xml:"Policy"`
}

// policyXMLLocked describes a managed policy that exists. Locked.
func (i *IAM) policyXMLLocked(ref policyRef) policyXML {
	attached := 0
	for _, rec := range i.roles {
		if slices.Contains(rec.managed, ref.arn) {
			attached++
		}
	}
	x := policyXML{PolicyName: ref.name, ARN: ref.arn, Path: ref.path, DefaultVersionID: "v1", AttachmentCount: attached, IsAttachable: true}
	created := createDate
	if p := i.policies[ref.arn]; p != nil {
		x.PolicyID, x.Description, x.Tags, created = p.id, p.description, slices.Clone(p.tags), p.created
	} else {
		sum := sha256.Sum256([]byte(ref.arn))
		x.PolicyID = "ANPA" + strings.ToUpper(hex.EncodeToString(sum[:]))[:17]
	}
	x.CreateDate, x.UpdateDate = created.Format(time.RFC3339), created.Format(time.RFC3339)
	return x
}

func (i *IAM) createPolicy(r *protocol.Request) (any, *protocol.Error) {
	rd := &reading{p: r.Params}
	name, doc := rd.name("PolicyName", 128), rd.required("PolicyDocument")
	path, desc, tags := read(rd, readPath), read(rd, readDescription), read(rd, readTags)
	if aerr := rd.finish(); aerr != nil {
		return nil, aerr
	}
	if aerr := checkPolicy(doc, permissionsPolicy); aerr != nil {
		return nil, aerr
	}
	if policySize(doc) > maxManagedPolicyLen {
		return nil, limitExceeded("Cannot exceed quota for PolicySize: %d", maxManagedPolicyLen)
	}
	arn := i.arn("policy", path, name)
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, other := range i.policies {
		if other.name == name {
			return nil, alreadyExists("A policy called %s already exists. Duplicate names are not allowed.", name)
		}
	}
	pol := &policy{name: name, path: path, id: "ANPA" + randomString(17), arn: arn, doc: doc,
		created: i.now().UTC().Truncate(time.Second), tags: tags}
	if desc != nil {
		pol.description = *desc
	}
	i.policies[arn] = pol
	return policyResult{XMLName: result(r.Action), Policy: i.policyXMLLocked(policyRef{arn: arn, name: name, path: path})}, nil
}

// withPolicy reads PolicyArn and runs do on the policy it names, locked.
func (i *IAM) withPolicy(r *protocol.Request, do func(ref policyRef) (any, *protocol.Error)) (any, *protocol.Error) {
	rd := &reading{p: r.Params}
	arn := rd.required("PolicyArn")
	if aerr := rd.finish(); aerr != nil {
		return nil, aerr
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	ref, aerr := i.existingPolicy(arn)
	if aerr != nil {
		if aerr.Code == "NoSuchEntity" {
			aerr.Message = "Policy " + arn + " was not found."
		}
		return nil, aerr
	}
	return do(ref)
}

func (i *IAM) getPolicy(r *protocol.Request) (any, *protocol.Error) {
	return i.withPolicy(r, func(ref policyRef) (any, *protocol.Error) {
		return policyResult{XMLName: result(r.Action), Policy: i.policyXMLLocked(ref)}, nil
	})
}

func (i *IAM) deletePolicy(r *protocol.Request) (any, *protocol.Error) {
	return i.withPolicy(r, func(ref policyRef) (any, *protocol.Error) {
		if ref.awsManaged {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidInput", "Policy %s is an AWS managed policy: it cannot be deleted.", ref.arn)
		}
		if i.policyXMLLocked(ref).AttachmentCount > 0 {
			return nil, deleteConflict("Cannot delete a policy attached to entities.")
		}
		delete(i.policies, ref.arn)
		return nil, nil
	})
}
