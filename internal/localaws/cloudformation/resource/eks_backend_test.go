package resource

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// testBackend is an in-memory EKS backend whose node groups and updates move on each
// time they are described: a node group is CREATING, then ACTIVE (or CREATE_FAILED
// with an issue when failCreate names it); an update is InProgress, then Successful
// (or Failed when failUpdates); a deleted group is DELETING, then gone.
type testBackend struct {
	mu          sync.Mutex
	groups      map[string]*eksapi.Nodegroup
	updates     map[string]*eksapi.Update
	entries     map[string]eksapi.AccessEntry
	failCreate  map[string]eksapi.Issue
	failUpdates bool
	configReqs  []eksapi.UpdateNodegroupConfigRequest
	versionReqs []eksapi.UpdateNodegroupVersionRequest
	creates     []eksapi.CreateNodegroupRequest
}

var backendTime = eksapi.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))

func newTestBackend() *testBackend {
	return &testBackend{groups: map[string]*eksapi.Nodegroup{}, updates: map[string]*eksapi.Update{},
		entries: map[string]eksapi.AccessEntry{}, failCreate: map[string]eksapi.Issue{}}
}

func checkCluster(name string) error {
	if name != "demo" {
		return eksapi.NotFound("No cluster found for name: %s.", name)
	}
	return nil
}

func (b *testBackend) ListClusters(context.Context) ([]string, error) { return []string{"demo"}, nil }

func (b *testBackend) DescribeCluster(_ context.Context, name string) (eksapi.Cluster, error) {
	return eksapi.Cluster{Name: name, Status: "ACTIVE", Version: "1.37"}, checkCluster(name)
}

func (b *testBackend) ClusterVersions(context.Context) ([]eksapi.ClusterVersion, error) {
	return []eksapi.ClusterVersion{{ClusterVersion: "1.37", Status: "STANDARD_SUPPORT", DefaultVersion: true}}, nil
}

