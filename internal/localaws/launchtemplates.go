package localaws

// This file holds EC2 launch templates: CreateLaunchTemplate, CreateLaunchTemplateVersion,
// DescribeLaunchTemplates, DescribeLaunchTemplateVersions, ModifyLaunchTemplate and
// DeleteLaunchTemplate on the EC2 Query protocol, and Resolve, through which Auto
// Scaling launches from a template version.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LaunchTemplates is the account's EC2 launch templates. Versions are numbered from 1
// in creation order and never change; $Latest and $Default are resolved when asked.
// ClientToken makes creation idempotent, as on EC2. Safe for concurrent use.
type LaunchTemplates struct {
	AccountID string
	now       func() time.Time

	mu     sync.Mutex
	byID   map[string]*launchTemplate
	byName map[string]string // name → ID
	tokens map[string]templateTokenUse
	calls  int
}

// templateTokenUse is what a ClientToken was used for: the request's parameters and its answer.
type templateTokenUse struct {
	params string
	id     string
	// version is the version created (CreateLaunchTemplateVersion), 0 otherwise.
	version int64
}

type launchTemplate struct {
	id, name       string
	created        time.Time
	defaultVersion int64
	latestVersion  int64
	tags           []EC2Tag
	versions       map[int64]*ltVersion
}

type ltVersion struct {
	number      int64
	description string
	created     time.Time
	data        LaunchTemplateData
}

// ResolvedLaunchTemplate is one concrete version of a launch template.
type ResolvedLaunchTemplate struct {
	ID, Name string
	Version  int64
	Data     LaunchTemplateData
}

// NewLaunchTemplates returns an account without launch templates.
func NewLaunchTemplates(accountID string) *LaunchTemplates {
	return &LaunchTemplates{AccountID: accountID, now: time.Now, byID: map[string]*launchTemplate{},
		byName: map[string]string{}, tokens: map[string]templateTokenUse{}}
}

// The launch template actions, all on EC2's endpoint.
var launchTemplateActions = map[string]bool{
	"CreateLaunchTemplate": true, "CreateLaunchTemplateVersion": true, "DescribeLaunchTemplates": true,
	"DescribeLaunchTemplateVersions": true, "ModifyLaunchTemplate": true, "DeleteLaunchTemplate": true,
}

// withLaunchTemplates serves the launch template actions with lt and every other EC2
// action with ec2, on one endpoint as EC2 does.
func withLaunchTemplates(ec2 http.Handler, lt *LaunchTemplates) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost || r.Method == http.MethodGet {
			r.Body = http.MaxBytesReader(w, r.Body, maxQueryBody)
			if err := r.ParseForm(); err == nil && launchTemplateActions[r.Form.Get("Action")] {
				lt.ServeHTTP(w, r)
				return
			}
		}
		ec2.ServeHTTP(w, r)
	})
}

// Calls counts the authenticated requests received.
func (l *LaunchTemplates) Calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// Resolve returns a version of a template named by ID or name: version is a number,
// $Latest, or $Default ("" means $Default).
func (l *LaunchTemplates) Resolve(id, name, version string) (ResolvedLaunchTemplate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, aerr := l.lookup(id, name)
	if aerr != nil {
		return ResolvedLaunchTemplate{}, fmt.Errorf("%s: %s", aerr.code, aerr.message)
	}
	v, aerr := t.version(version)
	if aerr != nil {
		return ResolvedLaunchTemplate{}, fmt.Errorf("%s: %s", aerr.code, aerr.message)
	}
	return ResolvedLaunchTemplate{ID: t.id, Name: t.name, Version: v.number, Data: v.data}, nil
}

var (
	ltNameRE = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)
	ltIDRE   = regexp.MustCompile(`^lt-[0-9a-f]{17}$`)
)

