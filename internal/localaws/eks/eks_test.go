package eks

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseks "github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/nodejoin/nodejoin/internal/localaws/internal/awstest"
)

// serve starts the server over a fake backend and returns an SDK client of it.
func serve(t *testing.T) (*awseks.Client, *fake, *EKS, string) {
	t.Helper()
	f := newFake()
	e := NewWithBackend(f, nil)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	c := awseks.NewFromConfig(awstest.SDKConfig(), func(o *awseks.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	return c, f, e, srv.URL
}

const role = "arn:aws:iam::000000000000:role/demo-node"

func createInput(name string) *awseks.CreateNodegroupInput {
	return &awseks.CreateNodegroupInput{
		ClusterName: aws.String("demo"), NodegroupName: aws.String(name), NodeRole: aws.String(role),
		Subnets:       []string{"subnet-0123456789abcdef0"},
		ScalingConfig: &ekstypes.NodegroupScalingConfig{MinSize: aws.Int32(1), MaxSize: aws.Int32(3), DesiredSize: aws.Int32(2)},
		InstanceTypes: []string{"m5.large"}, AmiType: ekstypes.AMITypesAl2023X8664Standard,
		Labels: map[string]string{"team": "web"}, Taints: []ekstypes.Taint{{Key: aws.String("dedicated"), Value: aws.String("web"), Effect: ekstypes.TaintEffectNoSchedule}},
		Tags: map[string]string{"owner": "me"},
	}
}

func TestClusters(t *testing.T) {
	c, _, _, _ := serve(t)
	ctx := t.Context()
	l, err := c.ListClusters(ctx, &awseks.ListClustersInput{})
	if err != nil || len(l.Clusters) != 1 || l.Clusters[0] != "demo" {
		t.Fatalf("ListClusters = %+v, %v", l, err)
	}
	d, err := c.DescribeCluster(ctx, &awseks.DescribeClusterInput{Name: aws.String("demo")})
	if err != nil {
		t.Fatal(err)
	}
	cl := d.Cluster
	if cl.ResourcesVpcConfig == nil || aws.ToString(cl.ResourcesVpcConfig.VpcId) != "vpc-01234567" || !cl.CreatedAt.Equal(created.Time) ||
		cl.AccessConfig.AuthenticationMode != ekstypes.AuthenticationModeApiAndConfigMap || aws.ToString(cl.KubernetesNetworkConfig.ServiceIpv4Cidr) != "10.100.0.0/16" {
		t.Errorf("DescribeCluster = %+v", cl)
	}
	v, err := c.DescribeClusterVersions(ctx, &awseks.DescribeClusterVersionsInput{})
	if err != nil || len(v.ClusterVersions) != 2 || !v.ClusterVersions[1].DefaultVersion || !v.ClusterVersions[1].ReleaseDate.Equal(created.Time) {
		t.Fatalf("DescribeClusterVersions = %+v, %v", v, err)
	}
	v, err = c.DescribeClusterVersions(ctx, &awseks.DescribeClusterVersionsInput{DefaultOnly: aws.Bool(true)})
	if err != nil || len(v.ClusterVersions) != 1 || aws.ToString(v.ClusterVersions[0].ClusterVersion) != "1.37" {
		t.Errorf("DescribeClusterVersions(defaultOnly) = %+v, %v", v, err)
	}
	_, err = c.DescribeCluster(ctx, &awseks.DescribeClusterInput{Name: aws.String("absent")})
	var nf *ekstypes.ResourceNotFoundException
	if code, status := awstest.APICode(t, err); code != "ResourceNotFoundException" || status != http.StatusNotFound || !strings.Contains(err.Error(), "absent") {
		t.Errorf("DescribeCluster(absent) = %v (%s, %d)", err, code, status)
	} else if !errors.As(err, &nf) {
		t.Errorf("DescribeCluster(absent) is no ResourceNotFoundException: %T", err)
	}
}

func TestNodegroupLifecycle(t *testing.T) {
	c, _, _, _ := serve(t)
	ctx := t.Context()
	out, err := c.CreateNodegroup(ctx, createInput("ng-1"))
	if err != nil {
		t.Fatal(err)
	}
	ng := out.Nodegroup
	if aws.ToString(ng.NodegroupName) != "ng-1" || ng.Status != ekstypes.NodegroupStatusCreating || !ng.CreatedAt.Equal(created.Time) ||
		ng.Labels["team"] != "web" || ng.Taints[0].Effect != ekstypes.TaintEffectNoSchedule || ng.Tags["owner"] != "me" || aws.ToInt32(ng.ScalingConfig.DesiredSize) != 2 {
		t.Errorf("CreateNodegroup = %+v", ng)
	}
	_, err = c.CreateNodegroup(ctx, createInput("ng-1"))
	if code, status := awstest.APICode(t, err); code != "ResourceInUseException" || status != http.StatusConflict {
		t.Errorf("second CreateNodegroup = %v", err)
	}
	d, err := c.DescribeNodegroup(ctx, &awseks.DescribeNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1")})
	if err != nil || aws.ToString(d.Nodegroup.NodeRole) != role {
		t.Fatalf("DescribeNodegroup = %+v, %v", d, err)
	}

	u, err := c.UpdateNodegroupConfig(ctx, &awseks.UpdateNodegroupConfigInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1"),
		ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(3)}})
	if err != nil || u.Update.Status != ekstypes.UpdateStatusInProgress || u.Update.Type != ekstypes.UpdateTypeConfigUpdate ||
		u.Update.Params[0].Type != ekstypes.UpdateParamTypeDesiredSize || aws.ToString(u.Update.Params[0].Value) != "3" {
		t.Fatalf("UpdateNodegroupConfig = %+v, %v", u, err)
	}
	v, err := c.UpdateNodegroupVersion(ctx, &awseks.UpdateNodegroupVersionInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1"),
		ReleaseVersion: aws.String("1.37.0-20261127"), Force: true})
	if err != nil || v.Update.Type != ekstypes.UpdateTypeVersionUpdate {
		t.Fatalf("UpdateNodegroupVersion = %+v, %v", v, err)
	}
	du, err := c.DescribeUpdate(ctx, &awseks.DescribeUpdateInput{Name: aws.String("demo"), NodegroupName: aws.String("ng-1"), UpdateId: v.Update.Id})
	if err != nil || aws.ToString(du.Update.Id) != aws.ToString(v.Update.Id) || !du.Update.CreatedAt.Equal(created.Time) {
		t.Fatalf("DescribeUpdate = %+v, %v", du, err)
	}
	_, err = c.DescribeUpdate(ctx, &awseks.DescribeUpdateInput{Name: aws.String("demo"), UpdateId: v.Update.Id})
	if code, _ := awstest.APICode(t, err); code != "InvalidParameterException" || !strings.Contains(err.Error(), "nodegroupName") {
		t.Errorf("DescribeUpdate without nodegroupName = %v", err)
	}
	lu, err := c.ListUpdates(ctx, &awseks.ListUpdatesInput{Name: aws.String("demo"), NodegroupName: aws.String("ng-1"), MaxResults: aws.Int32(1)})
	if err != nil || len(lu.UpdateIds) != 1 || lu.NextToken == nil {
		t.Fatalf("ListUpdates page 1 = %+v, %v", lu, err)
	}
	lu, err = c.ListUpdates(ctx, &awseks.ListUpdatesInput{Name: aws.String("demo"), NodegroupName: aws.String("ng-1"), NextToken: lu.NextToken})
	if err != nil || len(lu.UpdateIds) != 1 || lu.NextToken != nil || lu.UpdateIds[0] != aws.ToString(v.Update.Id) {
		t.Fatalf("ListUpdates page 2 = %+v, %v", lu, err)
	}

	del, err := c.DeleteNodegroup(ctx, &awseks.DeleteNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1")})
	if err != nil || del.Nodegroup.Status != ekstypes.NodegroupStatusDeleting {
		t.Fatalf("DeleteNodegroup = %+v, %v", del, err)
	}
	_, err = c.DescribeNodegroup(ctx, &awseks.DescribeNodegroupInput{ClusterName: aws.String("demo"), NodegroupName: aws.String("ng-1")})
	if code, status := awstest.APICode(t, err); code != "ResourceNotFoundException" || status != http.StatusNotFound {
		t.Errorf("DescribeNodegroup after delete = %v", err)
	}
}

// ListNodegroups pages with maxResults and nextToken, through the SDK's paginator.
func TestListNodegroupsPages(t *testing.T) {
	c, _, _, _ := serve(t)
	ctx := t.Context()
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if _, err := c.CreateNodegroup(ctx, createInput(n)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	pages := 0
	p := awseks.NewListNodegroupsPaginator(c, &awseks.ListNodegroupsInput{ClusterName: aws.String("demo"), MaxResults: aws.Int32(2)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, out.Nodegroups...)
	}
	if pages != 3 || strings.Join(got, ",") != "a,b,c,d,e" {
		t.Errorf("%d pages: %v", pages, got)
	}
	for _, in := range []*awseks.ListNodegroupsInput{
		{ClusterName: aws.String("demo"), MaxResults: aws.Int32(0)},
		{ClusterName: aws.String("demo"), MaxResults: aws.Int32(101)},
		{ClusterName: aws.String("demo"), NextToken: aws.String("forged")},
	} {
		_, err := c.ListNodegroups(ctx, in)
		if code, _ := awstest.APICode(t, err); code != "InvalidParameterException" || !strings.Contains(err.Error(), "maxResults") && !strings.Contains(err.Error(), "nextToken") {
			t.Errorf("ListNodegroups(%+v) = %v", in, err)
		}
	}
}

// Every malformed CreateNodegroup is refused as InvalidParameterException naming the
// parameter, before it reaches the backend.
func TestCreateNodegroupRefusals(t *testing.T) {
	c, f, _, _ := serve(t)
	for _, tc := range []struct {
		name, want string
		mutate     func(in *awseks.CreateNodegroupInput)
	}{
		{"name", "nodegroupName", func(in *awseks.CreateNodegroupInput) { in.NodegroupName = aws.String("-bad") }},
		{"role", "nodeRole", func(in *awseks.CreateNodegroupInput) { in.NodeRole = aws.String("arn:aws:iam::000000000000:user/me") }},
		{"launch template id and name", "launchTemplate: give either id (lt-0123456789abcdef0) or name (mine), not both", func(in *awseks.CreateNodegroupInput) {
			in.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Id: aws.String("lt-0123456789abcdef0"), Name: aws.String("mine")}
		}},
		{"launch template neither", "launchTemplate: give the launch template's id or name", func(in *awseks.CreateNodegroupInput) {
			in.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Version: aws.String("1")}
		}},
		{"launch template id", "launchTemplate.id", func(in *awseks.CreateNodegroupInput) {
			in.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Id: aws.String("template-1")}
		}},
		{"launch template version", "launchTemplate.version: \"latest\"", func(in *awseks.CreateNodegroupInput) {
			in.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Name: aws.String("mine"), Version: aws.String("latest")}
		}},
		{"disk size with launch template", "Disk size must be specified within the launch template", func(in *awseks.CreateNodegroupInput) {
			in.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Name: aws.String("mine")}
			in.DiskSize = aws.Int32(50)
		}},
		{"custom without launch template", "amiType: CUSTOM needs a launchTemplate", func(in *awseks.CreateNodegroupInput) { in.AmiType = ekstypes.AMITypesCustom }},
		{"remote access", "remoteAccess", func(in *awseks.CreateNodegroupInput) {
			in.RemoteAccess = &ekstypes.RemoteAccessConfig{Ec2SshKey: aws.String("k")}
		}},
		{"arm", "amiType", func(in *awseks.CreateNodegroupInput) { in.AmiType = ekstypes.AMITypesAl2023Arm64Standard }},
		{"capacity", "capacityType", func(in *awseks.CreateNodegroupInput) { in.CapacityType = ekstypes.CapacityTypesCapacityBlock }},
		{"sizes", "scalingConfig", func(in *awseks.CreateNodegroupInput) { in.ScalingConfig.MinSize = aws.Int32(5) }},
		{"negative", "scalingConfig.minSize", func(in *awseks.CreateNodegroupInput) { in.ScalingConfig.MinSize = aws.Int32(-1) }},
		{"subnet", "subnets", func(in *awseks.CreateNodegroupInput) { in.Subnets = []string{"sub-1"} }},
		{"instance type", "instanceTypes", func(in *awseks.CreateNodegroupInput) { in.InstanceTypes = []string{"M5 LARGE"} }},
		{"taint", "taints", func(in *awseks.CreateNodegroupInput) { in.Taints[0].Effect = "NoSchedule" }},
		{"tag", "tags", func(in *awseks.CreateNodegroupInput) { in.Tags = map[string]string{"aws:x": "y"} }},
		{"update config", "updateConfig", func(in *awseks.CreateNodegroupInput) {
			in.UpdateConfig = &ekstypes.NodegroupUpdateConfig{MaxUnavailable: aws.Int32(1), MaxUnavailablePercentage: aws.Int32(10)}
		}},
		{"strategy", "updateStrategy", func(in *awseks.CreateNodegroupInput) {
			in.UpdateConfig = &ekstypes.NodegroupUpdateConfig{MaxUnavailable: aws.Int32(1), UpdateStrategy: "FAST"}
		}},
		{"version", "version", func(in *awseks.CreateNodegroupInput) { in.Version = aws.String("latest") }},
		{"disk", "diskSize", func(in *awseks.CreateNodegroupInput) { in.DiskSize = aws.Int32(0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := createInput("ng-" + strings.ReplaceAll(tc.name, " ", "-"))
			tc.mutate(in)
			before := f.reached
			_, err := c.CreateNodegroup(t.Context(), in)
			code, status := awstest.APICode(t, err)
			if code != "InvalidParameterException" || status != http.StatusBadRequest || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CreateNodegroup = %v (%s, %d); want InvalidParameterException naming %s", err, code, status, tc.want)
			}
			if f.reached != before {
				t.Errorf("a refused request reached the backend")
			}
		})
	}
}

