package bootstrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/pki"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// eksResolver answers DescribeCluster for one cluster, as EKS would.
type eksResolver struct {
	calls int
	ca    []byte
}

func (r *eksResolver) DescribeCluster(_ context.Context, name string, _ int) (*userdata.ClusterInfo, error) {
	r.calls++
	if name != "demo" {
		return nil, errors.New("ResourceNotFoundException: No cluster found for name: " + name)
	}
	return &userdata.ClusterInfo{Endpoint: "https://198.18.0.1:6443", CertificateData: r.ca, ServiceIPv4CIDR: "10.100.0.0/16"}, nil
}

func (r *eksResolver) VPCIPv4CIDRs(context.Context) ([]string, error) {
	return []string{"198.18.0.0/16"}, nil
}

// A NodeConfig that names only its cluster is completed from DescribeCluster, as
// bootstrap.sh completes a name alone; one that gives its endpoint and CA asks nothing.
func TestNodeConfigNamingOnlyItsClusterIsCompleted(t *testing.T) {
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "nodeconfig.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return "file://" + p
	}
	nameOnly := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: %s\n"
	ca, err := pki.NewCA("demo", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r := &eksResolver{ca: pki.EncodeCert(ca.Cert)}
	l, err := Load(t.Context(), []string{write(strings.Replace(nameOnly, "%s", "demo", 1))}, Environment{Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	c := l.Merged.Spec.Cluster
	if c.APIServerEndpoint != "https://198.18.0.1:6443" || len(c.CertificateAuthority) == 0 || c.CIDR != "10.100.0.0/16" || r.calls != 1 {
		t.Errorf("cluster %+v after %d calls", c, r.calls)
	}
	if errs := l.Merged.Validate(); len(errs) > 0 {
		t.Errorf("the completed NodeConfig does not validate: %v", errs)
	}
	// A cluster EKS does not know stays incomplete: validation says what is missing,
	// Incomplete why.
	l, err = Load(t.Context(), []string{write(strings.Replace(nameOnly, "%s", "other", 1))}, Environment{Resolver: r})
	if err != nil || l.Incomplete == nil || !strings.Contains(l.Incomplete.Error(), "names cluster other without its apiServerEndpoint") ||
		!strings.Contains(l.Incomplete.Error(), "No cluster found") || len(l.Merged.Validate()) == 0 {
		t.Errorf("an unknown cluster: %v, %v", err, l.Incomplete)
	}
	full := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo\n    apiServerEndpoint: https://10.0.0.1\n    certificateAuthority: TUE9PQ==\n    cidr: 10.100.0.0/16\n"
	r.calls = 0
	if _, err := Load(t.Context(), []string{write(full)}, Environment{Resolver: r}); err != nil || r.calls != 0 {
		t.Errorf("a complete NodeConfig: %v, %d DescribeCluster calls", err, r.calls)
	}
}
