package localaws

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/nodejoin/nodejoin/internal/identity"
)

// GetRole answers a role's unique ID, the same on every call and in GetInstanceProfile;
// a role deleted and created again under the same name has a new one, STS refuses the
// credentials of the old role and reports the new ID for new ones.
func TestIAMRoleIDsWithTheAWSClient(t *testing.T) {
	e := testFleet(t)
	i := NewIAM(testAccount, e)
	sts := NewSTS(testAccount)
	sts.RoleIDs = i.RoleID
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
	old, err := sts.InstanceCredentials("i-0aaaaaaaaaaaaaaaa", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	i.DeleteRole("nodes")
	second := get()
	if second == first {
		t.Fatalf("the re-created role kept ID %s", first)
	}
	if _, err := sts.InstanceCredentials("i-0aaaaaaaaaaaaaaaa", "absent"); err == nil {
		t.Error("STS issued credentials for a role that does not exist")
	}
	fresh, err := sts.InstanceCredentials("i-0aaaaaaaaaaaaaaaa", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sts)
	defer srv.Close()
	call := func(c Credentials) (int, string) {
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
