package eks

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// fake is an in-memory Backend for the server's tests: it records what reached it, so
// that a test can tell a refused request changed nothing.
type fake struct {
	mu       sync.Mutex
	groups   map[string]eksapi.Nodegroup
	updates  map[string][]eksapi.Update
	entries  map[string]eksapi.AccessEntry
	policies map[string][]eksapi.AssociatedAccessPolicy
	reached  int
	failNext bool
}

var created = eksapi.NewTime(time.Date(2026, 11, 27, 12, 0, 0, 500_000_000, time.UTC))

func newFake() *fake {
	return &fake{groups: map[string]eksapi.Nodegroup{}, updates: map[string][]eksapi.Update{}, entries: map[string]eksapi.AccessEntry{},
		policies: map[string][]eksapi.AssociatedAccessPolicy{}}
}

func (f *fake) enter(cluster string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reached++
	if f.failNext {
		f.failNext = false
		return errors.New("etcd is on fire: secret-token-123")
	}
	if cluster != "demo" {
		return eksapi.NotFound("No cluster found for name: %s.", cluster)
	}
	return nil
}

func (f *fake) ListClusters(context.Context) ([]string, error) {
	return []string{"demo"}, f.enter("demo")
}

func (f *fake) DescribeCluster(_ context.Context, name string) (eksapi.Cluster, error) {
	if err := f.enter(name); err != nil {
		return eksapi.Cluster{}, err
	}
	return eksapi.Cluster{Name: "demo", Arn: "arn:aws:eks:us-west-2:000000000000:cluster/demo", CreatedAt: created, Version: "1.37",
		Endpoint: "https://127.0.0.1:6443", Status: "ACTIVE", Tags: map[string]string{},
		ResourcesVpcConfig:      eksapi.VpcConfig{SubnetIDs: []string{"subnet-0123456789abcdef0"}, SecurityGroupIDs: []string{}, VpcID: "vpc-01234567", PublicAccessCidrs: []string{"0.0.0.0/0"}, EndpointPublicAccess: true},
		KubernetesNetworkConfig: &eksapi.KubernetesNetworkConfig{ServiceIpv4Cidr: "10.100.0.0/16", IPFamily: "ipv4"},
		AccessConfig:            &eksapi.AccessConfig{AuthenticationMode: "API_AND_CONFIG_MAP"}}, nil
}

func (f *fake) ClusterVersions(context.Context) ([]eksapi.ClusterVersion, error) {
	return []eksapi.ClusterVersion{
		{ClusterVersion: "1.36", Status: "STANDARD_SUPPORT"},
		{ClusterVersion: "1.37", Status: "STANDARD_SUPPORT", DefaultVersion: true, ReleaseDate: created},
	}, f.enter("demo")
}