func TestUpdateRefusals(t *testing.T) {
	c, f, _, _ := serve(t)
	ctx := t.Context()
	if _, err := c.CreateNodegroup(ctx, createInput("ng")); err != nil {
		t.Fatal(err)
	}
	key := func(in *awseks.UpdateNodegroupConfigInput) *awseks.UpdateNodegroupConfigInput {
		in.ClusterName, in.NodegroupName = aws.String("demo"), aws.String("ng")
		return in
	}
	for _, tc := range []struct {
		want string
		in   *awseks.UpdateNodegroupConfigInput
	}{
		{"at least one", key(&awseks.UpdateNodegroupConfigInput{})},
		{"scalingConfig", key(&awseks.UpdateNodegroupConfigInput{ScalingConfig: &ekstypes.NodegroupScalingConfig{}})},
		{"desired capacity 5 can't be greater than maximum capacity 3", key(&awseks.UpdateNodegroupConfigInput{ScalingConfig: &ekstypes.NodegroupScalingConfig{MaxSize: aws.Int32(3), DesiredSize: aws.Int32(5)}})},
		{"both in addOrUpdateLabels and in removeLabels", key(&awseks.UpdateNodegroupConfigInput{Labels: &ekstypes.UpdateLabelsPayload{AddOrUpdateLabels: map[string]string{"a": "b"}, RemoveLabels: []string{"a"}}})},
		{"taints.addOrUpdateTaints", key(&awseks.UpdateNodegroupConfigInput{Taints: &ekstypes.UpdateTaintsPayload{AddOrUpdateTaints: []ekstypes.Taint{{Key: aws.String("k"), Effect: "BAD"}}}})},
		{"nodeRepairConfig", key(&awseks.UpdateNodegroupConfigInput{NodeRepairConfig: &ekstypes.NodeRepairConfig{Enabled: aws.Bool(true)}})},
	} {
		before := f.reached
		_, err := c.UpdateNodegroupConfig(ctx, tc.in)
		if code, _ := awstest.APICode(t, err); code != "InvalidParameterException" || !strings.Contains(err.Error(), tc.want) || f.reached != before {
			t.Errorf("UpdateNodegroupConfig = %v; want InvalidParameterException saying %q, not reaching the backend", err, tc.want)
		}
	}
	for _, in := range []*awseks.UpdateNodegroupVersionInput{
		{Version: aws.String("one")},
		{LaunchTemplate: &ekstypes.LaunchTemplateSpecification{Name: aws.String("lt")}},
		{LaunchTemplate: &ekstypes.LaunchTemplateSpecification{Name: aws.String("mine"), Id: aws.String("lt-0123456789abcdef0")}},
		{LaunchTemplate: &ekstypes.LaunchTemplateSpecification{Name: aws.String("mine"), Version: aws.String("v2")}},
	} {
		in.ClusterName, in.NodegroupName = aws.String("demo"), aws.String("ng")
		_, err := c.UpdateNodegroupVersion(ctx, in)
		if code, _ := awstest.APICode(t, err); code != "InvalidParameterException" {
			t.Errorf("UpdateNodegroupVersion(%+v) = %v", in, err)
		}
	}
}

