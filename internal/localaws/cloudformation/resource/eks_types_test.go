package resource

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/eksapi"
)

const nodeRole = "arn:aws:iam::111122223333:role/nodes"

func ngProps(edit func(m map[string]any)) map[string]any {
	m := map[string]any{
		"ClusterName": "demo", "NodeRole": nodeRole, "Subnets": []any{"subnet-0123456789abcdef0"},
		"ScalingConfig": map[string]any{"MinSize": "1", "MaxSize": "3", "DesiredSize": "2"},
		"AmiType":       "AL2023_x86_64_STANDARD", "InstanceTypes": []any{"m5.large"}, "Version": "1.37",
		"Labels": map[string]any{"role": "worker", "tier": "a"},
		"Taints": []any{map[string]any{"Key": "dedicated", "Value": "gpu", "Effect": "NO_SCHEDULE"}},
		"Tags":   map[string]any{"owner": "platform"},
	}
	if edit != nil {
		edit(m)
	}
	return m
}

func TestNodegroupLifecycle(t *testing.T) {
	e := newResEnv(t)
	ctx := context.Background()
	p := e.provisioner("AWS::EKS::Nodegroup")
	props := ngProps(nil)
	c, _ := e.call("AWS::EKS::Nodegroup", "ManagedNodeGroup", props)
	res, err := p.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	name := res.Attributes["NodegroupName"]
	if !regexp.MustCompile(`^ManagedNodeGroup-[A-Z0-9]{12}$`).MatchString(name) || res.PhysicalID != "demo/"+name {
		t.Errorf("Ref %q, name %q: want demo/ManagedNodeGroup-…", res.PhysicalID, name)
	}
	if res.Attributes["ClusterName"] != "demo" || !strings.HasPrefix(res.Attributes["Arn"], "arn:aws:eks:") {
		t.Errorf("attributes %v", res.Attributes)
	}
	if got := e.eks.groups[name].Status; got != "ACTIVE" {
		t.Errorf("status %s after Create, want ACTIVE (Create waits for it)", got)
	}
	created := e.eks.creates[0]
	if !maps.Equal(created.Tags, map[string]string{"owner": "platform", "team": "infra"}) || created.Taints[0].Effect != "NO_SCHEDULE" ||
		*created.ScalingConfig.DesiredSize != 2 || created.AmiType != "AL2023_x86_64_STANDARD" {
		t.Errorf("CreateNodegroup got %+v, want the properties and the stack's tags without aws: ones", created)
	}

	// Sizes, labels and taints: one UpdateNodegroupConfig; a release: one UpdateNodegroupVersion.
	props2 := ngProps(func(m map[string]any) {
		m["ScalingConfig"] = map[string]any{"MinSize": "1", "MaxSize": "5", "DesiredSize": "4"}
		m["Labels"] = map[string]any{"role": "batch"}
		m["Taints"] = []any{map[string]any{"Key": "spot", "Value": "true", "Effect": "PREFER_NO_SCHEDULE"}}
		m["ReleaseVersion"] = "1.37.0-20261127"
		m["ForceUpdateEnabled"] = "true"
	})
	c2, _ := e.call("AWS::EKS::Nodegroup", "ManagedNodeGroup", props2)
	res2, err := p.Update(ctx, c2, res, props)
	if err != nil {
		t.Fatal(err)
	}
	if res2.PhysicalID != res.PhysicalID {
		t.Errorf("Ref %q after update, want %q", res2.PhysicalID, res.PhysicalID)
	}
	if len(e.eks.configReqs) != 1 || len(e.eks.versionReqs) != 1 {
		t.Fatalf("config updates %+v, version updates %+v: want one each", e.eks.configReqs, e.eks.versionReqs)
	}
	cfg := e.eks.configReqs[0]
	if *cfg.ScalingConfig.DesiredSize != 4 || !maps.Equal(cfg.Labels.AddOrUpdateLabels, map[string]string{"role": "batch"}) ||
		!slices.Equal(cfg.Labels.RemoveLabels, []string{"tier"}) || cfg.Taints.AddOrUpdateTaints[0].Key != "spot" || cfg.Taints.RemoveTaints[0].Key != "dedicated" {
		t.Errorf("UpdateNodegroupConfig got %+v", cfg)
	}
	if v := e.eks.versionReqs[0]; v.ReleaseVersion != "1.37.0-20261127" || !v.Force || v.Version != "" {
		t.Errorf("UpdateNodegroupVersion got %+v, want the release, forced", v)
	}

	// Another instance type needs another group; other tags are refused.
	c3, _ := e.call("AWS::EKS::Nodegroup", "ManagedNodeGroup", ngProps(func(m map[string]any) { m["InstanceTypes"] = []any{"m5.xlarge"} }))
	if _, err := p.Update(ctx, c3, res2, props); !errors.Is(err, ErrReplace) {
		t.Errorf("new instance types: %v, want ErrReplace", err)
	}
	c4, _ := e.call("AWS::EKS::Nodegroup", "ManagedNodeGroup", ngProps(func(m map[string]any) { m["Tags"] = map[string]any{"owner": "ml"} }))
	if _, err := p.Update(ctx, c4, res2, props); err == nil || !strings.Contains(err.Error(), "Tags") {
		t.Errorf("new tags: %v, want a refusal naming Tags", err)
	}

	if err := p.Delete(ctx, c, res2); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.eks.groups[name]; ok {
		t.Error("the node group remains after Delete")
	}
	if err := p.Delete(ctx, c, res2); err != nil {
		t.Errorf("deleting it again: %v, want no error", err)
	}
}

func TestNodegroupFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]any
		setup func(b *testBackend)
		// update, when set, is the properties of an update after a good Create.
		update map[string]any
		want   []string
	}{{
		name:  "nodes never join",
		props: ngProps(func(m map[string]any) { m["NodegroupName"] = "ng" }),
		setup: func(b *testBackend) {
			b.failCreate["ng"] = eksapi.Issue{Code: "NodeCreationFailure", Message: "Instances failed to join the kubernetes cluster", ResourceIDs: []string{"i-0123456789abcdef0"}}
		},
		want: []string{"Nodegroup ng in cluster demo is CREATE_FAILED", "Issue(Code=NodeCreationFailure, Message=Instances failed to join the kubernetes cluster, ResourceIds=[i-0123456789abcdef0])"},
	}, {
		name:   "an update fails",
		props:  ngProps(func(m map[string]any) { m["NodegroupName"] = "ng" }),
		setup:  func(b *testBackend) { b.failUpdates = true },
		update: ngProps(func(m map[string]any) { m["NodegroupName"] = "ng"; m["Version"] = "1.38" }),
		want:   []string{"is Failed", "ErrorCode=PodEvictionFailure", "Reached max retries while trying to evict pods"},
	}, {
		name:  "no such cluster",
		props: ngProps(func(m map[string]any) { m["ClusterName"] = "nope" }),
		want:  []string{`Resource handler returned message: "No cluster found for name: nope." (Service: Eks, Status Code: 404`},
	}, {
		name:  "EKS refuses the role",
		props: ngProps(func(m map[string]any) { m["NodeRole"] = "nodes" }),
		want:  []string{`nodeRole: \"nodes\" is not an IAM role ARN`, "Status Code: 400"},
	}, {
		name:  "no role",
		props: ngProps(func(m map[string]any) { delete(m, "NodeRole") }),
		want:  []string{"Properties validation failed for resource ManagedNodeGroup with message: #: required key [NodeRole] not found"},
	}, {
		name:  "taints not a list",
		props: ngProps(func(m map[string]any) { m["Taints"] = "dedicated=gpu" }),
		want:  []string{"#/Taints: expected type: JSONArray, found: String"},
	}, {
		name:  "an unknown property",
		props: ngProps(func(m map[string]any) { m["MaxPods"] = "17" }),
		want:  []string{"#: extraneous key [MaxPods] is not permitted"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newResEnv(t)
			if tc.setup != nil {
				tc.setup(e.eks)
			}
			p := e.provisioner("AWS::EKS::Nodegroup")
			c, _ := e.call("AWS::EKS::Nodegroup", "ManagedNodeGroup", tc.props)
			res, err := p.Create(context.Background(), c)
			if tc.update != nil {
				if err != nil {
					t.Fatal(err)
				}
				c2, _ := e.call("AWS::EKS::Nodegroup", "ManagedNodeGroup", tc.update)
				_, err = p.Update(context.Background(), c2, res, tc.props)
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "operation error") {
				t.Errorf("error %q leaks the SDK's or the transport's text", err)
			}
		})
	}
}

