package eks

import (
	"context"
	"slices"

	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// static is New's backend: clusters given once, with no node groups, updates or access
// entries, and no way to create them (nodeadm's tests need DescribeCluster only).
type static struct {
	clusters map[string]eksapi.Cluster
}

func newStatic(clusters []Cluster) *static {
	s := &static{clusters: map[string]eksapi.Cluster{}}
	for _, c := range clusters {
		s.clusters[c.Name] = staticCluster(c)
	}
	return s
}

func (s *static) cluster(name string) (eksapi.Cluster, error) {
	c, ok := s.clusters[name]
	if !ok {
		return c, eksapi.NotFound("No cluster found for name: %s.", name)
	}
	return c, nil
}

func (s *static) ListClusters(context.Context) ([]string, error) {
	names := make([]string, 0, len(s.clusters))
	for n := range s.clusters {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

func (s *static) DescribeCluster(_ context.Context, name string) (eksapi.Cluster, error) {
	return s.cluster(name)
}

func (s *static) ClusterVersions(context.Context) ([]eksapi.ClusterVersion, error) {
	var out []eksapi.ClusterVersion
	for _, n := range must(s.ListClusters(context.Background())) {
		v := s.clusters[n].Version
		if v != "" && !slices.ContainsFunc(out, func(c eksapi.ClusterVersion) bool { return c.ClusterVersion == v }) {
			out = append(out, eksapi.ClusterVersion{ClusterVersion: v, ClusterType: "eks", Status: "STANDARD_SUPPORT", VersionStatus: "STANDARD_SUPPORT"})
		}
	}
	return out, nil
}

func must[T any](v T, _ error) T { return v }

// noNodegroup is every node group lookup's answer: the cluster has none.
func (s *static) noNodegroup(cluster, name string) error {
	if _, err := s.cluster(cluster); err != nil {
		return err
	}
	return eksapi.NotFound("No node group found for name: %s.", name)
}

func (s *static) CreateNodegroup(_ context.Context, cluster string, _ *eksapi.CreateNodegroupRequest) (eksapi.Nodegroup, error) {
	if _, err := s.cluster(cluster); err != nil {
		return eksapi.Nodegroup{}, err
	}
	return eksapi.Nodegroup{}, eksapi.InvalidRequest("cluster %s is a static cluster of the local EKS: it takes no node groups", cluster)
}

func (s *static) DescribeNodegroup(_ context.Context, cluster, name string) (eksapi.Nodegroup, error) {
	return eksapi.Nodegroup{}, s.noNodegroup(cluster, name)
}

func (s *static) ListNodegroups(_ context.Context, cluster string) ([]string, error) {
	_, err := s.cluster(cluster)
	return nil, err
}

func (s *static) UpdateNodegroupConfig(_ context.Context, cluster, name string, _ *eksapi.UpdateNodegroupConfigRequest) (eksapi.Update, error) {
	return eksapi.Update{}, s.noNodegroup(cluster, name)
}

func (s *static) UpdateNodegroupVersion(_ context.Context, cluster, name string, _ *eksapi.UpdateNodegroupVersionRequest) (eksapi.Update, error) {
	return eksapi.Update{}, s.noNodegroup(cluster, name)
}

func (s *static) DescribeUpdate(_ context.Context, cluster, nodegroup, _ string) (eksapi.Update, error) {
	return eksapi.Update{}, s.noNodegroup(cluster, nodegroup)
}

func (s *static) ListUpdates(_ context.Context, cluster, nodegroup string) ([]string, error) {
	return nil, s.noNodegroup(cluster, nodegroup)
}

func (s *static) DeleteNodegroup(_ context.Context, cluster, name string) (eksapi.Nodegroup, error) {
	return eksapi.Nodegroup{}, s.noNodegroup(cluster, name)
}

func (s *static) CreateAccessEntry(_ context.Context, cluster string, _ *eksapi.CreateAccessEntryRequest) (eksapi.AccessEntry, error) {
	if _, err := s.cluster(cluster); err != nil {
		return eksapi.AccessEntry{}, err
	}
	return eksapi.AccessEntry{}, eksapi.InvalidRequest("cluster %s is a static cluster of the local EKS: it takes no access entries", cluster)
}

func (s *static) DescribeAccessEntry(_ context.Context, cluster, principal string) (eksapi.AccessEntry, error) {
	if _, err := s.cluster(cluster); err != nil {
		return eksapi.AccessEntry{}, err
	}
	return eksapi.AccessEntry{}, eksapi.NotFound("The specified principalArn could not be found: %s.", principal)
}

func (s *static) ListAccessEntries(_ context.Context, cluster string) ([]string, error) {
	_, err := s.cluster(cluster)
	return nil, err
}

func (s *static) DeleteAccessEntry(ctx context.Context, cluster, principal string) error {
	_, err := s.DescribeAccessEntry(ctx, cluster, principal)
	return err
}
