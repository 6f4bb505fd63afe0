package localaws

// This file holds the IAM endpoint: GetInstanceProfile for the account's instance
// profiles, GetRole for their roles.

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"time"
)

// IAM answers IAM GetInstanceProfile and GetRole (Query protocol) for the account's
// instance profiles and roles: a profile named after each role of the EC2 inventory's
// instances (as instances' iamInstanceProfile ARNs name them), and those added with
// AddInstanceProfile. Requests must carry a SigV4 Authorization header, not checked
// further. Safe for concurrent use.
//
// A role exists while an instance or a profile names it. As in AWS, it has a unique ID
// (RoleId, AROA…) drawn at random when it is created, here when it is first looked up;
// DeleteRole deletes it, so that the next use of the name creates a new role with a new
// ID, as deleting and re-creating a role under the same ARN does in AWS.
type IAM struct {
	AccountID string
	ec2       *EC2

	mu       sync.Mutex
	profiles map[string]string // profile name → role, "" for none
	roleIDs  map[string]string // role name → unique ID
	calls    int
}

// NewIAM returns the IAM endpoint of an account; instances may be nil.
func NewIAM(accountID string, instances *EC2) *IAM {
	return &IAM{AccountID: accountID, ec2: instances, profiles: map[string]string{}, roleIDs: map[string]string{}}
}

// RoleID returns the unique ID of a role, creating the role when the name is in use
// but has no ID yet; false when no instance or profile names the role.
func (i *IAM) RoleID(role string) (string, bool) {
	if !i.roleExists(role) {
		return "", false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if id, ok := i.roleIDs[role]; ok {
		return id, true
	}
	suffix, err := randomString(17, true)
	if err != nil {
		return "", false
	}
	id := "AROA" + suffix
	i.roleIDs[role] = id
	return id, true
}

// DeleteRole deletes a role: its unique ID is forgotten, credentials issued for it stop
// working (STS refuses them), and the name's next use creates a new role with a new ID.
func (i *IAM) DeleteRole(role string) {
	i.mu.Lock()
	delete(i.roleIDs, role)
	i.mu.Unlock()
}

func (i *IAM) roleExists(role string) bool {
	i.mu.Lock()
	for _, r := range i.profiles {
		if r == role && role != "" {
			i.mu.Unlock()
			return true
		}
	}
	i.mu.Unlock()
	return role != "" && i.ec2 != nil && i.ec2.hasRole(role)
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

type getRoleResponse struct {
	XMLName   xml.Name   `xml:"GetRoleResponse"`
	Xmlns     string     `xml:"xmlns,attr"`
	Role      iamRoleXML `xml:"GetRoleResult>Role"`
	RequestID string     `xml:"ResponseMetadata>RequestId"`
}

// roleXML describes a role that exists.
func (i *IAM) roleXML(role, id string) iamRoleXML {
	return iamRoleXML{
		Path: "/", RoleName: role, RoleID: id, ARN: fmt.Sprintf("arn:aws:iam::%s:role/%s", i.AccountID, role),
		CreateDate: iamCreateDate, AssumeRolePolicyDocument: ec2AssumeRolePolicy,
	}
}

// ServeHTTP implements GetInstanceProfile and GetRole.
func (i *IAM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID, form, ok := queryRequest(w, r, &apiError{http.StatusForbidden, "MissingAuthenticationToken", "Request is missing Authentication Token"}, writeIAMError)
	if !ok {
		return
	}
	i.mu.Lock()
	i.calls++
	i.mu.Unlock()
	if form.Get("Action") == "GetRole" {
		i.getRole(w, reqID, form.Get("RoleName"))
		return
	}
	if action := form.Get("Action"); action != "GetInstanceProfile" {
		writeIAMError(w, reqID, &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("Could not find operation %s for version %s", action, form.Get("Version"))})
		return
	}
	name := form.Get("InstanceProfileName")
	if err := checkIAMName("instanceProfileName", name); err != nil {
		writeIAMError(w, reqID, err)
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
	if id, ok := i.RoleID(role); ok {
		p.Roles.Members = []iamRoleXML{i.roleXML(role, id)}
	}
	writeXML(w, http.StatusOK, out)
}

func (i *IAM) getRole(w http.ResponseWriter, reqID, name string) {
	if err := checkIAMName("roleName", name); err != nil {
		writeIAMError(w, reqID, err)
		return
	}
	id, ok := i.RoleID(name)
	if !ok {
		writeIAMError(w, reqID, &apiError{http.StatusNotFound, "NoSuchEntity", fmt.Sprintf("The role with name %s cannot be found.", name)})
		return
	}
	writeXML(w, http.StatusOK, getRoleResponse{Xmlns: iamXMLNS, Role: i.roleXML(name, id), RequestID: reqID})
}

// checkIAMName refuses a name IAM's pattern does not allow, with IAM's ValidationError
// naming the parameter.
func checkIAMName(param, name string) *apiError {
	if iamNameRE.MatchString(name) {
		return nil
	}
	return &apiError{http.StatusBadRequest, "ValidationError",
		fmt.Sprintf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", name, param)}
}
