package localaws

// The edge through the AWS SDK: every service on one HTTPS endpoint, signatures
// verified, STS's GetCallerIdentity and AssumeRole answering who called.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
	"github.com/nodejoin/nodejoin/internal/pki"
)

func startEdge(t *testing.T) *Cloud {
	t.Helper()
	ca, err := pki.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c, err := StartCloud(ctx, awstest.Account, ca, slog.New(slog.DiscardHandler), WithEdge("127.0.0.1:0"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = c.Wait() })
	if !strings.HasPrefix(c.EdgeURL, "https://127.0.0.1:") {
		t.Fatalf("EdgeURL %s", c.EdgeURL)
	}
	if err := c.IAM.AddInstanceProfile("nodes", "nodes"); err != nil {
		t.Fatal(err)
	}
	return c
}

// as is the SDK configuration of the edge with credentials.
func as(c *Cloud, akid, secret, token string) aws.Config {
	cfg := c.AdminConfig()
	cfg.RetryMaxAttempts = 1
	cfg.Credentials = credentials.NewStaticCredentialsProvider(akid, secret, token)
	return cfg
}

func TestEdgeAdminAndAssumeRole(t *testing.T) {
	c := startEdge(t)
	ctx := t.Context()
	admin := sts.NewFromConfig(c.AdminConfig())
	id, err := admin.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(id.Arn) != "arn:aws:iam::"+awstest.Account+":user/nodejoin-admin" || aws.ToString(id.Account) != awstest.Account ||
		!strings.HasPrefix(aws.ToString(id.UserId), "AIDA") {
		t.Errorf("admin identity %s %s %s", aws.ToString(id.Arn), aws.ToString(id.UserId), aws.ToString(id.Account))
	}
	roleARN := "arn:aws:iam::" + awstest.Account + ":role/nodes"
	out, err := admin.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(roleARN), RoleSessionName: aws.String("me"), DurationSeconds: aws.Int32(900)})
	if err != nil {
		t.Fatal(err)
	}
	wantARN := "arn:aws:sts::" + awstest.Account + ":assumed-role/nodes/me"
	if aws.ToString(out.AssumedRoleUser.Arn) != wantARN || !strings.HasSuffix(aws.ToString(out.AssumedRoleUser.AssumedRoleId), ":me") {
		t.Errorf("assumed role user %+v", out.AssumedRoleUser)
	}
	if d := time.Until(aws.ToTime(out.Credentials.Expiration)); d < 14*time.Minute || d > 15*time.Minute {
		t.Errorf("expires in %s, want 15m", d)
	}
	cr := out.Credentials
	session := as(c, aws.ToString(cr.AccessKeyId), aws.ToString(cr.SecretAccessKey), aws.ToString(cr.SessionToken))
	id, err = sts.NewFromConfig(session).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(id.Arn) != wantARN {
		t.Fatalf("session identity %v, %v", id, err)
	}
	// The session works with every service of the edge.
	if _, err := ec2.NewFromConfig(session).DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("EC2 with the session: %v", err)
	}
	if _, err := iam.NewFromConfig(session).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("nodes")}); err != nil {
		t.Errorf("IAM with the session: %v", err)
	}
	if _, err := autoscaling.NewFromConfig(session).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{}); err != nil {
		t.Errorf("Auto Scaling with the session: %v", err)
	}
	// Without its token, or with another, the session is refused.
	noToken := as(c, aws.ToString(cr.AccessKeyId), aws.ToString(cr.SecretAccessKey), "")
	_, err = sts.NewFromConfig(noToken).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if code, status := awstest.APICode(t, err); code != "InvalidClientTokenId" || status != 403 {
		t.Errorf("session without token: %s %d", code, status)
	}
	// A session may not assume a role through the account's trust (it holds no
	// permission to), nor chain beyond an hour where a trust policy names its role.
	_, err = sts.NewFromConfig(session).AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(roleARN), RoleSessionName: aws.String("again")})
	if code, _ := awstest.APICode(t, err); code != "AccessDenied" || !strings.Contains(err.Error(), wantARN) || !strings.Contains(err.Error(), roleARN) {
		t.Errorf("chained assume: %v", err)
	}
	if err := c.IAM.SetTrustPolicy("nodes", `{"Statement":{"Effect":"Allow","Principal":{"AWS":["`+roleARN+`"]},"Action":["sts:Assume*"]}}`); err != nil {
		t.Fatal(err)
	}
	_, err = sts.NewFromConfig(session).AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(roleARN), RoleSessionName: aws.String("again"), DurationSeconds: aws.Int32(7200)})
	if code, _ := awstest.APICode(t, err); code != "ValidationError" || !strings.Contains(err.Error(), "role chaining") {
		t.Errorf("chaining beyond an hour: %v", err)
	}
	if _, err := sts.NewFromConfig(session).AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(roleARN), RoleSessionName: aws.String("again")}); err != nil {
		t.Errorf("chained assume allowed by the role's ARN: %v", err)
	}
	// The admin is no longer trusted.
	_, err = admin.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(roleARN), RoleSessionName: aws.String("me")})
	if code, status := awstest.APICode(t, err); code != "AccessDenied" || status != 403 {
		t.Errorf("admin after the trust policy changed: %v", err)
	}
}