func (f *fake) CreateNodegroup(_ context.Context, cluster string, in *eksapi.CreateNodegroupRequest) (eksapi.Nodegroup, error) {
	if err := f.enter(cluster); err != nil {
		return eksapi.Nodegroup{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.groups[in.NodegroupName]; ok {
		return eksapi.Nodegroup{}, eksapi.InUse("NodeGroup already exists with name %s and cluster name %s", in.NodegroupName, cluster)
	}
	ng := eksapi.Nodegroup{NodegroupName: in.NodegroupName, ClusterName: cluster, Status: "CREATING", CreatedAt: created, ModifiedAt: created,
		InstanceTypes: in.InstanceTypes, Subnets: in.Subnets, AmiType: in.AmiType, NodeRole: in.NodeRole, Labels: in.Labels, Taints: in.Taints,
		Tags: in.Tags, Health: eksapi.Health{Issues: []eksapi.Issue{}}, Resources: eksapi.Resources{AutoScalingGroups: []eksapi.AutoScalingGroup{}}}
	if in.ScalingConfig != nil {
		ng.ScalingConfig = *in.ScalingConfig
	}
	f.groups[in.NodegroupName] = ng
	return ng, nil
}

func (f *fake) group(cluster, name string) (eksapi.Nodegroup, error) {
	if err := f.enter(cluster); err != nil {
		return eksapi.Nodegroup{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ng, ok := f.groups[name]
	if !ok {
		return ng, eksapi.NotFound("No node group found for name: %s.", name)
	}
	return ng, nil
}

func (f *fake) DescribeNodegroup(_ context.Context, cluster, name string) (eksapi.Nodegroup, error) {
	return f.group(cluster, name)
}

func (f *fake) ListNodegroups(_ context.Context, cluster string) ([]string, error) {
	if err := f.enter(cluster); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.groups)), nil
}

func (f *fake) addUpdate(cluster, name, typ string, params []eksapi.UpdateParam) (eksapi.Update, error) {
	if _, err := f.group(cluster, name); err != nil {
		return eksapi.Update{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u := eksapi.Update{ID: name + "-" + strconv.Itoa(len(f.updates[name])), Status: eksapi.UpdateInProgress, Type: typ, Params: params, CreatedAt: created, Errors: []eksapi.ErrorDetail{}}
	f.updates[name] = append(f.updates[name], u)
	return u, nil
}

func (f *fake) UpdateNodegroupConfig(_ context.Context, cluster, name string, in *eksapi.UpdateNodegroupConfigRequest) (eksapi.Update, error) {
	var params []eksapi.UpdateParam
	if s := in.ScalingConfig; s != nil && s.DesiredSize != nil {
		params = append(params, eksapi.UpdateParam{Type: eksapi.ParamDesiredSize, Value: strconv.Itoa(int(*s.DesiredSize))})
	}
	return f.addUpdate(cluster, name, eksapi.UpdateTypeConfig, params)
}

func (f *fake) UpdateNodegroupVersion(_ context.Context, cluster, name string, in *eksapi.UpdateNodegroupVersionRequest) (eksapi.Update, error) {
	return f.addUpdate(cluster, name, eksapi.UpdateTypeVersion, []eksapi.UpdateParam{{Type: eksapi.ParamReleaseVersion, Value: in.ReleaseVersion}})
}

func (f *fake) DescribeUpdate(_ context.Context, cluster, nodegroup, id string) (eksapi.Update, error) {
	if _, err := f.group(cluster, nodegroup); err != nil {
		return eksapi.Update{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.updates[nodegroup] {
		if u.ID == id {
			return u, nil
		}
	}
	return eksapi.Update{}, eksapi.NotFound("No update found for ID: %s.", id)
}

func (f *fake) ListUpdates(_ context.Context, cluster, nodegroup string) ([]string, error) {
	if _, err := f.group(cluster, nodegroup); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, u := range f.updates[nodegroup] {
		ids = append(ids, u.ID)
	}
	return ids, nil
}

func (f *fake) DeleteNodegroup(_ context.Context, cluster, name string) (eksapi.Nodegroup, error) {
	ng, err := f.group(cluster, name)
	if err != nil {
		return ng, err
	}
	f.mu.Lock()
	delete(f.groups, name)
	f.mu.Unlock()
	ng.Status = "DELETING"
	return ng, nil
}

func (f *fake) CreateAccessEntry(_ context.Context, cluster string, in *eksapi.CreateAccessEntryRequest) (eksapi.AccessEntry, error) {
	if err := f.enter(cluster); err != nil {
		return eksapi.AccessEntry{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.entries[in.PrincipalArn]; ok {
		return eksapi.AccessEntry{}, eksapi.InUse("The specified access entry resource is already in use on this cluster: %s.", in.PrincipalArn)
	}
	e := eksapi.AccessEntry{ClusterName: cluster, PrincipalArn: in.PrincipalArn, Type: in.Type, KubernetesGroups: []string{"system:nodes"},
		Username: "system:node:{{EC2PrivateDNSName}}", CreatedAt: created, ModifiedAt: created, Tags: in.Tags}
	f.entries[in.PrincipalArn] = e
	return e, nil
}

func (f *fake) DescribeAccessEntry(_ context.Context, cluster, principal string) (eksapi.AccessEntry, error) {
	if err := f.enter(cluster); err != nil {
		return eksapi.AccessEntry{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[principal]
	if !ok {
		return e, eksapi.NotFound("The specified principalArn could not be found: %s.", principal)
	}
	return e, nil
}

func (f *fake) ListAccessEntries(_ context.Context, cluster string) ([]string, error) {
	if err := f.enter(cluster); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.entries)), nil
}

func (f *fake) DeleteAccessEntry(ctx context.Context, cluster, principal string) error {
	if _, err := f.DescribeAccessEntry(ctx, cluster, principal); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.entries, principal)
	f.mu.Unlock()
	return nil
}