func TestNodegroupCreateFailedKeepsItsID(t *testing.T) {
	e := newResEnv(t)
	e.eks.failCreate["ng"] = eksapi.Issue{Code: "NodeCreationFailure", Message: "Instances failed to join the kubernetes cluster"}
	c, _ := e.call("AWS::EKS::Nodegroup", "ManagedNodeGroup", ngProps(func(m map[string]any) { m["NodegroupName"] = "ng" }))
	p := e.provisioner("AWS::EKS::Nodegroup")
	res, err := p.Create(context.Background(), c)
	if err == nil || res.PhysicalID != "demo/ng" {
		t.Fatalf("Create: %+v, %v; want the failure with the group's ID, for the rollback", res, err)
	}
	if err := p.Delete(context.Background(), c, res); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.eks.groups["ng"]; ok {
		t.Error("the failed node group remains after Delete")
	}
}

func TestAccessEntry(t *testing.T) {
	e := newResEnv(t)
	ctx := context.Background()
	p := e.provisioner("AWS::EKS::AccessEntry")
	props := map[string]any{"ClusterName": "demo", "PrincipalArn": nodeRole, "Type": "EC2_LINUX",
		"Tags": []any{map[string]any{"Key": "owner", "Value": "platform"}}}
	c, _ := e.call("AWS::EKS::AccessEntry", "NodeAccess", props)
	res, err := p.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if res.PhysicalID != "demo|"+nodeRole || !strings.HasPrefix(res.Attributes["AccessEntryArn"], "arn:aws:eks:") {
		t.Errorf("result %+v, want Ref demo|<role> and the entry's ARN", res)
	}
	if got := e.eks.entries[nodeRole]; got.Type != "EC2_LINUX" || !maps.Equal(got.Tags, map[string]string{"owner": "platform", "team": "infra"}) {
		t.Errorf("entry %+v", got)
	}
	c2, _ := e.call("AWS::EKS::AccessEntry", "NodeAccess", map[string]any{"ClusterName": "demo", "PrincipalArn": nodeRole, "Type": "EC2_WINDOWS"})
	if _, err := p.Update(ctx, c2, res, props); !errors.Is(err, ErrReplace) {
		t.Errorf("another type: %v, want ErrReplace", err)
	}
	if err := p.Delete(ctx, c, res); err != nil {
		t.Fatal(err)
	}
	if len(e.eks.entries) != 0 {
		t.Errorf("entries %v remain after Delete", e.eks.entries)
	}
	if err := p.Delete(ctx, c, res); err != nil {
		t.Errorf("deleting it again: %v, want no error", err)
	}

	// An access policy EKS refuses (a node entry takes none) fails the creation and
	// leaves no entry behind.
	c3, _ := e.call("AWS::EKS::AccessEntry", "NodeAccess", map[string]any{"ClusterName": "demo", "PrincipalArn": nodeRole, "Type": "EC2_LINUX",
		"AccessPolicies": []any{map[string]any{"PolicyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
			"AccessScope": map[string]any{"Type": "cluster"}}}})
	if _, err := p.Create(ctx, c3); err == nil || !strings.Contains(err.Error(), "only STANDARD entries take access policies") {
		t.Errorf("Create of a node entry with an access policy: %v, want EKS's refusal", err)
	}
	if len(e.eks.entries) != 0 {
		t.Errorf("entries %v remain after a failed Create", e.eks.entries)
	}
}

func TestComputeAndEKSTypes(t *testing.T) {
	want := []string{"AWS::AutoScaling::AutoScalingGroup", "AWS::EC2::LaunchTemplate", "AWS::EKS::AccessEntry", "AWS::EKS::Nodegroup"}
	got := Types()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("Types() = %v, missing %s", got, w)
		}
	}
}