func TestEdgeAssumeRoleValidation(t *testing.T) {
	c := startEdge(t)
	admin := sts.NewFromConfig(c.AdminConfig())
	role := "arn:aws:iam::" + awstest.Account + ":role/nodes"
	for _, tc := range []struct {
		name      string
		in        sts.AssumeRoleInput
		code, has string
	}{
		{"no role", sts.AssumeRoleInput{RoleArn: aws.String(""), RoleSessionName: aws.String("s")}, "ValidationError", "roleArn"},
		{"no session name", sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("")}, "ValidationError", "roleSessionName"},
		{"bad session name", sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("a b")}, "ValidationError", "roleSessionName"},
		{"too short", sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("s1"), DurationSeconds: aws.Int32(899)}, "ValidationError", "durationSeconds"},
		{"too long", sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("s1"), DurationSeconds: aws.Int32(43201)}, "ValidationError", "durationSeconds"},
		{"unknown role", sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::" + awstest.Account + ":role/none"), RoleSessionName: aws.String("s1")}, "AccessDenied", "role/none"},
		{"other account", sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::999999999999:role/nodes"), RoleSessionName: aws.String("s1")}, "AccessDenied", "999999999999"},
		{"unsupported parameter", sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("s1"), ExternalId: aws.String("x")}, "", "ExternalId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := admin.AssumeRole(t.Context(), &tc.in)
			if err == nil {
				t.Fatal("accepted")
			}
			if code, _ := awstest.APICode(t, err); tc.code != "" && code != tc.code || !strings.Contains(err.Error(), tc.has) {
				t.Errorf("got %v, want %s naming %s", err, tc.code, tc.has)
			}
		})
	}
	if _, err := admin.AssumeRole(t.Context(), &sts.AssumeRoleInput{RoleArn: aws.String(role), RoleSessionName: aws.String("s1"), DurationSeconds: aws.Int32(43200)}); err != nil {
		t.Errorf("12 hours: %v", err)
	}
}

func TestEdgeRefusals(t *testing.T) {
	c := startEdge(t)
	ctx := t.Context()
	unknown := as(c, "AKIANOBODY0000000000", "secret", "")
	_, err := sts.NewFromConfig(unknown).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if code, status := awstest.APICode(t, err); code != "InvalidClientTokenId" || status != 403 {
		t.Errorf("STS, unknown key: %s %d", code, status)
	}
	_, err = ec2.NewFromConfig(unknown).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if code, status := awstest.APICode(t, err); code != "AuthFailure" || status != 401 {
		t.Errorf("EC2, unknown key: %s %d", code, status)
	}
	wrong := as(c, c.Admin.AccessKeyID, "not-the-secret", "")
	_, err = iam.NewFromConfig(wrong).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("nodes")})
	if code, status := awstest.APICode(t, err); code != "SignatureDoesNotMatch" || status != 403 {
		t.Errorf("IAM, wrong secret: %s %d", code, status)
	}
	if strings.Contains(err.Error(), c.Admin.SecretAccessKey) {
		t.Error("the error shows the secret")
	}
	// EKS is not served until routed; then it is, with the caller in the context.
	_, err = eks.NewFromConfig(c.AdminConfig()).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("c")})
	if code, _ := awstest.APICode(t, err); code != "UnknownOperationException" || !strings.Contains(err.Error(), `"eks"`) {
		t.Errorf("EKS unrouted: %v", err)
	}
	c.Edge.Route("eks", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, _ := protocol.CallerFrom(r.Context())
		protocol.WriteJSONError(w, protocol.Errorf(404, "ResourceNotFoundException", "caller %s", caller.ARN))
	}))
	_, err = eks.NewFromConfig(c.AdminConfig()).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("c")})
	if code, _ := awstest.APICode(t, err); code != "ResourceNotFoundException" || !strings.Contains(err.Error(), c.Admin.ARN) {
		t.Errorf("EKS routed: %v", err)
	}
	_, err = eks.NewFromConfig(unknown).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("c")})
	if code, status := awstest.APICode(t, err); code != "UnrecognizedClientException" || status != 403 {
		t.Errorf("EKS, unknown key: %s %d", code, status)
	}
	// Unsigned.
	unsigned, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.EdgeURL, strings.NewReader(url.Values{"Action": {"GetCallerIdentity"}, "Version": {"2011-06-15"}}.Encode()))
	unsigned.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.STSHTTPClient().Do(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("unsigned: %d", resp.StatusCode)
	}
	// Expired instance credentials.
	c.STS.CredentialLifetime = time.Millisecond
	cr, err := c.STS.InstanceCredentials("i-0123", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	_, err = ec2.NewFromConfig(as(c, cr.AccessKeyID, cr.SecretAccessKey, cr.Token)).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if code, _ := awstest.APICode(t, err); code != "ExpiredToken" {
		t.Errorf("expired: %v", err)
	}
}

// Instance role credentials (ipamd's) work through the edge, and node identity tokens
// (presigned GetCallerIdentity) still reach STS, which verifies them itself.
func TestEdgeInstanceCredentialsAndPresignedTokens(t *testing.T) {
	c := startEdge(t)
	cr, err := c.STS.InstanceCredentials("i-0123", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	cfg := as(c, cr.AccessKeyID, cr.SecretAccessKey, cr.Token)
	if _, err := ec2.NewFromConfig(cfg).DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("EC2 with instance credentials: %v", err)
	}
	p, err := sts.NewPresignClient(sts.NewFromConfig(cfg)).PresignGetCallerIdentity(t.Context(), &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), p.Method, p.URL, nil)
	req.Header = p.SignedHeader
	resp, err := c.STSHTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "assumed-role/nodes/i-0123") {
		t.Errorf("presigned: %d %s", resp.StatusCode, body)
	}
	// The admin's credentials, in JSON as the sandbox writes them, do not carry a token.
	b, _ := json.Marshal(c.Admin)
	if !strings.Contains(string(b), `"userName":"nodejoin-admin"`) {
		t.Errorf("admin JSON %s", b)
	}
}