func TestAccessEntries(t *testing.T) {
	c, _, _, _ := serve(t)
	ctx := t.Context()
	arn := "arn:aws:iam::000000000000:role/path/to/demo-node"
	out, err := c.CreateAccessEntry(ctx, &awseks.CreateAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn), Type: aws.String("EC2_LINUX")})
	if err != nil || aws.ToString(out.AccessEntry.PrincipalArn) != arn || !out.AccessEntry.CreatedAt.Equal(created.Time) {
		t.Fatalf("CreateAccessEntry = %+v, %v", out, err)
	}
	for _, tc := range []struct {
		want string
		in   awseks.CreateAccessEntryInput
	}{
		{"system:masters", awseks.CreateAccessEntryInput{PrincipalArn: aws.String(arn), KubernetesGroups: []string{"admins", "system:masters"}}},
		{"starts with nodejoin:", awseks.CreateAccessEntryInput{PrincipalArn: aws.String(arn), Type: aws.String("STANDARD"), KubernetesGroups: []string{"nodejoin:access-policy:AmazonEKSClusterAdminPolicy"}}},
		{"starts with eks:", awseks.CreateAccessEntryInput{PrincipalArn: aws.String(arn), Username: aws.String("eks:me")}},
		{"not an IAM user or role ARN", awseks.CreateAccessEntryInput{PrincipalArn: aws.String("arn:aws:sts::000000000000:assumed-role/admin/s")}},
		{"STANDARD, EC2_LINUX and EC2_WINDOWS", awseks.CreateAccessEntryInput{PrincipalArn: aws.String(arn), Type: aws.String("FARGATE_LINUX")}},
		{"kubernetesGroups", awseks.CreateAccessEntryInput{PrincipalArn: aws.String(arn), Type: aws.String("EC2_LINUX"), KubernetesGroups: []string{"admins"}}},
		{"username", awseks.CreateAccessEntryInput{PrincipalArn: aws.String(arn), Type: aws.String("EC2_WINDOWS"), Username: aws.String("me")}},
		{"principalArn", awseks.CreateAccessEntryInput{PrincipalArn: aws.String("arn:aws:iam::000000000000:user/me"), Type: aws.String("EC2_LINUX")}},
	} {
		in := tc.in
		in.ClusterName = aws.String("demo")
		_, err := c.CreateAccessEntry(ctx, &in)
		if code, _ := awstest.APICode(t, err); code != "InvalidParameterException" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CreateAccessEntry(%s) = %v; want InvalidParameterException saying %q", aws.ToString(in.Type), err, tc.want)
		}
	}
	d, err := c.DescribeAccessEntry(ctx, &awseks.DescribeAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn)})
	if err != nil || aws.ToString(d.AccessEntry.Type) != "EC2_LINUX" {
		t.Fatalf("DescribeAccessEntry = %+v, %v", d, err)
	}
	l, err := c.ListAccessEntries(ctx, &awseks.ListAccessEntriesInput{ClusterName: aws.String("demo")})
	if err != nil || len(l.AccessEntries) != 1 || l.AccessEntries[0] != arn {
		t.Fatalf("ListAccessEntries = %+v, %v", l, err)
	}
	// A node entry has no access policies; eksctl get accessentry asks of each entry.
	p, err := c.ListAssociatedAccessPolicies(ctx, &awseks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn)})
	if err != nil || aws.ToString(p.PrincipalArn) != arn || aws.ToString(p.ClusterName) != "demo" || p.AssociatedAccessPolicies == nil || len(p.AssociatedAccessPolicies) != 0 {
		t.Fatalf("ListAssociatedAccessPolicies = %+v, %v", p, err)
	}
	if _, err := c.DeleteAccessEntry(ctx, &awseks.DeleteAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteAccessEntry(ctx, &awseks.DeleteAccessEntryInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn)})
	if code, _ := awstest.APICode(t, err); code != "ResourceNotFoundException" {
		t.Errorf("second DeleteAccessEntry = %v", err)
	}
	_, err = c.ListAssociatedAccessPolicies(ctx, &awseks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String("demo"), PrincipalArn: aws.String(arn)})
	if code, _ := awstest.APICode(t, err); code != "ResourceNotFoundException" {
		t.Errorf("ListAssociatedAccessPolicies of a deleted entry = %v", err)
	}
}

