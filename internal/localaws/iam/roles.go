package iam

// This file holds the role actions: CreateRole, GetRole, DeleteRole, UpdateRole,
// UpdateAssumeRolePolicy and the role's tags.

import (
	"encoding/xml"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// createDate is when the local account's implicit IAM entities were created.
var createDate = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type roleXML struct {
	Path                     string `xml:"Path"`
	RoleName                 string `xml:"RoleName"`
	RoleID                   string `xml:"RoleId"`
	ARN                      string `xml:"Arn"`
	CreateDate               string `xml:"CreateDate"`
	AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
	Description              string `xml:"Description,omitempty"`
	MaxSessionDuration       int64  `xml:"MaxSessionDuration,omitempty"`
	PermissionsBoundary      *struct {
		Type string `xml:"PermissionsBoundaryType"`
		ARN  string `xml:"PermissionsBoundaryArn"`
	} `xml:"PermissionsBoundary,omitempty"`
	Tags []tagXML `xml:"Tags>member,omitempty"`
}

// roleLocked describes a role that exists, drawing its ID if need be. Its trust policy
// is URL-encoded, as IAM answers policy documents. Locked.
func (i *IAM) roleLocked(name string) roleXML {
	r := i.record(name)
	created := createDate
	if !r.created.IsZero() {
		created = r.created
	}
	x := roleXML{
		Path: r.path, RoleName: name, RoleID: r.id, ARN: i.arn("role", r.path, name),
		CreateDate: created.Format(time.RFC3339), AssumeRolePolicyDocument: encodeDoc(i.trustLocked(name)),
		Description: r.description, MaxSessionDuration: r.maxSession, Tags: slices.Clone(r.tags),
	}
	if r.boundary != "" {
		x.PermissionsBoundary = &struct {
			Type string `xml:"PermissionsBoundaryType"`
			ARN  string `xml:"PermissionsBoundaryArn"`
		}{"Policy", r.boundary}
	}
	return x
}

// encodeDoc is a policy document as IAM answers it: URL-encoded (RFC 3986).
func encodeDoc(doc string) string { return strings.ReplaceAll(url.QueryEscape(doc), "+", "%20") }

type roleResult struct {
	XMLName xml.Name
	Role    roleXML `xml:"Role"`
}

func result(action string) xml.Name { return xml.Name{Local: action + "Result"} }

// maxSessionDuration reads MaxSessionDuration: 3600 to 43200 seconds.
func maxSessionDuration(p *protocol.Params) (*int64, *protocol.Error) {
	d, aerr := p.Int("MaxSessionDuration")
	if aerr != nil || d == nil {
		return d, aerr
	}
	if *d < 3600 || *d > 43200 {
		return nil, constraint("maxSessionDuration", itoa(int(*d)), "Member must have value between 3600 and 43200")
	}
	return d, nil
}

func readDescription(p *protocol.Params) (*string, *protocol.Error) {
	d := p.StrPtr("Description")
	if d != nil && len(*d) > 1000 {
		return nil, constraint("description", *d, "Member must have length less than or equal to 1000")
	}
	return d, nil
}

func (i *IAM) createRole(r *protocol.Request) (any, *protocol.Error) {
	p := r.Params
	rd := &reading{p: p}
	name, doc := rd.name("RoleName", 64), rd.required("AssumeRolePolicyDocument")
	path, desc, session, tags := read(rd, readPath), read(rd, readDescription), read(rd, maxSessionDuration), read(rd, readTags)
	boundary, _ := p.Str("PermissionsBoundary")
	if aerr := rd.finish(); aerr != nil {
		return nil, aerr
	}
	if aerr := checkPolicy(doc, trustPolicy); aerr != nil {
		return nil, aerr
	}
	held := i.hasRole(name)
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.existsLocked(name, held) {
		return nil, alreadyExists("Role with name %s already exists.", name)
	}
	if boundary != "" {
		if _, aerr := i.existingPolicy(boundary); aerr != nil {
			return nil, aerr
		}
	}
	rec := &role{name: name, path: path, trust: doc, created: i.now().UTC().Truncate(time.Second), tags: tags,
		maxSession: 3600, boundary: boundary, inline: map[string]string{}}
	if old := i.roles[name]; old != nil {
		// An implicit role's data (a trust policy set by the sandbox) does not outlive it.
		delete(i.roles, name)
	}
	if desc != nil {
		rec.description = *desc
	}
	if session != nil {
		rec.maxSession = *session
	}
	i.roles[name] = rec
	return roleResult{XMLName: result(r.Action), Role: i.roleLocked(name)}, nil
}

// withRole reads the request's role and, when the rest of the request reads well
// (rest, then Finish), runs do with the role's record, locked.
func (i *IAM) withRole(p *protocol.Params, rest func() *protocol.Error, do func(r *role, held bool) (any, *protocol.Error)) (any, *protocol.Error) {
	name, aerr := readNamed(p, "RoleName", 64, rest)
	if aerr != nil {
		return nil, aerr
	}
	held := i.hasRole(name)
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.existsLocked(name, held) {
		return nil, noSuchRole(name)
	}
	return do(i.record(name), held)
}

func (i *IAM) getRole(r *protocol.Request) (any, *protocol.Error) {
	return i.withRole(r.Params, nil, func(rec *role, _ bool) (any, *protocol.Error) {
		return roleResult{XMLName: result(r.Action), Role: i.roleLocked(rec.name)}, nil
	})
}

func (i *IAM) deleteRole(r *protocol.Request) (any, *protocol.Error) {
	return i.withRole(r.Params, nil, func(rec *role, held bool) (any, *protocol.Error) {
		inProfile := held
		for _, p := range i.profiles {
			inProfile = inProfile || p.role == rec.name
		}
		switch {
		case inProfile:
			return nil, deleteConflict("Cannot delete entity, must remove roles from instance profile first.")
		case len(rec.managed) > 0:
			return nil, deleteConflict("Cannot delete entity, must detach all policies first.")
		case len(rec.inline) > 0:
			return nil, deleteConflict("Cannot delete entity, must delete policies first.")
		}
		delete(i.roles, rec.name)
		return nil, nil
	})
}

func (i *IAM) updateRole(r *protocol.Request) (any, *protocol.Error) {
	var desc *string
	var session *int64
	return i.withRole(r.Params, func() *protocol.Error {
		var aerr *protocol.Error
		if desc, aerr = readDescription(r.Params); aerr != nil {
			return aerr
		}
		session, aerr = maxSessionDuration(r.Params)
		return aerr
	}, func(rec *role, _ bool) (any, *protocol.Error) {
		if desc != nil {
			rec.description = *desc
		}
		if session != nil {
			rec.maxSession = *session
		}
		return struct{ XMLName xml.Name }{result(r.Action)}, nil
	})
}

func (i *IAM) updateAssumeRolePolicy(r *protocol.Request) (any, *protocol.Error) {
	var doc string
	return i.withRole(r.Params, func() *protocol.Error {
		var aerr *protocol.Error
		if doc, aerr = required(r.Params, "PolicyDocument"); aerr != nil {
			return aerr
		}
		return checkPolicy(doc, trustPolicy)
	}, func(rec *role, _ bool) (any, *protocol.Error) {
		rec.trust = doc
		return nil, nil
	})
}

func (i *IAM) tagRole(r *protocol.Request) (any, *protocol.Error) {
	var tags tagList
	return i.withRole(r.Params, func() *protocol.Error {
		var aerr *protocol.Error
		if tags, aerr = readTags(r.Params); aerr != nil {
			return aerr
		}
		if len(tags) == 0 {
			return constraint("tags", "[]", "Member must have length greater than or equal to 1")
		}
		return nil
	}, func(rec *role, _ bool) (any, *protocol.Error) {
		merged := rec.tags.merge(tags)
		if len(merged) > maxTags {
			return nil, limitExceeded("Cannot exceed quota for TagsPerRole: 50 (the role %s would have %d tags)", rec.name, len(merged))
		}
		rec.tags = merged
		return nil, nil
	})
}

func (i *IAM) untagRole(r *protocol.Request) (any, *protocol.Error) {
	var keys []string
	return i.withRole(r.Params, func() *protocol.Error {
		keys = r.Params.StrList("TagKeys")
		if len(keys) == 0 {
			return constraint("tagKeys", "[]", "Member must have length greater than or equal to 1")
		}
		return nil
	}, func(rec *role, _ bool) (any, *protocol.Error) {
		rec.tags = rec.tags.without(keys)
		return nil, nil
	})
}

type roleTagsResult struct {
	XMLName     xml.Name
	Tags        []tagXML `xml:"Tags>member"`
	IsTruncated bool     `xml:"IsTruncated"`
}

func (i *IAM) listRoleTags(r *protocol.Request) (any, *protocol.Error) {
	return i.withRole(r.Params, func() *protocol.Error { return readMaxItems(r.Params) }, func(rec *role, _ bool) (any, *protocol.Error) {
		return roleTagsResult{XMLName: result(r.Action), Tags: slices.Clone(rec.tags)}, nil
	})
}
