package localcloud

// This file holds the IAM endpoint: GetInstanceProfile for the account's instance
// profiles.

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"time"
)

// IAM answers IAM GetInstanceProfile (Query protocol) for the account's instance
// profiles: one named after each role of the EC2 inventory's instances (as instances'
// iamInstanceProfile ARNs name them), and those added with AddInstanceProfile. Requests
// must carry a SigV4 Authorization header, not checked further. Safe for concurrent use.
type IAM struct {
	AccountID string
	ec2       *EC2

	mu       sync.Mutex
	profiles map[string]string // profile name → role, "" for none
	calls    int
}

// NewIAM returns the IAM endpoint of an account; instances may be nil.
func NewIAM(accountID string, instances *EC2) *IAM {
	return &IAM{AccountID: accountID, ec2: instances, profiles: map[string]string{}}
}

var iamNameRE = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)

// AddInstanceProfile registers an instance profile holding a role ("" for none).
func (i *IAM) AddInstanceProfile(name, role string) error {
	if !iamNameRE.MatchString(name) || role != "" && !iamNameRE.MatchString(role) {
		return fmt.Errorf("instance profile %q or role %q is not a valid IAM name", name, role)
	}
	i.mu.Lock()
	i.profiles[name] = role
	i.mu.Unlock()
	return nil
}

// Calls counts the authenticated requests received.
func (i *IAM) Calls() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.calls
}

func (i *IAM) profile(name string) (role string, ok bool) {
	i.mu.Lock()
	role, ok = i.profiles[name]
	i.mu.Unlock()
	if ok {
		return role, true
	}
	if i.ec2 != nil && i.ec2.hasRole(name) {
		return name, true
	}
	return "", false
}

type iamErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

const iamXMLNS = "https://iam.amazonaws.com/doc/2010-05-08/"

func writeIAMError(w http.ResponseWriter, requestID string, e *apiError) {
	out := iamErrorResponse{Xmlns: iamXMLNS, RequestID: requestID}
	out.Error.Type, out.Error.Code, out.Error.Message = "Sender", e.code, e.message
	writeXML(w, e.status, out)
}

type iamRoleXML struct {
	Path                     string `xml:"Path"`
	RoleName                 string `xml:"RoleName"`
	RoleID                   string `xml:"RoleId"`
	ARN                      string `xml:"Arn"`
	CreateDate               string `xml:"CreateDate"`
	AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
}

type getInstanceProfileResponse struct {
	XMLName xml.Name `xml:"GetInstanceProfileResponse"`
	Xmlns   string   `xml:"xmlns,attr"`
	Result  struct {
		InstanceProfile struct {
			InstanceProfileID string `xml:"InstanceProfileId"`
			Roles             struct {
				Members []iamRoleXML `xml:"member"`
			} `xml:"Roles"`
			InstanceProfileName string `xml:"InstanceProfileName"`
			Path                string `xml:"Path"`
			ARN                 string `xml:"Arn"`
			CreateDate          string `xml:"CreateDate"`
		} `xml:"InstanceProfile"`
	} `xml:"GetInstanceProfileResult"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

// ec2AssumeRolePolicy is the trust policy of an instance role, URL-encoded as IAM returns it.
var ec2AssumeRolePolicy = url.QueryEscape(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)

// iamCreateDate is when the local account's IAM entities were created.
var iamCreateDate = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)

// ServeHTTP implements GetInstanceProfile.
func (i *IAM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID, form, ok := queryRequest(w, r, &apiError{http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token"}, writeIAMError)
	if !ok {
		return
	}
	i.mu.Lock()
	i.calls++
	i.mu.Unlock()
	if action := form.Get("Action"); action != "GetInstanceProfile" {
		writeIAMError(w, reqID, &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation %s for version %s", action, form.Get("Version"))})
		return
	}
	name := form.Get("InstanceProfileName")
	if !iamNameRE.MatchString(name) {
		writeIAMError(w, reqID, &apiError{http.StatusBadRequest, "ValidationError",
			fmt.Sprintf("1 validation error detected: Value '%s' at 'instanceProfileName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", name)})
		return
	}
	role, found := i.profile(name)
	if !found {
		writeIAMError(w, reqID, &apiError{http.StatusNotFound, "NoSuchEntity", fmt.Sprintf("Instance Profile %s cannot be found.", name)})
		return
	}
	out := getInstanceProfileResponse{Xmlns: iamXMLNS, RequestID: reqID}
	p := &out.Result.InstanceProfile
	p.InstanceProfileID, p.InstanceProfileName, p.Path = instanceProfileID(name), name, "/"
	p.ARN, p.CreateDate = instanceProfileARN(i.AccountID, name), iamCreateDate
	if role != "" {
		p.Roles.Members = []iamRoleXML{{
			Path: "/", RoleName: role, RoleID: RoleID(role), ARN: fmt.Sprintf("arn:aws:iam::%s:role/%s", i.AccountID, role),
			CreateDate: iamCreateDate, AssumeRolePolicyDocument: ec2AssumeRolePolicy,
		}}
	}
	writeXML(w, http.StatusOK, out)
}
