package imds

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/sts"
)

type staticCreds struct{}

func (staticCreds) InstanceCredentials(id, role string) (sts.Credentials, error) {
	return sts.Credentials{AccessKeyID: "ASIA" + id, SecretAccessKey: "secret", Token: "session-" + role, Expiration: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, nil
}

func testInstance() ec2.Instance {
	return ec2.Instance{
		ID: "i-0123456789abcdef0", Type: "m5.large", AvailabilityZone: "us-west-2a", Region: "us-west-2", AccountID: "111122223333",
		ImageID: "ami-0abc", PrivateIPv4: "198.18.0.11", PrivateDNSName: "ip-198-18-0-11.local.internal", MAC: "0e:49:61:0f:c3:11",
		SubnetID: "subnet-1", VPCID: "vpc-1", VPCIPv4CIDRs: []string{"198.18.0.0/24", "10.1.0.0/16"}, Role: "nodes",
		UserData: []byte("#!/bin/bash\necho hi\n"),
	}
}

// The real aws-sdk-go-v2 IMDS client, which nodeadm uses, talks to the emulator.
func TestIMDSWithTheAWSClient(t *testing.T) {
	srv := httptest.NewServer(New(testInstance(), staticCreds{}))
	defer srv.Close()
	client := imds.New(imds.Options{Endpoint: srv.URL})
	ctx := t.Context()
	get := func(path string) string {
		t.Helper()
		out, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
		if err != nil {
			t.Fatalf("GetMetadata(%s): %v", path, err)
		}
		defer func() { _ = out.Content.Close() }()
		b, err := io.ReadAll(out.Content)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	checks := map[string]string{
		"instance-id":                 "i-0123456789abcdef0",
		"instance-type":               "m5.large",
		"local-ipv4":                  "198.18.0.11",
		"mac":                         "0e:49:61:0f:c3:11",
		"placement/availability-zone": "us-west-2a",
		"network/interfaces/macs/0e:49:61:0f:c3:11/vpc-ipv4-cidr-blocks": "198.18.0.0/24\n10.1.0.0/16",
		"iam/security-credentials/":                                      "nodes",
		"placement/":                                                     "availability-zone\nregion",
	}
	for path, want := range checks {
		if got := get(path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if got := get("iam/security-credentials/nodes"); !strings.Contains(got, `"AccessKeyId": "ASIAi-0123456789abcdef0"`) || !strings.Contains(got, `"Token": "session-nodes"`) {
		t.Errorf("credentials = %s", got)
	}
	ud, err := client.GetUserData(ctx, &imds.GetUserDataInput{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(ud.Content)
	if string(b) != "#!/bin/bash\necho hi\n" {
		t.Errorf("user data = %q", b)
	}
	doc, err := client.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		t.Fatal(err)
	}
	if doc.InstanceID != "i-0123456789abcdef0" || doc.Region != "us-west-2" || doc.InstanceType != "m5.large" || doc.AccountID != "111122223333" {
		t.Errorf("identity document = %+v", doc)
	}
	region, err := client.GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil || region.Region != "us-west-2" {
		t.Errorf("region = %v, %v", region, err)
	}
	if _, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "no/such/path"}); err == nil {
		t.Error("unknown path answered")
	}
}

func TestIMDSRequiresAToken(t *testing.T) {
	srv := httptest.NewServer(New(testInstance(), nil))
	defer srv.Close()
	do := func(method, path string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do(http.MethodGet, "/latest/meta-data/instance-id", nil); code != http.StatusUnauthorized {
		t.Errorf("IMDSv1 GET = %d, want 401", code)
	}
	if code, _ := do(http.MethodGet, "/latest/meta-data/instance-id", map[string]string{tokenHeader: "forged"}); code != http.StatusUnauthorized {
		t.Errorf("forged token = %d, want 401", code)
	}
	for _, ttl := range []string{"", "0", "21601", "x"} {
		if code, _ := do(http.MethodPut, "/latest/api/token", map[string]string{tokenTTLHeader: ttl}); code != http.StatusBadRequest {
			t.Errorf("token with TTL %q = %d, want 400", ttl, code)
		}
	}
	if code, _ := do(http.MethodPut, "/latest/api/token", map[string]string{tokenTTLHeader: "60", "X-Forwarded-For": "1.2.3.4"}); code != http.StatusForbidden {
		t.Errorf("forwarded token request = %d, want 403", code)
	}
	_, token := do(http.MethodPut, "/latest/api/token", map[string]string{tokenTTLHeader: "1"})
	if code, body := do(http.MethodGet, "/latest/meta-data/instance-id", map[string]string{tokenHeader: token}); code != http.StatusOK || body != "i-0123456789abcdef0" {
		t.Errorf("with token = %d %q", code, body)
	}
	if code, _ := do(http.MethodGet, "/latest/meta-data/iam/security-credentials/nodes", map[string]string{tokenHeader: token}); code != http.StatusNotFound {
		t.Errorf("credentials without a credential source = %d, want 404", code)
	}
}

func TestIMDSTokenExpires(t *testing.T) {
	m := New(testInstance(), nil)
	now := time.Now()
	m.now = func() time.Time { return now }
	srv := httptest.NewServer(m)
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/latest/api/token", nil)
	req.Header.Set(tokenTTLHeader, "10")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !m.validToken(string(token)) {
		t.Fatal("fresh token invalid")
	}
	now = now.Add(11 * time.Second)
	if m.validToken(string(token)) {
		t.Error("token valid after its TTL")
	}
}
