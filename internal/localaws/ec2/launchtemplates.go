package ec2

// This file holds EC2 launch templates and their versions, and Resolve, through which
// Auto Scaling launches from a template version; launchtemplate_actions.go serves them.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// LaunchTemplates is the account's EC2 launch templates. Versions are numbered from 1
// in creation order and never change; $Latest and $Default are resolved when asked.
// ClientToken makes creation idempotent, as on EC2. Safe for concurrent use.
type LaunchTemplates struct {
	AccountID string
	now       func() time.Time

	mu      sync.Mutex
	table   map[string]protocol.Handler
	service *protocol.Service
	byID    map[string]*launchTemplate
	byName  map[string]string // name → ID
	tokens  map[string]templateTokenUse
	calls   int
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
	tags           []Tag
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
	l := &LaunchTemplates{AccountID: accountID, now: time.Now, byID: map[string]*launchTemplate{},
		byName: map[string]string{}, tokens: map[string]templateTokenUse{}}
	l.table = l.newTable()
	l.service = &protocol.Service{Dialect: protocol.EC2, Actions: l.table, WriteError: protocol.WriteEC2Error, Unsigned: errAuthFailure,
		Admit: func(*protocol.Request) *protocol.Error { l.count(); return nil }}
	return l
}

// count counts a request.
func (l *LaunchTemplates) count() {
	l.mu.Lock()
	l.calls++
	l.mu.Unlock()
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
		return ResolvedLaunchTemplate{}, fmt.Errorf("%s: %s", aerr.Code, aerr.Message)
	}
	v, aerr := t.version(version)
	if aerr != nil {
		return ResolvedLaunchTemplate{}, fmt.Errorf("%s: %s", aerr.Code, aerr.Message)
	}
	return ResolvedLaunchTemplate{ID: t.id, Name: t.name, Version: v.number, Data: v.data}, nil
}

var (
	ltNameRE = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)
	ltIDRE   = regexp.MustCompile(`^lt-[0-9a-f]{17}$`)
)

// lookup finds a template by ID or name (exactly one given).
func (l *LaunchTemplates) lookup(id, name string) (*launchTemplate, *protocol.Error) {
	switch {
	case id != "" && name != "":
		return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "InvalidParameterCombination", Message: "The parameters LaunchTemplateId and LaunchTemplateName cannot be used together. Specify one of them."}
	case id != "":
		if !ltIDRE.MatchString(id) {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateId.Malformed", "The specified ID for the launch template, %s, is not valid. The ID must be in the form lt- followed by 17 hexadecimal characters.", id)
		}
		t, ok := l.byID[id]
		if !ok {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
		return t, nil
	case name != "":
		id, ok := l.byName[name]
		if !ok {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
		return l.byID[id], nil
	}
	return nil, &protocol.Error{Status: http.StatusBadRequest, Code: "MissingParameter", Message: "The request must contain the parameter launchTemplateName or launchTemplateId"}
}

// version resolves a version string of t.
func (t *launchTemplate) version(s string) (*ltVersion, *protocol.Error) {
	var n int64
	switch s {
	case "", "$Default":
		n = t.defaultVersion
	case "$Latest":
		n = t.latestVersion
	default:
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil || n < 1 {
			return nil, protocol.InvalidParameter("Invalid launch template version: the version must be a positive number, $Latest or $Default; got %q.", s)
		}
	}
	v, ok := t.versions[n]
	if !ok {
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for launch template ID %s.", s, t.id)
	}
	return v, nil
}

func newLaunchTemplateID() string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return "lt-" + hex.EncodeToString(b)[:17]
}

// The XML of the launch template answers.

type ltXML struct {
	CreateTime           string `xml:"createTime"`
	CreatedBy            string `xml:"createdBy"`
	DefaultVersionNumber int64  `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64  `xml:"latestVersionNumber"`
	LaunchTemplateID     string `xml:"launchTemplateId"`
	LaunchTemplateName   string `xml:"launchTemplateName"`
	Tags                 []Tag  `xml:"tagSet>item,omitempty"`
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
	return &ltXML{CreateTime: t.created.Format(timeFormat), CreatedBy: createdBy(account), DefaultVersionNumber: t.defaultVersion,
		LatestVersionNumber: t.latestVersion, LaunchTemplateID: t.id, LaunchTemplateName: t.name, Tags: slices.Clone(t.tags)}
}

func (t *launchTemplate) versionXML(v *ltVersion, account string) *ltVersionXML {
	return &ltVersionXML{CreateTime: v.created.Format(timeFormat), CreatedBy: createdBy(account), DefaultVersion: v.number == t.defaultVersion,
		LaunchTemplateData: v.data, LaunchTemplateID: t.id, LaunchTemplateName: t.name, VersionDescription: v.description, VersionNumber: v.number}
}