// lookup finds a template by ID or name (exactly one given).
func (l *LaunchTemplates) lookup(id, name string) (*launchTemplate, *apiError) {
	switch {
	case id != "" && name != "":
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterCombination", "The parameters LaunchTemplateId and LaunchTemplateName cannot be used together. Specify one of them."}
	case id != "":
		if !ltIDRE.MatchString(id) {
			return nil, &apiError{http.StatusBadRequest, "InvalidLaunchTemplateId.Malformed", fmt.Sprintf("The specified ID for the launch template, %s, is not valid. The ID must be in the form lt- followed by 17 hexadecimal characters.", id)}
		}
		t, ok := l.byID[id]
		if !ok {
			return nil, &apiError{http.StatusBadRequest, "InvalidLaunchTemplateId.NotFound", fmt.Sprintf("The specified launch template, with template ID %s, does not exist.", id)}
		}
		return t, nil
	case name != "":
		id, ok := l.byName[name]
		if !ok {
			return nil, &apiError{http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException", fmt.Sprintf("The specified launch template, with template name %s, does not exist.", name)}
		}
		return l.byID[id], nil
	}
	return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter launchTemplateName or launchTemplateId"}
}

// version resolves a version string of t.
func (t *launchTemplate) version(s string) (*ltVersion, *apiError) {
	var n int64
	switch s {
	case "", "$Default":
		n = t.defaultVersion
	case "$Latest":
		n = t.latestVersion
	default:
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil || n < 1 {
			return nil, invalidParameter("Invalid launch template version: the version must be a positive number, $Latest or $Default; got %q.", s)
		}
	}
	v, ok := t.versions[n]
	if !ok {
		return nil, &apiError{http.StatusBadRequest, "InvalidLaunchTemplateId.VersionNotFound", fmt.Sprintf("Could not find launch template version %s for launch template ID %s.", s, t.id)}
	}
	return v, nil
}

func newLaunchTemplateID() string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return "lt-" + hex.EncodeToString(b)[:17]
}

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