func (b *testBackend) CreateNodegroup(_ context.Context, cluster string, in *eksapi.CreateNodegroupRequest) (eksapi.Nodegroup, error) {
	if err := checkCluster(cluster); err != nil {
		return eksapi.Nodegroup{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.groups[in.NodegroupName]; ok {
		return eksapi.Nodegroup{}, eksapi.InUse("NodeGroup already exists with name %s and cluster name %s", in.NodegroupName, cluster)
	}
	b.creates = append(b.creates, *in)
	ng := &eksapi.Nodegroup{NodegroupName: in.NodegroupName, ClusterName: cluster, Status: "CREATING", CreatedAt: backendTime,
		NodegroupArn:  "arn:aws:eks:us-west-2:111122223333:nodegroup/" + cluster + "/" + in.NodegroupName + "/0123",
		InstanceTypes: in.InstanceTypes, Subnets: in.Subnets, AmiType: in.AmiType, NodeRole: in.NodeRole, Labels: in.Labels,
		Taints: in.Taints, Tags: in.Tags, Version: in.Version, ReleaseVersion: in.ReleaseVersion, Health: eksapi.Health{Issues: []eksapi.Issue{}}}
	if in.ScalingConfig != nil {
		ng.ScalingConfig = *in.ScalingConfig
	}
	b.groups[in.NodegroupName] = ng
	return *ng, nil
}

func (b *testBackend) DescribeNodegroup(_ context.Context, cluster, name string) (eksapi.Nodegroup, error) {
	if err := checkCluster(cluster); err != nil {
		return eksapi.Nodegroup{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ng, ok := b.groups[name]
	if !ok {
		return eksapi.Nodegroup{}, eksapi.NotFound("No node group found for name: %s.", name)
	}
	out := *ng
	switch ng.Status {
	case "CREATING":
		ng.Status = "ACTIVE"
		if issue, fail := b.failCreate[name]; fail {
			ng.Status, ng.Health.Issues = "CREATE_FAILED", []eksapi.Issue{issue}
		}
	case "UPDATING":
		ng.Status = "ACTIVE"
	case "DELETING":
		delete(b.groups, name)
	}
	return out, nil
}

func (b *testBackend) ListNodegroups(context.Context, string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.groups)), nil
}

// update starts an update of ng; b.mu is held.
func (b *testBackend) update(ng *eksapi.Nodegroup, typ string) eksapi.Update {
	u := &eksapi.Update{ID: "u-" + strconv.Itoa(len(b.updates)+1), Status: "InProgress", Type: typ, CreatedAt: backendTime, Errors: []eksapi.ErrorDetail{}}
	b.updates[u.ID] = u
	ng.Status = "UPDATING"
	return *u
}

func (b *testBackend) UpdateNodegroupConfig(_ context.Context, cluster, name string, in *eksapi.UpdateNodegroupConfigRequest) (eksapi.Update, error) {
	if err := checkCluster(cluster); err != nil {
		return eksapi.Update{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ng, ok := b.groups[name]
	if !ok {
		return eksapi.Update{}, eksapi.NotFound("No node group found for name: %s.", name)
	}
	b.configReqs = append(b.configReqs, *in)
	if in.ScalingConfig != nil {
		ng.ScalingConfig = *in.ScalingConfig
	}
	return b.update(ng, "ConfigUpdate"), nil
}

func (b *testBackend) UpdateNodegroupVersion(_ context.Context, cluster, name string, in *eksapi.UpdateNodegroupVersionRequest) (eksapi.Update, error) {
	if err := checkCluster(cluster); err != nil {
		return eksapi.Update{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ng, ok := b.groups[name]
	if !ok {
		return eksapi.Update{}, eksapi.NotFound("No node group found for name: %s.", name)
	}
	b.versionReqs = append(b.versionReqs, *in)
	if in.Version != "" {
		ng.Version = in.Version
	}
	if in.ReleaseVersion != "" {
		ng.ReleaseVersion = in.ReleaseVersion
	}
	return b.update(ng, "VersionUpdate"), nil
}

func (b *testBackend) DescribeUpdate(_ context.Context, cluster, _, id string) (eksapi.Update, error) {
	if err := checkCluster(cluster); err != nil {
		return eksapi.Update{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.updates[id]
	if !ok {
		return eksapi.Update{}, eksapi.NotFound("No update found for ID: %s.", id)
	}
	out := *u
	if u.Status == "InProgress" {
		u.Status = "Successful"
		if b.failUpdates {
			u.Status = "Failed"
			u.Errors = []eksapi.ErrorDetail{{ErrorCode: "PodEvictionFailure", ErrorMessage: "Reached max retries while trying to evict pods from nodes in node group ng", ResourceIDs: []string{"ip-10-0-0-1"}}}
		}
	}
	return out, nil
}

func (b *testBackend) ListUpdates(context.Context, string, string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.updates)), nil
}

func (b *testBackend) DeleteNodegroup(_ context.Context, cluster, name string) (eksapi.Nodegroup, error) {
	if err := checkCluster(cluster); err != nil {
		return eksapi.Nodegroup{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ng, ok := b.groups[name]
	if !ok {
		return eksapi.Nodegroup{}, eksapi.NotFound("No node group found for name: %s.", name)
	}
	ng.Status = "DELETING"
	return *ng, nil
}

func (b *testBackend) CreateAccessEntry(_ context.Context, cluster string, in *eksapi.CreateAccessEntryRequest) (eksapi.AccessEntry, error) {
	if err := checkCluster(cluster); err != nil {
		return eksapi.AccessEntry{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.entries[in.PrincipalArn]; ok {
		return eksapi.AccessEntry{}, eksapi.InUse("The specified access entry resource is already in use on this cluster.")
	}
	ae := eksapi.AccessEntry{ClusterName: cluster, PrincipalArn: in.PrincipalArn, Type: in.Type, Tags: in.Tags, KubernetesGroups: []string{"system:nodes"},
		AccessEntryArn: "arn:aws:eks:us-west-2:111122223333:access-entry/" + cluster + "/role/111122223333/nodes/0123", CreatedAt: backendTime}
	b.entries[in.PrincipalArn] = ae
	return ae, nil
}

func (b *testBackend) DescribeAccessEntry(_ context.Context, cluster, principal string) (eksapi.AccessEntry, error) {
	if err := checkCluster(cluster); err != nil {
		return eksapi.AccessEntry{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ae, ok := b.entries[principal]
	if !ok {
		return eksapi.AccessEntry{}, eksapi.NotFound("The specified principalArn could not be found.")
	}
	return ae, nil
}

func (b *testBackend) ListAccessEntries(context.Context, string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.entries)), nil
}

func (b *testBackend) DeleteAccessEntry(_ context.Context, cluster, principal string) error {
	if err := checkCluster(cluster); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.entries[principal]; !ok {
		return eksapi.NotFound("The specified principalArn could not be found.")
	}
	delete(b.entries, principal)
	return nil
}

// The access-policy calls: as in EKS, only STANDARD entries take policies; the test
// entries keep none, since the tests here assert what CloudFormation asks of EKS.

func (b *testBackend) UpdateAccessEntry(_ context.Context, _, principalARN string, _ *eksapi.UpdateAccessEntryRequest) (eksapi.AccessEntry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entries[principalARN], nil
}

func (b *testBackend) AssociateAccessPolicy(_ context.Context, _, principalARN string, in *eksapi.AssociateAccessPolicyRequest) (eksapi.AssociatedAccessPolicy, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entries[principalARN].Type != "STANDARD" {
		return eksapi.AssociatedAccessPolicy{}, eksapi.InvalidParameter("The access entry of %s is of type %s; only STANDARD entries take access policies", principalARN, b.entries[principalARN].Type)
	}
	return eksapi.AssociatedAccessPolicy{PolicyArn: in.PolicyArn}, nil
}

func (b *testBackend) DisassociateAccessPolicy(context.Context, string, string, string) error {
	return nil
}

func (b *testBackend) ListAssociatedAccessPolicies(context.Context, string, string) ([]eksapi.AssociatedAccessPolicy, error) {
	return nil, nil
}
