package ec2

// This file serves the launch template actions on EC2's endpoint.

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// newTable is the launch templates' table: each action's handler, refusing a dry run.
func (l *LaunchTemplates) newTable() map[string]protocol.Handler {
	t := map[string]protocol.Handler{
		"CreateLaunchTemplate":           l.create,
		"CreateLaunchTemplateVersion":    l.createVersion,
		"DescribeLaunchTemplates":        l.describe,
		"DescribeLaunchTemplateVersions": l.describeVersions,
		"ModifyLaunchTemplate":           l.modify,
		"DeleteLaunchTemplate":           l.delete,
	}
	for name, h := range t {
		t[name] = func(r *protocol.Request) (any, *protocol.Error) {
			if dry, aerr := dryRun(r.Params); aerr != nil || dry {
				return nil, cmp.Or(aerr, errDryRun)
			}
			return h(r)
		}
	}
	return t
}

// ServeHTTP answers the launch template actions alone: an EC2 endpoint without
// instances (EC2.WithLaunchTemplates serves them with the rest of EC2).
func (l *LaunchTemplates) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.service.ServeHTTP(w, r)
}

// actions is the launch templates' table.
func (l *LaunchTemplates) actions() map[string]protocol.Handler { return l.table }

// fingerprint is a request's parameters less ClientToken, for idempotency checks.
func fingerprint(form url.Values) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(form)) {
		if k == "ClientToken" {
			continue
		}
		fmt.Fprintf(h, "%s=%q\n", k, form[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// tokenUse is what a ClientToken of an action (kind) was used for, and whether it was;
// a token used for other parameters, or another template (id, when given), is refused.
// Locked.
func (l *LaunchTemplates) tokenUse(kind, token string, r *protocol.Request, id string) (templateTokenUse, bool, *protocol.Error) {
	use, ok := l.tokens[kind+token]
	if token == "" || !ok {
		return use, false, nil
	}
	if use.params != fingerprint(r.Form) || id != "" && use.id != id {
		return use, false, protocol.Errorf(http.StatusBadRequest, "IdempotentParameterMismatch", "Client token %s was already used for a request with different parameters.", token)
	}
	return use, true, nil
}

// useToken records what a ClientToken was used for. Locked.
func (l *LaunchTemplates) useToken(kind, token string, r *protocol.Request, use templateTokenUse) {
	if token != "" {
		use.params = fingerprint(r.Form)
		l.tokens[kind+token] = use
	}
}

// ltResponse is the answer of the actions on one template.
type ltResponse struct {
	XMLName               xml.Name
	Xmlns                 string        `xml:"xmlns,attr"`
	RequestID             string        `xml:"requestId"`
	LaunchTemplate        *ltXML        `xml:"launchTemplate,omitempty"`
	LaunchTemplateVersion *ltVersionXML `xml:"launchTemplateVersion,omitempty"`
}

func newLTResponse(r *protocol.Request) *ltResponse {
	return &ltResponse{XMLName: xml.Name{Local: r.Action + "Response"}, Xmlns: xmlns, RequestID: r.ID}
}

func (l *LaunchTemplates) create(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	out := newLTResponse(r)
	name, _ := root.Str("LaunchTemplateName")
	desc, _ := root.Str("VersionDescription")
	token, _ := root.Str("ClientToken")
	if name == "" {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "The request must contain the parameter LaunchTemplateName"}
	}
	if !ltNameRE.MatchString(name) {
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "InvalidLaunchTemplateName.MalformedException", Message: "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'"}
	}
	data, aerr := parseLaunchTemplateData(root.Child("LaunchTemplateData"))
	if aerr != nil {
		return nil, aerr
	}
	var tags []Tag
	for _, ts := range root.List("TagSpecification") {
		rt, _ := ts.Str("ResourceType")
		if rt != "launch-template" {
			return nil, protocol.InvalidParameter("'%s' is not a valid taggable resource type for this operation.", rt)
		}
		t, aerr := parseTags(ts)
		if aerr != nil {
			return nil, aerr
		}
		tags = append(tags, t...)
	}
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	use, used, aerr := l.tokenUse("create/", token, r, "")
	if aerr != nil {
		return nil, aerr
	}
	if t, ok := l.byID[use.id]; used && ok {
		out.LaunchTemplate = t.xml(l.AccountID)
		return out, nil
	}
	if _, dup := l.byName[name]; dup {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use: %s.", name)
	}
	now := l.now().UTC()
	t := &launchTemplate{id: newLaunchTemplateID(), name: name, created: now, defaultVersion: 1, latestVersion: 1, tags: tags,
		versions: map[int64]*ltVersion{1: {number: 1, description: desc, created: now, data: data}}}
	l.byID[t.id], l.byName[name] = t, t.id
	l.useToken("create/", token, r, templateTokenUse{id: t.id})
	out.LaunchTemplate = t.xml(l.AccountID)
	return out, nil
}

func (l *LaunchTemplates) createVersion(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	out := newLTResponse(r)
	id, _ := root.Str("LaunchTemplateId")
	name, _ := root.Str("LaunchTemplateName")
	source, hasSource := root.Str("SourceVersion")
	desc, _ := root.Str("VersionDescription")
	token, _ := root.Str("ClientToken")
	if _, err := root.Bool("ResolveAlias"); err != nil {
		return nil, err
	}
	data, aerr := parseLaunchTemplateData(root.Child("LaunchTemplateData"))
	if aerr != nil {
		return nil, aerr
	}
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t, aerr := l.lookup(id, name)
	if aerr != nil {
		return nil, aerr
	}
	use, used, aerr := l.tokenUse("version/", token, r, t.id)
	if aerr != nil {
		return nil, aerr
	}
	if v, ok := t.versions[use.version]; used && ok {
		out.LaunchTemplateVersion = t.versionXML(v, l.AccountID)
		return out, nil
	}
	if hasSource {
		src, aerr := t.version(source)
		if aerr != nil {
			return nil, aerr
		}
		data = data.overlay(src.data)
	}
	t.latestVersion++
	v := &ltVersion{number: t.latestVersion, description: desc, created: l.now().UTC(), data: data}
	t.versions[v.number] = v
	l.useToken("version/", token, r, templateTokenUse{id: t.id, version: v.number})
	out.LaunchTemplateVersion = t.versionXML(v, l.AccountID)
	return out, nil
}

// ltFilters are DescribeLaunchTemplates' filters: each gives a template's values.
func (l *LaunchTemplates) modify(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	out := newLTResponse(r)
	id, _ := root.Str("LaunchTemplateId")
	name, _ := root.Str("LaunchTemplateName")
	def, hasDef := root.Str("SetDefaultVersion")
	root.Str("ClientToken")
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t, aerr := l.lookup(id, name)
	if aerr != nil {
		return nil, aerr
	}
	if hasDef {
		v, aerr := t.version(def)
		if aerr != nil {
			return nil, aerr
		}
		t.defaultVersion = v.number
	}
	out.LaunchTemplate = t.xml(l.AccountID)
	return out, nil
}

func (l *LaunchTemplates) delete(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	out := newLTResponse(r)
	id, _ := root.Str("LaunchTemplateId")
	name, _ := root.Str("LaunchTemplateName")
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t, aerr := l.lookup(id, name)
	if aerr != nil {
		return nil, aerr
	}
	delete(l.byID, t.id)
	delete(l.byName, t.name)
	out.LaunchTemplate = t.xml(l.AccountID)
	return out, nil
}

// ltFilters are DescribeLaunchTemplates' filters, besides the tag filters.
var ltFilters = map[string]func(t *launchTemplate) []string{
	"launch-template-name": func(t *launchTemplate) []string { return one(t.name) },
}

func (l *LaunchTemplates) describe(r *protocol.Request) (any, *protocol.Error) {
	names := r.Params.StrList("LaunchTemplateName")
	in, aerr := readDescribe(r.Params, "LaunchTemplateId", func(n string) bool {
		return ltFilters[n] != nil || n == "tag-key" || isTagFilter(n)
	}, 1, 200)
	if aerr != nil {
		return nil, aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range names {
		t, aerr := l.lookup("", name)
		if aerr != nil {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
		}
		in.ids = append(in.ids, t.id)
	}
	page, next, aerr := describeSet[*launchTemplate]{
		keys: slices.Sorted(maps.Keys(l.byID)),
		get:  func(id string) (*launchTemplate, bool) { t, ok := l.byID[id]; return t, ok },
		tags: func(t *launchTemplate) map[string]string {
			m := map[string]string{}
			for _, tag := range t.tags {
				m[tag.Key] = tag.Value
			}
			return m
		},
		values: func(t *launchTemplate, name string) []string { return ltFilters[name](t) },
		notFound: func(ids []string) *protocol.Error {
			_, aerr := l.lookup(ids[0], "")
			return aerr
		},
		requestOrder: true,
	}.page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []ltXML
	for _, t := range page {
		out = append(out, *t.xml(l.AccountID))
	}
	return newDescribeOutput(r, "launchTemplates", out, next), nil
}

//nolint:gocyclo // one independent filter per query parameter.
func (l *LaunchTemplates) describeVersions(r *protocol.Request) (any, *protocol.Error) {
	root := r.Params
	id, _ := root.Str("LaunchTemplateId")
	name, _ := root.Str("LaunchTemplateName")
	versions := root.StrList("LaunchTemplateVersion")
	minV, aerr := root.Int("MinVersion")
	if aerr != nil {
		return nil, aerr
	}
	maxV, aerr := root.Int("MaxVersion")
	if aerr != nil {
		return nil, aerr
	}
	if _, err := root.Bool("ResolveAlias"); err != nil {
		return nil, err
	}
	page, aerr := root.ReadPage("MaxResults", 1, 200, 0)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := root.Finish(); aerr != nil {
		return nil, aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var found []ltVersionXML
	if id == "" && name == "" {
		// Account-wide: only $Latest and $Default make sense.
		if len(versions) == 0 {
			return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "The request must contain the parameter launchTemplateName or launchTemplateId, or the versions $Latest or $Default"}
		}
		for _, v := range versions {
			if v != "$Latest" && v != "$Default" {
				return nil, protocol.InvalidParameter("Without a launch template ID or name, only the versions $Latest and $Default can be described; got %q.", v)
			}
		}
		for _, tid := range slices.Sorted(maps.Keys(l.byID)) {
			t := l.byID[tid]
			for _, v := range versions {
				ver, _ := t.version(v)
				found = append(found, *t.versionXML(ver, l.AccountID))
			}
		}
	} else {
		t, aerr := l.lookup(id, name)
		if aerr != nil {
			return nil, aerr
		}
		var picked []*ltVersion
		if len(versions) > 0 {
			for _, s := range versions {
				v, aerr := t.version(s)
				if aerr != nil {
					return nil, aerr
				}
				if !slices.Contains(picked, v) {
					picked = append(picked, v)
				}
			}
		} else {
			for _, n := range slices.Sorted(maps.Keys(t.versions)) {
				picked = append(picked, t.versions[n])
			}
		}
		// Newest first, as EC2 lists them.
		slices.SortFunc(picked, func(a, b *ltVersion) int { return int(b.number - a.number) })
		for _, v := range picked {
			if minV != nil && v.number < *minV || maxV != nil && v.number > *maxV {
				continue
			}
			found = append(found, *t.versionXML(v, l.AccountID))
		}
	}
	items, next, _ := protocol.Page(found, page.Token, page.Max)
	return newDescribeOutput(r, "launchTemplateVersionSet", items, next), nil
}