// The answers a client gets wrong on the wire, in EKS's error shape.
func TestWireErrors(t *testing.T) {
	c, f, e, url := serve(t)
	ctx := t.Context()
	_, err := c.CreateCluster(ctx, &awseks.CreateClusterInput{Name: aws.String("x"), RoleArn: aws.String(role), ResourcesVpcConfig: &ekstypes.VpcConfigRequest{}})
	if code, _ := awstest.APICode(t, err); code != "InvalidRequestException" || !strings.Contains(err.Error(), "does not implement CreateCluster") {
		t.Errorf("CreateCluster = %v", err)
	}
	f.failNext = true
	_, err = c.ListClusters(ctx, &awseks.ListClustersInput{})
	if code, status := awstest.APICode(t, err); code != "ServerException" || status != http.StatusInternalServerError || strings.Contains(err.Error(), "secret-token") {
		t.Errorf("backend failure = %v (%s %d)", err, code, status)
	}
	e.Throttle(1)
	_, err = c.ListClusters(ctx, &awseks.ListClustersInput{})
	if code, status := awstest.APICode(t, err); code != "TooManyRequestsException" || status != http.StatusTooManyRequests {
		t.Errorf("throttled = %v", err)
	}
	if e.Calls() != 2 {
		t.Errorf("Calls = %d, want 2", e.Calls())
	}

	raw := func(method, path, body string, signed bool) (int, string, map[string]string) {
		t.Helper()
		r, _ := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
		if signed {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-west-2/eks/aws4_request, SignedHeaders=host, Signature=00")
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var msg map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&msg)
		if resp.StatusCode >= 400 && resp.Header.Get("X-Amzn-Errortype") != msg["__type"] {
			t.Errorf("%s %s: header %q, body %v", method, path, resp.Header.Get("X-Amzn-Errortype"), msg)
		}
		return resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), msg
	}
	body := `{"nodegroupName":"ng","nodeRole":"` + role + `","subnets":[]}`
	for _, tc := range []struct {
		method, path, body string
		signed             bool
		status             int
		code, want         string
	}{
		{"GET", "/clusters", "", false, 403, "MissingAuthenticationTokenException", "Missing Authentication Token"},
		{"GET", "/nothing", "", true, 404, "UnknownOperationException", "is no operation of the local EKS"},
		{"POST", "/clusters/demo/node-groups", `{"nodegroupName":"ng","nodeRole":"` + role + `","color":"red"}`, true, 400, "InvalidParameterException", "unknown parameter \"color\""},
		{"POST", "/clusters/demo/node-groups", `{"nodegroupName":7}`, true, 400, "InvalidParameterException", "nodegroupName: want a JSON string"},
		{"POST", "/clusters/demo/node-groups", `{"scalingConfig":{"minSize":"1"}}`, true, 400, "InvalidParameterException", "scalingConfig.minSize: want a JSON number"},
		{"POST", "/clusters/demo/node-groups", `{`, true, 400, "InvalidParameterException", "not valid JSON"},
		{"POST", "/clusters/demo/node-groups", body + body, true, 400, "InvalidParameterException", "more than one JSON object"},
		{"POST", "/clusters/demo/node-groups", `{"nodegroupName":"` + strings.Repeat("a", maxBody) + `"}`, true, 400, "InvalidParameterException", "over 65536 bytes"},
		{"POST", "/clusters/demo/node-groups", "", true, 400, "InvalidParameterException", "empty"},
		{"POST", "/clusters/absent/node-groups", body, true, 404, "ResourceNotFoundException", "absent"},
	} {
		before := f.reached
		status, code, msg := raw(tc.method, tc.path, tc.body, tc.signed)
		if status != tc.status || code != tc.code || !strings.Contains(msg["message"], tc.want) {
			t.Errorf("%s %s %.40q = %d %s %q; want %d %s saying %q", tc.method, tc.path, tc.body, status, code, msg["message"], tc.status, tc.code, tc.want)
		}
		if tc.status != 404 && f.reached != before {
			t.Errorf("%s %s %.40q reached the backend", tc.method, tc.path, tc.body)
		}
	}
}

