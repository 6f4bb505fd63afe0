package iam

import (
	"encoding/base64"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/nodejoin/nodejoin/internal/identity"
	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
	"github.com/nodejoin/nodejoin/internal/localaws/sts"
)

// instanceRoles are the roles of an EC2 inventory's instances.
type instanceRoles []string

func (r instanceRoles) HasRole(role string) bool { return slices.Contains(r, role) }

// GetRole answers a role's unique ID, the same on every call and in GetInstanceProfile;
// a role deleted and created again under the same name has a new one, STS refuses the
// credentials of the old role and reports the new ID for new ones.
func TestIAMRoleIDsWithTheAWSClient(t *testing.T) {
	i := New(awstest.Account, instanceRoles{"nodes"})
	tokens := sts.New(awstest.Account)
	tokens.RoleIDs = i.RoleID
	client := newIAMClient(t, i)
	get := func() string {
		t.Helper()
		out, err := client.GetRole(t.Context(), &iam.GetRoleInput{RoleName: aws.String("nodes")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.Role.Arn) != "arn:aws:iam::111122223333:role/nodes" {
			t.Errorf("role = %+v", out.Role)
		}
		return aws.ToString(out.Role.RoleId)
	}
	first := get()
	if !regexp.MustCompile(`^AROA[0-9A-Z]{17}$`).MatchString(first) || get() != first {
		t.Fatalf("role ID %q is not a stable AROA… ID", first)
	}
	prof, err := client.GetInstanceProfile(t.Context(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("nodes")})
	if err != nil || aws.ToString(prof.InstanceProfile.Roles[0].RoleId) != first {
		t.Fatalf("GetInstanceProfile's role ID differs: %+v, %v", prof, err)
	}
	if _, err := client.GetRole(t.Context(), &iam.GetRoleInput{RoleName: aws.String("absent")}); err == nil || !strings.Contains(err.Error(), "NoSuchEntity") {
		t.Errorf("GetRole(absent) = %v, want NoSuchEntity", err)
	}
	old, err := tokens.InstanceCredentials("i-0aaaaaaaaaaaaaaaa", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	i.DeleteRole("nodes")
	second := get()
	if second == first {
		t.Fatalf("the re-created role kept ID %s", first)
	}
	if _, err := tokens.InstanceCredentials("i-0aaaaaaaaaaaaaaaa", "absent"); err == nil {
		t.Error("STS issued credentials for a role that does not exist")
	}
	fresh, err := tokens.InstanceCredentials("i-0aaaaaaaaaaaaaaaa", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(tokens)
	defer srv.Close()
	call := func(c sts.Credentials) (int, string) {
		token, _, err := identity.Mint(t.Context(), aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.Token)}, "demo")
		if err != nil {
			t.Fatal(err)
		}
		presigned, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, identity.Prefix))
		if err != nil {
			t.Fatal(err)
		}
		hr, err := http.NewRequestWithContext(t.Context(), http.MethodGet, string(presigned), nil)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set(identity.ClusterHeader, "demo")
		resp, err := srv.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := call(old); status != http.StatusForbidden || !strings.Contains(body, "InvalidClientTokenId") {
		t.Errorf("credentials of the deleted role: %d %s", status, body)
	}
	if status, body := call(fresh); status != http.StatusOK || !strings.Contains(body, "<UserId>"+second+":i-0aaaaaaaaaaaaaaaa</UserId>") {
		t.Errorf("credentials of the new role: %d %s", status, body)
	}
}

func newIAMClient(t *testing.T, i *IAM) *iam.Client {
	t.Helper()
	srv := httptest.NewServer(i)
	t.Cleanup(srv.Close)
	return iam.NewFromConfig(awstest.SDKConfig(), func(o *iam.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

func TestIAMErrorDocuments(t *testing.T) {
	i := New(awstest.Account, nil)
	for _, tt := range []struct {
		name, form string
		signed     bool
		status     int
		code       string
	}{
		{"unsigned", "Action=GetInstanceProfile&InstanceProfileName=x&Version=2010-05-08", false, 403, "MissingAuthenticationToken"},
		{"unknown action", "Action=ListRoles&Version=2010-05-08", true, 400, "InvalidAction"},
		{"unknown role", "Action=GetRole&RoleName=x&Version=2010-05-08", true, 404, "NoSuchEntity"},
		{"no profile name", "Action=GetInstanceProfile&Version=2010-05-08", true, 400, "ValidationError"},
		{"unknown profile", "Action=GetInstanceProfile&InstanceProfileName=x&Version=2010-05-08", true, 404, "NoSuchEntity"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := awstest.Post(t, i, tt.form, tt.signed)
			var doc struct {
				XMLName xml.Name `xml:"ErrorResponse"`
				Error   struct {
					Type    string `xml:"Type"`
					Code    string `xml:"Code"`
					Message string `xml:"Message"`
				} `xml:"Error"`
				RequestID string `xml:"RequestId"`
			}
			if err := xml.Unmarshal([]byte(body), &doc); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if status != tt.status || doc.Error.Code != tt.code || doc.Error.Type != "Sender" || doc.Error.Message == "" || doc.RequestID == "" {
				t.Errorf("got %d %s", status, body)
			}
		})
	}
}

// Arbitrary request bodies never panic IAM and always get one well-formed answer: the
// action's, or an error document.
func FuzzIAMRequest(f *testing.F) {
	for _, seed := range []string{
		"Action=GetInstanceProfile&InstanceProfileName=nodes&Version=2010-05-08",
		"Action=GetInstanceProfile&InstanceProfileName=%3Cx%3E&Version=2010-05-08",
		"Action=GetRole",
		"Action=CreateRole&RoleName=r&AssumeRolePolicyDocument=%7B%7D&Version=2010-05-08",
		"Action=AddRoleToInstanceProfile&RoleName=nodes&InstanceProfileName=nodes",
		"%zz",
	} {
		f.Add([]byte(seed))
	}
	i := New(awstest.Account, instanceRoles{"nodes"})
	f.Fuzz(func(t *testing.T, body []byte) {
		form, _ := url.ParseQuery(string(body))
		awstest.CheckQueryAnswer(t, awstest.FuzzRequest(t.Context(), i, body), form.Get("Action")+"Response", "ErrorResponse")
	})
}