// ServeHTTP answers the launch template actions.
func (l *LaunchTemplates) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID, form, ok := queryRequest(w, r, &apiError{http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials"}, writeEC2Error)
	if !ok {
		return
	}
	l.mu.Lock()
	l.calls++
	l.mu.Unlock()
	root := parseFormTree(form)
	out := &ltResponse{XMLName: xml.Name{Local: form.Get("Action") + "Response"}, Xmlns: "http://ec2.amazonaws.com/doc/2016-11-15/", RequestID: reqID}
	var aerr *apiError
	if dry, err := ec2Bool(root, "DryRun"); err != nil {
		aerr = err
	} else if dry != nil && *dry {
		aerr = &apiError{http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set."}
	}
	if aerr == nil {
		switch form.Get("Action") {
		case "CreateLaunchTemplate":
			aerr = l.create(root, form, out)
		case "CreateLaunchTemplateVersion":
			aerr = l.createVersion(root, form, out)
		case "DescribeLaunchTemplates":
			aerr = l.describe(root, out)
		case "DescribeLaunchTemplateVersions":
			aerr = l.describeVersions(root, out)
		case "ModifyLaunchTemplate":
			aerr = l.modify(root, out)
		case "DeleteLaunchTemplate":
			aerr = l.delete(root, out)
		default:
			aerr = &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %s is not valid for this web service.", form.Get("Action"))}
		}
	}
	if aerr != nil {
		writeEC2Error(w, reqID, aerr)
		return
	}
	writeXML(w, http.StatusOK, out)
}

// unknownParameter refuses a parameter no one read.
func unknownParameter(root *formNode) *apiError {
	if u := root.unknown(); u != "" {
		return &apiError{http.StatusBadRequest, "UnknownParameter", fmt.Sprintf("The parameter %s is not recognized", u)}
	}
	return nil
}

func (l *LaunchTemplates) create(root *formNode, form url.Values, out *ltResponse) *apiError {
	name, _ := root.str("LaunchTemplateName")
	desc, _ := root.str("VersionDescription")
	token, _ := root.str("ClientToken")
	if name == "" {
		return &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter LaunchTemplateName"}
	}
	if !ltNameRE.MatchString(name) {
		return &apiError{http.StatusBadRequest, "InvalidLaunchTemplateName.MalformedException", "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'"}
	}
	data, aerr := parseLaunchTemplateData(root.child("LaunchTemplateData"))
	if aerr != nil {
		return aerr
	}
	var tags []EC2Tag
	for _, ts := range root.list("TagSpecification", false) {
		rt, _ := ts.str("ResourceType")
		if rt != "launch-template" {
			return invalidParameter("'%s' is not a valid taggable resource type for this operation.", rt)
		}
		t, aerr := parseEC2Tags(ts)
		if aerr != nil {
			return aerr
		}
		tags = append(tags, t...)
	}
	if aerr := unknownParameter(root); aerr != nil {
		return aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if token != "" {
		if use, ok := l.tokens["create/"+token]; ok {
			if use.params != fingerprint(form) {
				return &apiError{http.StatusBadRequest, "IdempotentParameterMismatch", fmt.Sprintf("Client token %s was already used for a request with different parameters.", token)}
			}
			if t, ok := l.byID[use.id]; ok {
				out.LaunchTemplate = t.xml(l.AccountID)
				return nil
			}
		}
	}
	if _, dup := l.byName[name]; dup {
		return &apiError{http.StatusBadRequest, "InvalidLaunchTemplateName.AlreadyExistsException", fmt.Sprintf("Launch template name already in use: %s.", name)}
	}
	now := l.now().UTC()
	t := &launchTemplate{id: newLaunchTemplateID(), name: name, created: now, defaultVersion: 1, latestVersion: 1, tags: tags,
		versions: map[int64]*ltVersion{1: {number: 1, description: desc, created: now, data: data}}}
	l.byID[t.id], l.byName[name] = t, t.id
	if token != "" {
		l.tokens["create/"+token] = templateTokenUse{params: fingerprint(form), id: t.id}
	}
	out.LaunchTemplate = t.xml(l.AccountID)
	return nil
}

func (l *LaunchTemplates) createVersion(root *formNode, form url.Values, out *ltResponse) *apiError {
	id, _ := root.str("LaunchTemplateId")
	name, _ := root.str("LaunchTemplateName")
	source, hasSource := root.str("SourceVersion")
	desc, _ := root.str("VersionDescription")
	token, _ := root.str("ClientToken")
	if _, err := ec2Bool(root, "ResolveAlias"); err != nil {
		return err
	}
	data, aerr := parseLaunchTemplateData(root.child("LaunchTemplateData"))
	if aerr != nil {
		return aerr
	}
	if aerr := unknownParameter(root); aerr != nil {
		return aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t, aerr := l.lookup(id, name)
	if aerr != nil {
		return aerr
	}
	if token != "" {
		if use, ok := l.tokens["version/"+token]; ok {
			if use.params != fingerprint(form) || use.id != t.id {
				return &apiError{http.StatusBadRequest, "IdempotentParameterMismatch", fmt.Sprintf("Client token %s was already used for a request with different parameters.", token)}
			}
			if v, ok := t.versions[use.version]; ok {
				out.LaunchTemplateVersion = t.versionXML(v, l.AccountID)
				return nil
			}
		}
	}
	if hasSource {
		src, aerr := t.version(source)
		if aerr != nil {
			return aerr
		}
		data = data.overlay(src.data)
	}
	t.latestVersion++
	v := &ltVersion{number: t.latestVersion, description: desc, created: l.now().UTC(), data: data}
	t.versions[v.number] = v
	if token != "" {
		l.tokens["version/"+token] = templateTokenUse{params: fingerprint(form), id: t.id, version: v.number}
	}
	out.LaunchTemplateVersion = t.versionXML(v, l.AccountID)
	return nil
}

// ltFilters are DescribeLaunchTemplates' filters: each gives a template's values.
func ltFilterValues(t *launchTemplate, name string) ([]string, bool) {
	switch {
	case name == "launch-template-name":
		return []string{t.name}, true
	case name == "tag-key":
		var keys []string
		for _, tag := range t.tags {
			keys = append(keys, tag.Key)
		}
		return keys, true
	case strings.HasPrefix(name, "tag:"):
		var vals []string
		for _, tag := range t.tags {
			if tag.Key == strings.TrimPrefix(name, "tag:") {
				vals = append(vals, tag.Value)
			}
		}
		return vals, true
	}
	return nil, false
}

// pageToken encodes a page's start offset.
func pageToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(offset)))
}

func parsePageToken(s string) (int, bool) {
	if s == "" {
		return 0, true
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(raw), "offset:")
	n, err := strconv.Atoi(rest)
	return n, ok && err == nil && n >= 0
}

// page cuts items[offset:] to max (0: all), returning the next page's token.
func page[T any](items []T, offset, max int) ([]T, string) {
	if offset > len(items) {
		offset = len(items)
	}
	items = items[offset:]
	if max > 0 && len(items) > max {
		return items[:max], pageToken(offset + max)
	}
	return items, ""
}

// ec2Paging reads MaxResults (lo to hi) and NextToken.
func ec2Paging(root *formNode, lo, hi int64) (offset, max int, aerr *apiError) {
	m, aerr := ec2Int(root, "MaxResults")
	if aerr != nil {
		return 0, 0, aerr
	}
	if m != nil {
		if *m < lo || *m > hi {
			return 0, 0, invalidParameter("Value ( %d ) for parameter maxResults is invalid. Expecting a value between %d and %d.", *m, lo, hi)
		}
		max = int(*m)
	}
	tok, _ := root.str("NextToken")
	offset, ok := parsePageToken(tok)
	if !ok {
		return 0, 0, invalidParameter("Invalid value '%s' for nextToken", tok)
	}
	return offset, max, nil
}

func (l *LaunchTemplates) describe(root *formNode, out *ltResponse) *apiError {
	ids := root.strList("LaunchTemplateId", false)
	names := root.strList("LaunchTemplateName", false)
	type filter struct {
		name   string
		values []string
	}
	var filters []filter
	for _, f := range root.list("Filter", false) {
		name, _ := f.str("Name")
		filters = append(filters, filter{name, f.strList("Value", false)})
	}
	offset, max, aerr := ec2Paging(root, 1, 200)
	if aerr != nil {
		return aerr
	}
	if aerr := unknownParameter(root); aerr != nil {
		return aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var picked []*launchTemplate
	if len(ids) > 0 || len(names) > 0 {
		for _, id := range ids {
			t, aerr := l.lookup(id, "")
			if aerr != nil {
				return aerr
			}
			picked = append(picked, t)
		}
		for _, name := range names {
			t, aerr := l.lookup("", name)
			if aerr != nil {
				return &apiError{http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist."}
			}
			picked = append(picked, t)
		}
	} else {
		for _, id := range slices.Sorted(maps.Keys(l.byID)) {
			picked = append(picked, l.byID[id])
		}
	}
	var matched []ltXML
	for _, t := range picked {
		ok := true
		for _, f := range filters {
			have, known := ltFilterValues(t, f.name)
			if !known {
				return invalidParameter("The filter '%s' is invalid", f.name)
			}
			ok = ok && slices.ContainsFunc(have, func(h string) bool {
				return slices.ContainsFunc(f.values, func(want string) bool { return globMatch(want, h) })
			})
		}
		if ok {
			matched = append(matched, *t.xml(l.AccountID))
		}
	}
	items, next := page(matched, offset, max)
	out.LaunchTemplates = &itemSet[ltXML]{Items: items}
	out.NextToken = next
	return nil
}

//nolint:gocyclo // one independent filter per query parameter.
func (l *LaunchTemplates) describeVersions(root *formNode, out *ltResponse) *apiError {
	id, _ := root.str("LaunchTemplateId")
	name, _ := root.str("LaunchTemplateName")
	versions := root.strList("LaunchTemplateVersion", false)
	minV, aerr := ec2Int(root, "MinVersion")
	if aerr != nil {
		return aerr
	}
	maxV, aerr := ec2Int(root, "MaxVersion")
	if aerr != nil {
		return aerr
	}
	if _, err := ec2Bool(root, "ResolveAlias"); err != nil {
		return err
	}
	offset, max, aerr := ec2Paging(root, 1, 200)
	if aerr != nil {
		return aerr
	}
	if aerr := unknownParameter(root); aerr != nil {
		return aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var found []ltVersionXML
	if id == "" && name == "" {
		// Account-wide: only $Latest and $Default make sense.
		if len(versions) == 0 {
			return &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter launchTemplateName or launchTemplateId, or the versions $Latest or $Default"}
		}
		for _, v := range versions {
			if v != "$Latest" && v != "$Default" {
				return invalidParameter("Without a launch template ID or name, only the versions $Latest and $Default can be described; got %q.", v)
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
			return aerr
		}
		var picked []*ltVersion
		if len(versions) > 0 {
			for _, s := range versions {
				v, aerr := t.version(s)
				if aerr != nil {
					return aerr
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
	items, next := page(found, offset, max)
	out.LaunchTemplateVersions = &itemSet[ltVersionXML]{Items: items}
	out.NextToken = next
	return nil
}

func (l *LaunchTemplates) modify(root *formNode, out *ltResponse) *apiError {
	id, _ := root.str("LaunchTemplateId")
	name, _ := root.str("LaunchTemplateName")
	def, hasDef := root.str("SetDefaultVersion")
	root.str("ClientToken")
	if aerr := unknownParameter(root); aerr != nil {
		return aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t, aerr := l.lookup(id, name)
	if aerr != nil {
		return aerr
	}
	if hasDef {
		v, aerr := t.version(def)
		if aerr != nil {
			return aerr
		}
		t.defaultVersion = v.number
	}
	out.LaunchTemplate = t.xml(l.AccountID)
	return nil
}

func (l *LaunchTemplates) delete(root *formNode, out *ltResponse) *apiError {
	id, _ := root.str("LaunchTemplateId")
	name, _ := root.str("LaunchTemplateName")
	if aerr := unknownParameter(root); aerr != nil {
		return aerr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t, aerr := l.lookup(id, name)
	if aerr != nil {
		return aerr
	}
	delete(l.byID, t.id)
	delete(l.byName, t.name)
	out.LaunchTemplate = t.xml(l.AccountID)
	return nil
}

// The XML of the launch template answers.

type ltResponse struct {
	XMLName                xml.Name
	Xmlns                  string                 `xml:"xmlns,attr"`
	RequestID              string                 `xml:"requestId"`
	LaunchTemplate         *ltXML                 `xml:"launchTemplate,omitempty"`
	LaunchTemplateVersion  *ltVersionXML          `xml:"launchTemplateVersion,omitempty"`
	LaunchTemplates        *itemSet[ltXML]        `xml:"launchTemplates,omitempty"`
	LaunchTemplateVersions *itemSet[ltVersionXML] `xml:"launchTemplateVersionSet,omitempty"`
	NextToken              string                 `xml:"nextToken,omitempty"`
}

type ltXML struct {
	CreateTime           string   `xml:"createTime"`
	CreatedBy            string   `xml:"createdBy"`
	DefaultVersionNumber int64    `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64    `xml:"latestVersionNumber"`
	LaunchTemplateID     string   `xml:"launchTemplateId"`
	LaunchTemplateName   string   `xml:"launchTemplateName"`
	Tags                 []EC2Tag `xml:"tagSet>item,omitempty"`
}

type ltVersionXML struct {
	CreateTime         string             `xml:"createTime"`
	CreatedBy          string             `xml:"createdBy"`
	DefaultVersion     bool               `xml:"defaultVersion"`
	LaunchTemplateData LaunchTemplateData `xml:"launchTemplateData"`
	LaunchTemplateID   string             `xml:"launchTemplateId"`
	LaunchTemplateName string             `xml:"launchTemplateName"`
	VersionDescription string             `xml:"versionDescription,omitempty"`
	VersionNumber      int64              `xml:"versionNumber"`
}

func createdBy(account string) string { return "arn:aws:iam::" + account + ":root" }

func (t *launchTemplate) xml(account string) *ltXML {
	return &ltXML{CreateTime: t.created.Format(ec2TimeFormat), CreatedBy: createdBy(account), DefaultVersionNumber: t.defaultVersion,
		LatestVersionNumber: t.latestVersion, LaunchTemplateID: t.id, LaunchTemplateName: t.name, Tags: slices.Clone(t.tags)}
}

func (t *launchTemplate) versionXML(v *ltVersion, account string) *ltVersionXML {
	return &ltVersionXML{CreateTime: v.created.Format(ec2TimeFormat), CreatedBy: createdBy(account), DefaultVersion: v.number == t.defaultVersion,
		LaunchTemplateData: v.data, LaunchTemplateID: t.id, LaunchTemplateName: t.name, VersionDescription: v.description, VersionNumber: v.number}
}