// New's static clusters answer as before: DescribeCluster, and node groups none.
func TestStatic(t *testing.T) {
	e := New(Cluster{Name: "demo", Endpoint: "https://demo.example", CertificatePEM: []byte("PEM"), IPFamily: "ipv4", ServiceIPv4CIDR: "172.20.0.0/16", Version: "1.37"})
	srv := httptest.NewServer(e)
	defer srv.Close()
	c := awseks.NewFromConfig(awstest.SDKConfig(), func(o *awseks.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	ctx := t.Context()
	d, err := c.DescribeCluster(ctx, &awseks.DescribeClusterInput{Name: aws.String("demo")})
	if err != nil || aws.ToString(d.Cluster.CertificateAuthority.Data) != "UEVN" || d.Cluster.ResourcesVpcConfig == nil {
		t.Fatalf("DescribeCluster = %+v, %v", d, err)
	}
	l, err := c.ListNodegroups(ctx, &awseks.ListNodegroupsInput{ClusterName: aws.String("demo")})
	if err != nil || len(l.Nodegroups) != 0 {
		t.Errorf("ListNodegroups = %+v, %v", l, err)
	}
	_, err = c.CreateNodegroup(ctx, createInput("ng"))
	if code, _ := awstest.APICode(t, err); code != "InvalidRequestException" {
		t.Errorf("CreateNodegroup on a static cluster = %v", err)
	}
	v, err := c.DescribeClusterVersions(ctx, &awseks.DescribeClusterVersionsInput{})
	if err != nil || len(v.ClusterVersions) != 1 {
		t.Errorf("DescribeClusterVersions = %+v, %v", v, err)
	}
}
