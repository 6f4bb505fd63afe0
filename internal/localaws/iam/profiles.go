package iam

// This file holds the instance profile actions: CreateInstanceProfile,
// GetInstanceProfile, DeleteInstanceProfile, AddRoleToInstanceProfile,
// RemoveRoleFromInstanceProfile and ListInstanceProfilesForRole.

import (
	"encoding/xml"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

type instanceProfileXML struct {
	InstanceProfileID   string    `xml:"InstanceProfileId"`
	Roles               []roleXML `xml:"Roles>member"`
	InstanceProfileName string    `xml:"InstanceProfileName"`
	Path                string    `xml:"Path"`
	ARN                 string    `xml:"Arn"`
	CreateDate          string    `xml:"CreateDate"`
	Tags                []tagXML  `xml:"Tags>member,omitempty"`
}

type instanceProfileResult struct {
	XMLName         xml.Name
	InstanceProfile instanceProfileXML `xml:"InstanceProfile"`
}

// profileLocked is a profile that exists: the one recorded, or the implicit one named
// after an instance's role (held). Locked.
func (i *IAM) profileLocked(name string, held bool) (*profile, bool) {
	if p := i.profiles[name]; p != nil {
		return p, true
	}
	if held {
		return &profile{name: name, path: "/", role: name}, true
	}
	return nil, false
}

// profileXML describes a profile, with its role. Locked.
func (i *IAM) profileXML(p *profile) instanceProfileXML {
	created := createDate
	if !p.created.IsZero() {
		created = p.created
	}
	x := instanceProfileXML{InstanceProfileID: InstanceProfileID(p.name), InstanceProfileName: p.name, Path: p.path,
		ARN: i.arn("instance-profile", p.path, p.name), CreateDate: created.Format(time.RFC3339), Tags: slices.Clone(p.tags)}
	if p.role != "" {
		x.Roles = []roleXML{i.roleLocked(p.role)}
	}
	return x
}

func (i *IAM) createInstanceProfile(r *protocol.Request) (any, *protocol.Error) {
	rd := &reading{p: r.Params}
	name, path, tags := rd.name("InstanceProfileName", 128), read(rd, readPath), read(rd, readTags)
	if aerr := rd.finish(); aerr != nil {
		return nil, aerr
	}
	held := i.hasRole(name)
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.profileLocked(name, held); ok {
		return nil, alreadyExists("Instance Profile %s already exists.", name)
	}
	prof := &profile{name: name, path: path, created: i.now().UTC().Truncate(time.Second), tags: tags}
	i.profiles[name] = prof
	return instanceProfileResult{XMLName: result(r.Action), InstanceProfile: i.profileXML(prof)}, nil
}

// withProfile reads InstanceProfileName and, when the rest of the request reads well,
// runs do with the profile (an implicit one made a record), locked.
func (i *IAM) withProfile(p *protocol.Params, rest func() *protocol.Error, do func(prof *profile) (any, *protocol.Error)) (any, *protocol.Error) {
	name, aerr := readNamed(p, "InstanceProfileName", 128, rest)
	if aerr != nil {
		return nil, aerr
	}
	held := i.hasRole(name)
	i.mu.Lock()
	defer i.mu.Unlock()
	prof, ok := i.profileLocked(name, held)
	if !ok {
		return nil, noSuchProfile(name)
	}
	return do(prof)
}

func (i *IAM) getInstanceProfile(r *protocol.Request) (any, *protocol.Error) {
	return i.withProfile(r.Params, nil, func(prof *profile) (any, *protocol.Error) {
		return instanceProfileResult{XMLName: result(r.Action), InstanceProfile: i.profileXML(prof)}, nil
	})
}

func (i *IAM) deleteInstanceProfile(r *protocol.Request) (any, *protocol.Error) {
	return i.withProfile(r.Params, nil, func(prof *profile) (any, *protocol.Error) {
		if prof.role != "" {
			return nil, deleteConflict("Cannot delete entity, must remove roles from instance profile first.")
		}
		delete(i.profiles, prof.name)
		return nil, nil
	})
}

func (i *IAM) addRoleToInstanceProfile(r *protocol.Request) (any, *protocol.Error) {
	var roleName string
	var held bool
	return i.withProfile(r.Params, func() *protocol.Error {
		var aerr *protocol.Error
		roleName, aerr = requiredName(r.Params, "RoleName", 64)
		held = i.hasRole(roleName)
		return aerr
	}, func(prof *profile) (any, *protocol.Error) {
		if !i.existsLocked(roleName, held) {
			return nil, noSuchRole(roleName)
		}
		if prof.role != "" {
			return nil, limitExceeded("Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1 (instance profile %s already holds role %s)", prof.name, prof.role)
		}
		prof.role = roleName
		i.profiles[prof.name] = prof
		return nil, nil
	})
}

func (i *IAM) removeRoleFromInstanceProfile(r *protocol.Request) (any, *protocol.Error) {
	var roleName string
	return i.withProfile(r.Params, func() (aerr *protocol.Error) {
		roleName, aerr = requiredName(r.Params, "RoleName", 64)
		return aerr
	}, func(prof *profile) (any, *protocol.Error) {
		if prof.role != roleName {
			return nil, noSuchRole(roleName)
		}
		if i.profiles[prof.name] == nil {
			// An instance's profile, made a record so that it stays without its role.
			prof.created = createDate
			i.profiles[prof.name] = prof
		}
		prof.role = ""
		return nil, nil
	})
}

type profilesForRoleResult struct {
	XMLName          xml.Name
	InstanceProfiles []instanceProfileXML `xml:"InstanceProfiles>member"`
	IsTruncated      bool                 `xml:"IsTruncated"`
}

func (i *IAM) listInstanceProfilesForRole(r *protocol.Request) (any, *protocol.Error) {
	return i.withRole(r.Params, func() *protocol.Error { return readMaxItems(r.Params) }, func(rec *role, held bool) (any, *protocol.Error) {
		out := profilesForRoleResult{XMLName: result(r.Action)}
		for _, name := range slices.Sorted(maps.Keys(i.profiles)) {
			if p := i.profiles[name]; p.role == rec.name {
				out.InstanceProfiles = append(out.InstanceProfiles, i.profileXML(p))
			}
		}
		if i.profiles[rec.name] == nil && held {
			out.InstanceProfiles = append(out.InstanceProfiles, i.profileXML(&profile{name: rec.name, path: "/", role: rec.name}))
			slices.SortFunc(out.InstanceProfiles, func(a, b instanceProfileXML) int {
				return strings.Compare(a.InstanceProfileName, b.InstanceProfileName)
			})
		}
		return out, nil
	})
}
